//===- store.h - Per-layer cache storage, one class per method --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A LayerStore holds one layer's tokens in a method's packed format. The
// cache core (cache.cpp) validates arguments and converts input to fp16;
// stores only plan and commit storage changes. Each method's store is a
// folder beside this header (fp16/, kivi/, kvquant/): its class in a
// private header, its update, attention fast paths and lifecycle in one
// source each (docs/ADDING_A_METHOD.md).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_STORES_STORE_H
#define KVQ_RUNTIME_CPU_STORES_STORE_H

#include "kernels.h"
#include "kvq/runtime.h"
#include "payload.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kvq {

struct AttendJob;
class ByteReader;
class ByteWriter;

/// Tokens per page of the fp16 store (fp16/fp16_store.h), which holds each
/// full page's keys head by head ([head][token][head_dim]), then its values
/// so. 64: a head's run of keys or values is then 16 KB at head_dim 128,
/// long enough for the hardware prefetcher to stream and for the jump to
/// the next page to cost nothing measurable; it is a multiple of the
/// pre-RoPE key tile (kKeyTile, 16) and divides attention's chunk (128), so
/// tiles and chunks cover whole pages; and the tail kept in per-token
/// blocks (fewer than 64 tokens) stays small, so repacking it when it fills
/// a page copies each token once more, amortised O(1) per append.
constexpr int64_t kFp16PageTokens = 64;

/// Tokens per block of the pre-RoPE key pass over fp16 key rows
/// (halfKeyRows): one fp16 page, whose head rows are one contiguous run;
/// its angles by rows take 32 KiB at head_dim 128.
constexpr int64_t kHalfKeyBlock = kFp16PageTokens;

class LayerStore {
public:
  LayerStore(const kvq_config &cfg, Payload &payload)
      : cfg_(cfg), payload_(payload),
        channels_(int64_t{cfg.num_kv_heads} * cfg.head_dim),
        attendOps_(selectAttendOps(kernels(),
                                   AttendShape{cfg.head_dim, cfg.num_kv_heads,
                                               cfg.group_size, cfg.key_bits,
                                               cfg.value_bits})) {}
  virtual ~LayerStore() = default;

  /// The attention inner kernels of this store's shape, chosen when it is
  /// created (or loaded, which creates it first) on the active table.
  const AttendOps &attendOps() const { return attendOps_; }

  // The core: what every method implements (the lifecycle after it).

