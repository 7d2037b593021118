//===- reference_attention.h - float64 attention and RoPE -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The float64 references that kvq's results are judged against, written
// apart from the runtime (no shared code or tables): causal GQA attention
// and the RoPE rotation. kvq-eval measures every method's attention error
// against causalAttention; the runtime's tests and the call-sequence fuzzer
// compare kvq_cache_attend with attention64 (the same function, the last
// queries of a cache, every score summed in double).
//
// Built without floating-point contraction (no a * b + c in one rounding),
// so the results are the same bits on every architecture, in every ISA
// clone and for any thread count.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_REFERENCE_REFERENCE_ATTENTION_H
#define KVQ_TOOLS_REFERENCE_REFERENCE_ATTENTION_H

#include <cstdint>
#include <functional>
#include <vector>

namespace kvq::reference {

/// How a score's dot product q . k is summed; everything after the scores
/// (maximum, exponentials, softmax sum, weighted sum of V) is in double.
enum class ScoreSum {
  /// In double, channel after channel: the oracle of the runtime's tests.
  Double,
  /// In float, eight lanes (lane l sums the products of the channels
  /// c == l mod 8), the lanes added pairwise, then the tail: kvq-eval's
  /// (fast on long dumps; its reports are in these numbers).
  FloatLanes8,
};

/// Causal GQA attention with scale 1/sqrt(headDim). Query i sits at
/// positions[i] (ascending) and sees the tokens 0..positions[i]; q is
/// [positions.size()][qHeads][headDim] (query i's heads), k and v are
/// [tokens][kvHeads][headDim] and qHeads a multiple of kvHeads. Returns
/// [positions.size()][qHeads][headDim]. `threads` share the work without
/// changing a bit of the result; `progress(done, total)` is called on the
/// calling thread as its work items finish.
std::vector<double> causalAttention(
    const float *q, int64_t qHeads, const float *k, const float *v,
    int64_t kvHeads, int64_t headDim, const std::vector<int64_t> &positions,
    ScoreSum sum, int threads = 1,
    const std::function<void(int64_t done, int64_t total)> &progress = nullptr);

/// The last nQueries positions of a cache of `length` tokens, scores
/// summed in double: K and V are fetched [tokens][heads][d], q is
/// [nQueries][qHeads][d].
std::vector<double> attention64(const std::vector<float> &K,
                                const std::vector<float> &V, int64_t length,
                                int heads, int d, const std::vector<float> &q,
                                int64_t nQueries, int qHeads);

/// k is [T][H][D] keys before RoPE; returns them rotated: pair i of a head
/// (channels (2i, 2i+1) when interleaved, (i, i + D/2) otherwise) turns by
/// t * theta^(-2i/D) at token t. Every angle, cos/sin and rotated pair is
/// computed in double with libm and rounded to float once (the runtime's
/// rotation, runtime/kernels/rope/rope.cpp, has its own series and float
/// tables).
std::vector<float> rotateRope(const std::vector<float> &k, int64_t T, int64_t H,
                              int64_t D, double theta, bool interleaved);

} // namespace kvq::reference

#endif // KVQ_TOOLS_REFERENCE_REFERENCE_ATTENTION_H
