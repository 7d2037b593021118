//===- kvquant_store.h - KVQuant-NUQ storage --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Keys: per-channel Lloyd-Max level tables fit on a batch of tokens (the
// prefill) and frozen; a key row is one block of packed codes plus its
// outliers. Values: per (token, head) level tables fit on every row. Outliers
// are fp16 value + 16-bit channel index. The first kvquant_n_sink prefill
// tokens stay fp16 and are left out of every fit and threshold.
//
// kvquant_update.cpp executes the update plan (kvquant_plan.h): the level
// fits and the coded rows; it also decodes rows. kvquant_attend.cpp holds
// the attention fast paths, kvquant_lifecycle.cpp truncate, fork, save,
// load and release.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_STORES_KVQUANT_KVQUANT_STORE_H
#define KVQ_RUNTIME_CPU_STORES_KVQUANT_KVQUANT_STORE_H

#include "attention.h"
#include "blocks.h"
#include "kvquant_plan.h"
#include "paged.h"
#include "payload.h"
#include "store.h"
#include "store_util.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kvq {

class KvquantStore final : public LayerStore {
public:
  KvquantStore(const kvq_config &cfg, Payload &payload)
      : LayerStore(cfg, payload), kb_(cfg.key_bits), vb_(cfg.value_bits),
        kLevels_(1 << cfg.key_bits), vLevels_(1 << cfg.value_bits),
        frozen_(cfg.refit_interval == 0), keyRow_(kvquantKeyRowLayout(cfg)),
        valueRow_(kvquantValueRowLayout(cfg)), table_(kvquantTableLayout(cfg)) {
  }

  // kvquant_update.cpp
  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                    const kvq_parallel &parallel) override;
  int64_t length() const override {
    return static_cast<int64_t>(slots_.size());
  }
  void loadRow(int64_t pos, float *k, float *v) const override;
  void addStats(kvq_stats &s) const override;
  void sinkPositions(std::vector<int64_t> &out) const override {
    sinkPositionsOf(slots_, out);
  }

  // kvquant_attend.cpp: the attention fast paths
  void attendKeys(AttendJob &job) const override;
  void attendValues(AttendJob &job) const override;
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override;
  int64_t keyColumnTiles(int64_t t0, int64_t maxTiles) const override;
  void scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles, int64_t h,
                       const float *cos, const float *sin, bool interleaved,
                       float *out, int64_t outStride) const override;

  // kvquant_lifecycle.cpp
  void releaseAll() override;
  kvq_status checkTruncate(int64_t n) const override;
  kvq_status prepareTruncate(int64_t n) override;
  void cancelTruncate() override;
  void truncate(int64_t n) override;
  void copyHistory(const LayerStore &from) override;
  void save(ByteWriter &w) const override;
  kvq_status load(ByteReader &r) override;

