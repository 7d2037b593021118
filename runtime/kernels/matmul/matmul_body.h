//===- matmul_body.h - The matmul kernel over a vector type -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_matmul's blocked loops and register tiles, written once over a vector
// type V, for matmul.h's summation order. Each kernel file (reference,
// AVX2, AVX-512, NEON) defines V and KVQ_MATMUL_TARGET (its target
// attribute, or nothing) and includes this file once: everything here has
// internal linkage and carries that attribute, so no vector-extended code
// leaks into a path that runs before the CPU check.
//
// V provides: T (the vector), W (lanes, dividing 32), zero(), loadF32,
// loadF16, loadBf16 (W consecutive elements, widened exactly), fma(a, b, c)
// = a * b + c rounded once, add, hsum (the lanes of one vector added by
// halving: l + l + W/2, ..., as matmul.h's tree), and the tile shapes:
// kDecodeRows (weight rows per tile when m == 1), kTileM x kTileN (input
// rows x weight rows per tile otherwise).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_MATMUL_TARGET
#error "define KVQ_MATMUL_TARGET (the kernels' target attribute) first"
#endif

#include "matmul.h"

namespace {
namespace matmul_body {

using kvq::kMatmulLanes;
using kvq::MatmulArgs;

/// Bytes of weight rows a block of prefill keeps hot while every input tile
/// passes over them (about half of a core's L2): the weights then come from
/// memory once per call, where a block of input rows kept hot instead had
/// every weight tile read from memory once per block.
constexpr int64_t kWeightBlockBytes = 512 * 1024;

template <class V, kvq_weight_type WT>
KVQ_MATMUL_TARGET inline typename V::T loadWeights(const void *w, int64_t i) {
  if constexpr (WT == KVQ_WEIGHT_F16)
    return V::loadF16(static_cast<const uint16_t *>(w) + i);
  else if constexpr (WT == KVQ_WEIGHT_BF16)
    return V::loadBf16(static_cast<const uint16_t *>(w) + i);
  else
    return V::loadF32(static_cast<const float *>(w) + i);
}

/// The tree of matmul.h over 32 / W vectors of partial sums.
template <class V>
KVQ_MATMUL_TARGET inline float reduce(typename V::T *acc) {
  constexpr int C = kMatmulLanes / V::W;
  for (int n = C; n > 1; n /= 2)
    for (int c = 0; c < n / 2; ++c)
      acc[c] = V::add(acc[c], acc[c + n / 2]);
  return V::hsum(acc[0]);
}

/// One chunk of 32 elements: x rows at xs (xStride apart), weight rows at
/// ws (wStride apart, of WT), both from element offset `at`.
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET inline void chunk(typename V::T (&acc)[MR][NR][kMatmulLanes / V::W],
                                    const float *xs, int64_t xStride,
                                    const void *ws, int64_t wStride,
                                    int64_t at) {
  constexpr int C = kMatmulLanes / V::W;
  for (int c = 0; c < C; ++c) {
    typename V::T xv[MR];
    for (int i = 0; i < MR; ++i)
      xv[i] = V::loadF32(xs + i * xStride + at + c * V::W);
    for (int j = 0; j < NR; ++j) {
      typename V::T wv = loadWeights<V, WT>(ws, j * wStride + at + c * V::W);
      for (int i = 0; i < MR; ++i)
        acc[i][j][c] = V::fma(xv[i], wv, acc[i][j][c]);
    }
  }
}

/// Outputs y[i0 .. i0 + MR) x [j0 .. j0 + NR).
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET void tile(const MatmulArgs &a, int64_t i0, int64_t j0) {
  constexpr int C = kMatmulLanes / V::W;
  typename V::T acc[MR][NR][C];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      for (int c = 0; c < C; ++c)
        acc[i][j][c] = V::zero();
  const float *x = a.x + i0 * a.xStride;
  const int64_t wBytes = kvq::weightBytes(WT);
  const void *w = static_cast<const char *>(a.w) + j0 * a.wStride * wBytes;
  const int64_t whole = a.k - a.k % kMatmulLanes;
  for (int64_t at = 0; at < whole; at += kMatmulLanes)
    chunk<V, MR, NR, WT>(acc, x, a.xStride, w, a.wStride, at);
  if (whole < a.k) {
    // The last, partial chunk from zero-padded copies (matmul.h: the same
    // sums as stopping at k).
    alignas(64) float xt[MR][kMatmulLanes], wt[NR][kMatmulLanes];
    const int64_t rest = a.k - whole;
    for (int i = 0; i < MR; ++i)
      for (int l = 0; l < kMatmulLanes; ++l)
        xt[i][l] = l < rest ? x[i * a.xStride + whole + l] : 0.0f;
    for (int j = 0; j < NR; ++j)
      for (int l = 0; l < kMatmulLanes; ++l)
        wt[j][l] = l < rest ? kvq::weightAt(w, WT, j * a.wStride + whole + l)
                            : 0.0f;
    chunk<V, MR, NR, KVQ_WEIGHT_F32>(acc, &xt[0][0], kMatmulLanes, &wt[0][0],
                                     kMatmulLanes, 0);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      a.y[(i0 + i) * a.yStride + j0 + j] += reduce<V>(acc[i][j]);
}

/// Input rows [i, i + MR) against weight rows [j0, j1), kTileN at a time.
template <class V, int MR, kvq_weight_type WT>
KVQ_MATMUL_TARGET void weightRows(const MatmulArgs &a, int64_t i, int64_t j0,
                                  int64_t j1) {
  int64_t j = j0;
  for (; j + V::kTileN <= j1; j += V::kTileN)
    tile<V, MR, V::kTileN, WT>(a, i, j);
  for (; j < j1; ++j)
    tile<V, MR, 1, WT>(a, i, j);
}

template <class V, kvq_weight_type WT>
KVQ_MATMUL_TARGET void run(const MatmulArgs &a, int64_t j0, int64_t j1) {
  if (a.m == 1) {
    // Decode: stream the weight rows, kDecodeRows at a time.
    int64_t j = j0;
    for (; j + V::kDecodeRows <= j1; j += V::kDecodeRows)
      tile<V, 1, V::kDecodeRows, WT>(a, 0, j);
    for (; j < j1; ++j)
      tile<V, 1, 1, WT>(a, 0, j);
    return;
  }
  // Prefill: a block of weight rows, read from memory once, stays in L2
  // while each register tile of input rows (kTileM rows) passes over it
  // kTileN rows at a time.
  const int64_t rowBytes = (a.k > 0 ? a.k : 1) * kvq::weightBytes(WT);
  int64_t block = kWeightBlockBytes / rowBytes;
  block = block < V::kTileN ? V::kTileN : block - block % V::kTileN;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = jb + block < j1 ? jb + block : j1;
    int64_t i = 0;
    for (; i + V::kTileM <= a.m; i += V::kTileM)
      weightRows<V, V::kTileM, WT>(a, i, jb, je);
    for (; i < a.m; ++i)
      weightRows<V, 1, WT>(a, i, jb, je);
  }
}

/// The table entry: run() for the call's weight type.
template <class V>
KVQ_MATMUL_TARGET void kernel(const MatmulArgs &a, int64_t j0, int64_t j1) {
  switch (a.wType) {
  case KVQ_WEIGHT_F16:
    return run<V, KVQ_WEIGHT_F16>(a, j0, j1);
  case KVQ_WEIGHT_BF16:
    return run<V, KVQ_WEIGHT_BF16>(a, j0, j1);
  default:
    return run<V, KVQ_WEIGHT_F32>(a, j0, j1);
  }
}

} // namespace matmul_body
} // namespace