  /// Append n tokens; k and v are [n, channels] fp16 bits, already checked
  /// finite. All-or-nothing: returns KVQ_ERR_OUT_OF_MEMORY (and changes
  /// nothing) when the allocator fails; may throw std::bad_alloc before
  /// its commit point, which also leaves the store unchanged. A store may
  /// split independent work (KVQuant's level fits) over the host's
  /// `parallel` in fixed tasks; the result never depends on it.
  virtual kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                            const kvq_parallel &parallel) = 0;

  /// Tokens held.
  virtual int64_t length() const = 0;

  /// Dequantized K and V rows (channels floats each) of position pos.
  virtual void loadRow(int64_t pos, float *k, float *v) const = 0;

  /// Adds tokens, the partition and the byte fields except total_bytes,
  /// fp16_bytes and effective_bits (the cache derives those).
  virtual void addStats(kvq_stats &s) const = 0;

  /// Absolute positions of fp16 sink tokens, ascending.
  virtual void sinkPositions(std::vector<int64_t> &out) const { out.clear(); }

  /// Release every payload block (called once, by the cache destructor).
  virtual void releaseAll() = 0;

  // Lifecycle (lifecycle.cpp; the rules are in docs/RUNTIME.md, "Cache
  // lifecycle").

  /// KVQ_OK when keeping the first n tokens (0 <= n < length()) gives
  /// exactly the store that the update calls restricted to those tokens
  /// would have built; else KVQ_ERR_NOT_EXACT with a message saying why.
  virtual kvq_status checkTruncate(int64_t n) const = 0;
  /// Allocate what truncate(n) will need (fp16 rows restored from the
  /// rollback history), after checkTruncate(n) returned KVQ_OK:
  /// KVQ_ERR_OUT_OF_MEMORY leaves the store unchanged. Then exactly one of
  /// truncate(n) or cancelTruncate() follows.
  virtual kvq_status prepareTruncate(int64_t) { return KVQ_OK; }
  virtual void cancelTruncate() {}
  /// Keep the first n tokens (after prepareTruncate): cannot fail.
  virtual void truncate(int64_t n) = 0;
  /// Take a copy of `from`'s rollback history (a fork; `from` is a store of
  /// the same method holding the same tokens). May throw std::bad_alloc.
  virtual void copyHistory(const LayerStore &) {}
  /// Append the layer's state to w (the format of docs/RUNTIME.md).
  virtual void save(ByteWriter &w) const = 0;
  /// Rebuild this (empty) store from what save wrote: KVQ_ERR_CORRUPT_DATA
  /// when a check fails, KVQ_ERR_OUT_OF_MEMORY; on failure the cache is
  /// discarded and releaseAll frees what was loaded so far.
  virtual kvq_status load(ByteReader &r) = 0;

  // Attention fast paths (attention.h): optional. The defaults
  // (attention.cpp) decode whole rows with loadRow and sum in plain scalar
  // loops, correct for every store and slow; an override reads the packed
  // blocks through the cache's AttendOps, using exactly the keys and values
  // loadRow decodes.

  /// Fused attention (attention.h), pass 1 over [job.t0, job.t1): the
  /// scores of every query vector, read from the packed storage. The
  /// default dequantizes rows with loadRow.
  virtual void attendKeys(AttendJob &job) const;

  /// Pass 2 over the same chunk: job.acc += weights x V.
  virtual void attendValues(AttendJob &job) const;

  /// The key pass of a pre-RoPE cache (attendKeysRotated): the keys of
  /// tokens [t0, t1) (at most kKeyTile, within one aligned tile) exactly as
  /// loadRow dequantizes them, without their values, by rows
  /// (out[(t - t0) * channels + c]). May use job.scratch2, scratch3,
  /// codeRows and codeBytes (attendValues sets them again). The default
  /// calls loadRow.
  virtual void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                        float *out) const;

  /// The fp16 key rows of head h of tokens [t0, t1) (at most kHalfKeyBlock,
  /// within one aligned block; rows[t - t0], head_dim halves each) when the
  /// store holds every one of them as fp16, so the key pass converts them in
  /// registers; else false (the default). The answer does not depend on h.
  virtual bool halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                           const uint16_t **rows) const;

  /// Ask for head h's value rows of tokens [t0, t1), which the value pass
  /// reads next: the pre-RoPE key pass over fp16 rows calls it a few rows
  /// at a time, as the post-RoPE key passes ask for their values; default
  /// nothing.
  virtual void prefetchValues(int64_t t0, int64_t t1, int64_t h) const;

  /// How many whole aligned tiles t0, t0 + kKeyTile, ... (at most
  /// maxTiles >= 1) the store scores together by columns, head by head
  /// (scoreKeyColumns); 0: none (the default).
  virtual int64_t keyColumnTiles(int64_t t0, int64_t maxTiles) const;

  /// The canonical scores (rope_keys.h) of head h over `tiles` such tiles
  /// (at most keyColumnTiles) against the head's nq query vectors
  /// (job.ropeQueries), angles by columns (tile u's pair i of token t at
  /// cos[(u * d/2 + i) * kKeyTile + t]): out[(u * kKeyTile + t) *
  /// outStride + j]. The keys are the ones loadRow decodes. Called for
  /// h = 0, 1, ... in order; may use job.scratch2 and scratch3.
  virtual void scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles,
                               int64_t h, const float *cos, const float *sin,
                               bool interleaved, float *out,
                               int64_t outStride) const;

  /// The canonical scores of every head over tokens [t0, t1) (as for
  /// loadKeys) into job.scoreRow(t0, h), angles by rows (row t's pair i at
  /// cos[(t - t0) * d/2 + i]), where the store decodes them itself without
  /// a row of floats; else false (the default) and nothing written: the
  /// key pass then takes loadKeys and ropeScoresRows. The same bits either
  /// way.
  virtual bool scoreKeyRows(AttendJob &job, int64_t t0, int64_t t1,
                            const float *cos, const float *sin,
                            bool interleaved) const;

protected:
  kvq_config cfg_;
  Payload &payload_;
  int64_t channels_;

private:
  AttendOps attendOps_;
};

/// Reserve room for `size` elements, growing geometrically so that appending
/// one token stays amortised O(1) however long the cache is.
template <class Vec> void reserveGeometric(Vec &v, size_t size) {
  if (v.capacity() < size)
    v.reserve(size > 2 * v.capacity() ? size : 2 * v.capacity());
}

std::unique_ptr<LayerStore> makeFp16Store(const kvq_config &, Payload &);
std::unique_ptr<LayerStore> makeKiviStore(const kvq_config &, Payload &);
std::unique_ptr<LayerStore> makeKvquantStore(const kvq_config &, Payload &);

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_STORES_STORE_H