private:
  struct Slot {
    Blk kf, vf; ///< fp16 rows: sinks, or tokens awaiting a refit
    Blk kq, vq; ///< quantized rows
    uint16_t kOut = 0, vOut = 0; ///< outliers stored in kq / vq
    bool sink = false;
  };
  /// Key levels for positions >= start (until the next segment): C tables
  /// of 2^kb fp16 levels, then (frozen mode) C fp16 decode thresholds.
  struct Segment {
    int64_t start;
    Blk table;
  };

  int64_t tableBytes() const { return table_.bytes(); }
  /// Fit a key segment on the m fp16 rows `rows` into `table`; mask[m, C]
  /// receives the rank outliers of the batch. Channels in tasks over
  /// `parallel`.
  void fitKeys(const uint16_t *const *rows, int64_t m, uint8_t *mask,
               uint8_t *table, const kvq_parallel &parallel) const;
  /// fitKeys' work on channels [c0, c1) (one task).
  void fitKeyChannels(const uint16_t *const *rows, int64_t m, int64_t c0,
                      int64_t c1, uint8_t *mask, uint8_t *table) const;
  /// Write one key row into `out`: its codes (one byte each, from the
  /// batch's kvq_nuq_quant) packed, then the outliers mask marks.
  void writeKeyRow(const float *x, const uint8_t *codes, const uint8_t *mask,
                   uint8_t *out) const;
  /// Fit, quantize and pack one value row (levels, codes, outliers);
  /// scratch holds lloydScratchFloats(head_dim) floats.
  int64_t planValueRow(const float *x, uint8_t *mask, float *levels,
                       float *scratch) const;
  void writeValueRow(const float *x, const uint8_t *mask, const float *levels,
                     uint8_t *out) const;
  /// The first segment starting after pos.
  std::vector<Segment>::const_iterator segmentAfter(int64_t pos) const {
    return std::upper_bound(
        segs_.begin(), segs_.end(), pos,
        [](int64_t p, const Segment &s) { return p < s.start; });
  }
  const Segment &segmentFor(int64_t pos) const {
    return *(segmentAfter(pos) - 1);
  }
  /// Where the segment holding pos ends (the next one's start).
  int64_t segmentEnd(int64_t pos) const {
    auto it = segmentAfter(pos);
    return it == segs_.end() ? std::numeric_limits<int64_t>::max() : it->start;
  }
  /// attendKeys' outlier corrections of token t (lut: its product tables).
  void patchKeyOutliers(AttendJob &job, int64_t t, const float *lut) const;
  /// Asks for the quantized key rows (codes and outlier lists, each token
  /// its own allocation) of the span's tokens, a step of the key pass
  /// ahead.
  void prefetchKeyRows(TokenSpan span) const {
    for (int64_t t = span.begin; t < std::min(span.end, length()); ++t) {
      const Blk &kq = slots_[static_cast<size_t>(t)].kq;
      prefetchBytes(kq.p, kq.size);
    }
  }
  /// The same for their quantized value rows, which the value pass reads
  /// after the key pass.
  void prefetchValueRows(TokenSpan span) const {
    for (int64_t t = span.begin; t < span.end; ++t) {
      const Blk &vq = slots_[static_cast<size_t>(t)].vq;
      prefetchBytes(vq.p, vq.size);
    }
  }

  const int kb_, vb_, kLevels_, vLevels_;
  const bool frozen_; ///< refit_interval == 0: one frozen key segment
  const KvquantKeyRowLayout keyRow_;     ///< blocks.h
  const KvquantValueRowLayout valueRow_; ///< blocks.h
  const KvquantTableLayout table_;       ///< blocks.h
  PagedVector<Slot> slots_;              ///< never moves on growth (paged.h)
  std::vector<Segment> segs_;
  int64_t quantizedUpTo_ = 0; ///< refit mode: [quantizedUpTo_, L) await a fit
  int64_t seg0End_ = 0; ///< segment 0 was fit on [sinks, seg0End_) (0: none)

  /// Rollback history (refit mode; malloc'd bookkeeping, not payload): the
  /// fp16 K and V rows of the last refit batch, [lastStart_,
  /// quantizedUpTo_) (lastStart_ = -1: none), so that a cut inside it can
  /// drop its segment and return its kept rows to fp16.
  std::vector<uint16_t> lastK_, lastV_;
  int64_t lastStart_ = -1;
  /// fp16 K and V blocks prepareTruncate allocated for those rows.
  std::vector<std::pair<Blk, Blk>> pending_;
  /// A cut inside the last refit batch, which the history can undo.
  bool insideLastBatch(int64_t n) const {
    return lastStart_ >= 0 && lastStart_ < n && n < quantizedUpTo_;
  }

  /// The fp16 sinks: the first tokens of the first update.
  int64_t sinkCount() const {
    int64_t n = 0;
    while (n < length() && slots_[static_cast<size_t>(n)].sink)
      ++n;
    return n;
  }
  /// Bytes of a quantized key / value row with `outliers` outliers.
  int64_t keyRowBytes(int64_t outliers) const {
    return keyRow_.bytes(outliers);
  }
  int64_t valueRowBytes(int64_t outliers) const {
    return valueRow_.bytes(outliers);
  }
};

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_STORES_KVQUANT_KVQUANT_STORE_H
