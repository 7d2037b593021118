//===- attention.h - Fused decode attention over packed storage -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_cache_attend computes softmax(q.K^T / sqrt(d)) . V straight from each
// store's packed blocks: stores walk their own layout (attendKeys /
// attendValues) and call the AttendOps inner kernels, which dequantize in
// registers; this driver owns the queries, the chunked online softmax and
// the causal mask. No fp16/f32 copy of K or V is ever made.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_ATTENTION_H
#define KVQ_RUNTIME_CPU_ATTENTION_H

#include "kernels.h"
#include "kvq/runtime.h"
#include "rope.h"
#include "rope_keys.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

class LayerStore;
class Rope;

/// The buffers of an attention call, apart so that the driver can keep
/// them (their capacity) from one call to the next on each thread: a
/// small model's decode step is a few microseconds of attention per layer,
/// which a dozen allocations per call showed up in.
struct AttendBuffers {
  std::vector<float> q; ///< [heads][nq][d]
  /// [t - t0][heads][nq]: scores after attendKeys, softmax weights (masked
  /// ones exactly 0) when attendValues runs.
  std::vector<float> scores;
  std::vector<float> acc; ///< [heads][nq][d] unnormalised output
  /// Free scratch for stores (sized by them; kept across chunks).
  std::vector<float> scratch, scratch2, scratch3;
  std::vector<const uint8_t *> codeRows; ///< row pointers for *Rows ops
  std::vector<uint8_t> codeBytes;        ///< a row's codes, one byte each
  std::vector<const uint16_t *> halfRows;
  std::vector<int64_t> positions;
  /// Pre-RoPE KVQuant key tiles: per token of the tile, where its outlier
  /// list continues for the next head (heads are scored in order).
  std::vector<int64_t> outlierNext;
  /// Scratch a store's loadKeys keeps across chunks (the value pass leaves
  /// it alone).
  std::vector<float> keyScratch;

  /// Takes `from`'s storage, every vector empty as if new.
  void reuse(AttendBuffers &&from) {
    *this = std::move(from);
    for (auto *v : {&q, &scores, &acc, &scratch, &scratch2, &scratch3,
                    &keyScratch})
      v->clear();
    codeRows.clear();
    codeBytes.clear();
    halfRows.clear();
    positions.clear();
    outlierNext.clear();
  }
};

/// State of one fused attention call, shared by the driver and a store.
/// Query vector j of KV head h (j < nq) is query step j / qPerKv of query
/// head h * qPerKv + j % qPerKv; vectors are prescaled by 1/sqrt(d).
struct AttendJob : AttendBuffers {
  const AttendOps &ops;
  int64_t d = 0;          ///< head_dim
  int64_t heads = 0;      ///< KV heads
  int64_t qPerKv = 0;     ///< query heads per KV head (GQA group)
  int64_t nq = 0;         ///< query vectors per KV head: n_queries * qPerKv
  int64_t t0 = 0, t1 = 0; ///< the chunk of token positions being processed
  /// Which block keyScratch was derived from (null: none yet).
  const void *keyScratchOf = nullptr;
  /// Pre-RoPE caches: the queries split by pair (set before the first
  /// attendKeysRotated) and the angle cursor kept across chunks.
  RopeQueries ropeQueries;
  Rope::Cursor ropeCursor;

  explicit AttendJob(const AttendOps &o) : ops(o) {}
  const float *query(int64_t h) const { return q.data() + h * nq * d; }
  float *scoreRow(int64_t t, int64_t h) {
    return scores.data() + ((t - t0) * heads + h) * nq;
  }
  float *accumulator(int64_t h) { return acc.data() + h * nq * d; }
};

/// Which implementation kvq::cacheAttend runs.
enum class AttendImpl { Fused, Reference };

/// Fused attention over one layer (arguments already validated by the
/// caller, as in kvq_cache_attend). With an enabled rope, the keys are
/// rotated at their positions (attendKeysRotated) before the scores. The
/// tokens are split into fixed ranges whose partial softmaxes are merged
/// in order (flash-decoding), run through `parallel` (parallel.h); a call
/// of several query steps on two or more workers runs fixed groups of
/// steps as the tasks instead, each over its ranges (the same bits).
void attendFused(const LayerStore &store, const kvq_config &cfg,
                 const Rope &rope, const kvq_parallel &parallel,
                 const float *queries, int64_t nQueries, int32_t qHeads,
                 float *out);

/// The reference: row-by-row dequantization, double accumulators, exact
/// exp (the oracle of the attention tests); keys rotated as above.
void attendReference(const LayerStore &store, const kvq_config &cfg,
                     const Rope &rope, const float *queries, int64_t nQueries,
                     int32_t qHeads, float *out);

/// kvq_cache_attend with a chosen implementation (defined in cache.cpp, so
/// tests can run both on the same cache).
kvq_status cacheAttend(const kvq_cache_t *cache, int32_t layer,
                       const float *queries, int64_t nQueries, int32_t qHeads,
                       float *out, AttendImpl impl);

/// Default store hooks: dequantize each row with loadRow, then float dot /
/// axpy (for stores without a packed walk of their own).
void attendKeysByRows(const LayerStore &store, AttendJob &job);
void attendValuesByRows(const LayerStore &store, AttendJob &job);

/// The key pass of a pre-RoPE cache: tiles of kKeyTile keys, dequantized
/// by the store (LayerStore::loadKeys or loadKeyColumns), scored against
/// the queries at their positions' angles in the canonical order of
/// rope_keys.h, all in portable code, so every kernel table and ISA gives
/// the same bits. job.ropeQueries must hold job.q split by the rope's
/// pairs (attendFused does it once per call).
void attendKeysRotated(const LayerStore &store, const Rope &rope,
                       AttendJob &job);

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_ATTENTION_H
