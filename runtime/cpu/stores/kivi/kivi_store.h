//===- kivi_store.h - KIVI and KIVI-Sink storage ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Keys: per-channel uniform groups of G consecutive tokens, one block per
// group (C scales, C zeros, packed codes of its non-sink rows; 2- and 4-bit
// codes nibble-major, bitpack.h, so attention puts rows in lanes). Values: one
// block per token (per-token groups of G channels). Recent tokens stay fp16
// (residual window); KIVI-Sink keeps the K and V rows of protected tokens
// fp16 for good and leaves them out of their key group's min/max.
//
// kivi_update.cpp executes the update plan (kivi_plan.h) and decodes rows,
// kivi_attend.cpp holds the attention fast paths, kivi_lifecycle.cpp
// truncate, fork, save, load and release.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_STORES_KIVI_KIVI_STORE_H
#define KVQ_RUNTIME_CPU_STORES_KIVI_KIVI_STORE_H

#include "blocks.h"
#include "kivi_plan.h"
#include "layer_section.h"
#include "paged.h"
#include "payload.h"
#include "store.h"
#include "store_util.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

class KiviStore final : public LayerStore {
public:
  KiviStore(const kvq_config &cfg, Payload &payload)
      : LayerStore(cfg, payload), G_(cfg.group_size), R_(cfg.residual_length),
        kb_(cfg.key_bits), vb_(cfg.value_bits),
        block_(cfg.residual_mode == KVQ_RESIDUAL_BLOCK),
        nibbleKeys_(kiviKeysNibbleMajor(cfg)), k_(kiviSinkBudget(cfg)),
        hk_(R_ + (block_ ? R_ : G_)), hv_(R_) {
    top_.reserve(static_cast<size_t>(k_));
  }

  // kivi_update.cpp
  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                    const kvq_parallel &) override;
  int64_t length() const override {
    return static_cast<int64_t>(slots_.size());
  }
  void loadRow(int64_t pos, float *k, float *v) const override;
  void addStats(kvq_stats &s) const override;
  void sinkPositions(std::vector<int64_t> &out) const override {
    sinkPositionsOf(slots_, out);
  }

  // kivi_attend.cpp: the attention fast paths
  void attendKeys(AttendJob &job) const override;
  void attendValues(AttendJob &job) const override;
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override;
  bool halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                   const uint16_t **rows) const override;
  int64_t keyColumnTiles(int64_t t0, int64_t maxTiles) const override;
  void scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles, int64_t h,
                       const float *cos, const float *sin, bool interleaved,
                       float *out, int64_t outStride) const override;
  bool scoreKeyRows(AttendJob &job, int64_t t0, int64_t t1, const float *cos,
                    const float *sin, bool interleaved) const override;

  // kivi_lifecycle.cpp
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
    Blk kf, vf; ///< fp16 K / V row while in the window, or for a sink
    Blk vq;     ///< quantized value row
    bool sink = false;
  };
  using TopK = KiviTopK;

  /// Keys / values quantized once the layer holds L tokens (kivi_plan.h).
  int64_t keyTarget(int64_t L) const { return kiviKeyTarget(cfg_, L); }
  int64_t valueTarget(int64_t L) const { return kiviValueTarget(cfg_, L); }

  int64_t keyDone() const { return static_cast<int64_t>(groups_.size()) * G_; }
  int64_t valueBlockBytes() const { return kiviValueRowLayout(cfg_).bytes(); }
  int64_t keyGroupBytes(int64_t codedRows) const {
    return kiviKeyGroupLayout(cfg_, codedRows).bytes();
  }
  /// Views of a key group block (C scale/zero pairs) and a value block
  /// (C / G pairs), blocks.h.
  UniformBlock<const uint8_t> keyGroup(const uint8_t *b) const {
    return {b, channels_};
  }
  UniformBlock<const uint8_t> valueBlock(const uint8_t *b) const {
    return {b, channels_ / G_};
  }
  /// Coded (non-sink) rows of key group g, and how many precede pos in it.
  int64_t codedRows(int64_t g) const;
  int64_t codedBefore(int64_t pos) const;
  /// Whether tokens [a, b) are all coded rows of quantized key groups (no
  /// fp16 window row or sink among them).
  bool allCoded(int64_t a, int64_t b) const;
  void quantizeValue(const uint16_t *row, uint8_t *out) const;
  /// Asks for the value blocks of the coded tokens of [t0, t1), which the
  /// value pass reads after the key pass.
  void prefetchValueBlocks(TokenSpan span) const;
  /// Group g holds `rows` coded rows.
  void prefetchNextHeadCodes(int64_t g, int64_t rows, int64_t h,
                             int64_t d) const;
  void quantizeKeyGroup(const uint16_t *const *rows, const uint8_t *sink,
                        uint8_t *out) const;

  const int64_t G_, R_;
  const int kb_, vb_;
  const bool block_;
  const bool nibbleKeys_; ///< key codes nibble-major (else row-major)
  const int64_t k_;       ///< sink budget (0 = plain KIVI)

  PagedVector<Slot> slots_; ///< never moves on growth (paged.h)
  std::vector<Blk> groups_; ///< key group g covers [g*G, (g+1)*G)
  int64_t vDone_ = 0;       ///< values of [0, vDone_) are quantized or sinks
  int64_t decided_ = 0;     ///< protection of [0, decided_) is decided
  int64_t nSinks_ = 0;
  TopK top_; ///< running top-k (norm, position) over all positions seen

  /// Rollback history (bookkeeping memory, not payload): the fp16 rows of
  /// the last hk_ keys and hv_ values that left fp16 for codes, position p
  /// at ring row p % h; keys of [histK0_, keyDone()) and values of
  /// [histV0_, vDone_) are there. hk_ = R + G (sliding) or 2R (block) and
  /// hv_ = R cover every cut that drops at most R tokens (docs/RUNTIME.md).
  void remember(std::vector<uint16_t> &ring, int64_t h, int64_t &start,
                int64_t from, int64_t to,
                const uint16_t *(*row)(const void *, int64_t),
                const void *rows);
  const int64_t hk_, hv_;
  std::vector<uint16_t> histK_, histV_;
  int64_t histK0_ = 0, histV0_ = 0;
  /// Blocks prepareTruncate allocated for the rows truncate restores.
  std::vector<std::pair<int64_t, Blk>> pendingK_, pendingV_;
};

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_STORES_KIVI_KIVI_STORE_H
