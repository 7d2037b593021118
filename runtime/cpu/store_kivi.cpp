//===- store_kivi.cpp - KIVI and KIVI-Sink storage ------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Keys: per-channel uniform groups of G consecutive tokens, one block per
// group (C scales, C zeros, packed codes of its non-sink rows; 2- and 4-bit
// codes nibble-major, bitpack.h, so attention puts rows in lanes). Values: one
// block per token (per-token groups of G channels). Recent tokens stay fp16
// (residual window); KIVI-Sink keeps the K and V rows of protected tokens
// fp16 for good and leaves them out of their key group's min/max.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "bitpack.h"
#include "group_weights.h"
#include "kernels.h"
#include "kivi_plan.h"
#include "layer_section.h"
#include "paged.h"
#include "rope.h"
#include "rope_keys.h"
#include "serial.h"
#include "status.h"
#include "store.h"
#include "store_io.h"
#include "store_util.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

using namespace kvq;

namespace {

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
  void releaseAll() override;
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

void KiviStore::quantizeValue(const uint16_t *row, uint8_t *out) const {
  const int64_t groups = channels_ / G_;
  std::vector<uint16_t> scales(static_cast<size_t>(2 * groups));
  uint16_t *zeros = scales.data() + groups;
  // One kvq_group_quant call of the kernel table on the fp16 row (per-token
  // groups of G), the codes packed straight into the block.
  Grid g;
  g.rows = 1;
  g.cols = channels_;
  g.group = G_;
  g.axis = KVQ_AXIS_PER_TOKEN;
  const UniformBlock<uint8_t> blk{out, groups};
  kernels().groupQuant(row, KVQ_DTYPE_F16, g, vb_, nullptr, KVQ_CODES_PACKED,
                       blk.codes(), scales.data(), zeros);
  for (int64_t j = 0; j < groups; ++j) {
    blk.setScale(j, scales[static_cast<size_t>(j)]);
    blk.setZero(j, zeros[j]);
  }
}

void KiviStore::quantizeKeyGroup(const uint16_t *const *rows,
                                 const uint8_t *sink, uint8_t *out) const {
  const int64_t C = channels_;
  struct RowsTag;
  struct CodesTag;
  uint16_t *x = threadScratch<uint16_t, RowsTag>(static_cast<size_t>(G_ * C));
  uint8_t *codes = threadScratch<uint8_t, CodesTag>(static_cast<size_t>(G_ * C));
  std::vector<uint16_t> scales(static_cast<size_t>(2 * C));
  uint16_t *zeros = scales.data() + C;
  for (int64_t i = 0; i < G_; ++i) // the group's fp16 rows, contiguous
    std::copy(rows[i], rows[i] + C, x + i * C);
  // Calibration exclusion: min/max over the group's non-sink rows only,
  // as an element mask; without a sink none, the kernels' fast path.
  std::vector<uint8_t> exclude;
  if (std::any_of(sink, sink + G_, [](uint8_t s) { return s != 0; })) {
    exclude.resize(static_cast<size_t>(G_ * C));
    for (int64_t i = 0; i < G_; ++i)
      std::fill_n(exclude.begin() + i * C, C, sink[i]);
  }
  // One kvq_group_quant call of the kernel table: per channel one group of
  // the G rows.
  kernels().groupQuant(x, KVQ_DTYPE_F16, Grid::columns(G_, C), kb_,
                       exclude.empty() ? nullptr : exclude.data(),
                       KVQ_CODES_UNPACKED, codes, scales.data(), zeros);
  const UniformBlock<uint8_t> blk{out, C};
  for (int64_t c = 0; c < C; ++c) {
    blk.setScale(c, scales[static_cast<size_t>(c)]);
    blk.setZero(c, zeros[c]);
  }
  // Sink rows have no code slots: compact the coded rows, then pack.
  int64_t coded = 0;
  for (int64_t i = 0; i < G_; ++i)
    if (!sink[i]) {
      if (coded != i)
        std::copy(codes + i * C, codes + (i + 1) * C, codes + coded * C);
      ++coded;
    }
  if (nibbleKeys_)
    packNibbleMajor(codes, coded, C, kb_, blk.codes());
  else
    kernels().packCodes(codes, coded * C, kb_, blk.codes());
}

int64_t KiviStore::codedRows(int64_t g) const {
  if (nSinks_ == 0) // plain KIVI, or no sink chosen yet: every row is coded
    return G_;
  int64_t coded = 0;
  for (int64_t p = g * G_; p < (g + 1) * G_; ++p)
    coded += !slots_[static_cast<size_t>(p)].sink;
  return coded;
}

bool KiviStore::allCoded(int64_t a, int64_t b) const {
  if (b > keyDone())
    return false;
  if (nSinks_ == 0) // every row of a quantized group: no slot to read
    return true;
  for (int64_t p = a; p < b; ++p)
    if (slots_[static_cast<size_t>(p)].kf) // a sink's fp16 row
      return false;
  return true;
}

int64_t KiviStore::codedBefore(int64_t pos) const {
  if (nSinks_ == 0)
    return pos % G_;
  int64_t row = 0;
  for (int64_t p = pos / G_ * G_; p < pos; ++p)
    row += !slots_[static_cast<size_t>(p)].sink;
  return row;
}

kvq_status KiviStore::update(const uint16_t *k, const uint16_t *v, int64_t n,
                             const kvq_parallel &) {
  const int64_t C = channels_, L0 = length(), L1 = L0 + n;
  const int64_t rowBytes = 2 * C;
  const UpdateRows<decltype(slots_)> in(slots_, k, v, L0, C);

  // 1. The policy (kivi_plan.h) from the new tokens' key norms.
  std::vector<float> norms;
  if (k_ > 0) {
    std::vector<float> row(static_cast<size_t>(C));
    norms.resize(static_cast<size_t>(n));
    for (int64_t p = L0; p < L1; ++p) {
      halfRowToFloat(in.key(p), C, row.data());
      norms[static_cast<size_t>(p - L0)] =
          keyNormRow(row.data(), cfg_.num_kv_heads, cfg_.head_dim);
    }
  }
  KiviPlan plan = planKiviUpdate(
      cfg_, {L0, keyDone(), vDone_, decided_, nSinks_}, top_, norms.data(), n);
  const int64_t kT = plan.keyTo, vT = plan.valueTo, leaveT = plan.decidedTo;
  auto isSink = [&](int64_t p) {
    return p < decided_ ? slots_[static_cast<size_t>(p)].sink
                        : plan.becomesSink(p);
  };

  // 2. Every payload change, inside a transaction.
  Txn txn(payload_);
  auto oom = [](int64_t bytes) { return allocationFailed("kivi", bytes); };
  std::vector<Slot> added(static_cast<size_t>(n));
  for (int64_t p = L0; p < L1; ++p) {
    Slot &s = added[static_cast<size_t>(p - L0)];
    bool sink = isSink(p);
    if (sink || p >= kT) {
      if (!(s.kf = txn.allocate(rowBytes)))
        return oom(rowBytes);
      std::memcpy(s.kf.p, in.key(p), static_cast<size_t>(rowBytes));
    }
    if (sink || p >= vT) {
      if (!(s.vf = txn.allocate(rowBytes)))
        return oom(rowBytes);
      std::memcpy(s.vf.p, in.value(p), static_cast<size_t>(rowBytes));
    }
  }
  std::vector<Blk> newValues(static_cast<size_t>(vT - vDone_));
  for (int64_t p = vDone_; p < vT; ++p) {
    if (isSink(p))
      continue;
    Blk b = txn.allocate(valueBlockBytes());
    if (!b)
      return oom(valueBlockBytes());
    quantizeValue(in.value(p), b.p);
    newValues[static_cast<size_t>(p - vDone_)] = b;
    if (p < L0)
      txn.retire(slots_[static_cast<size_t>(p)].vf);
  }
  std::vector<Blk> newGroups;
  std::vector<const uint16_t *> rows(static_cast<size_t>(G_));
  std::vector<uint8_t> sinkRows(static_cast<size_t>(G_));
  for (int64_t start = keyDone(); start < kT; start += G_) {
    int64_t coded = 0;
    for (int64_t i = 0; i < G_; ++i) {
      rows[static_cast<size_t>(i)] = in.key(start + i);
      sinkRows[static_cast<size_t>(i)] = isSink(start + i) ? 1 : 0;
      coded += !sinkRows[static_cast<size_t>(i)];
    }
    Blk b;
    if (coded > 0) { // an all-sink group stores nothing
      if (!(b = txn.allocate(keyGroupBytes(coded))))
        return oom(keyGroupBytes(coded));
      quantizeKeyGroup(rows.data(), sinkRows.data(), b.p);
    }
    newGroups.push_back(b);
    for (int64_t p = start; p < start + G_ && p < L0; ++p)
      if (!isSink(p))
        txn.retire(slots_[static_cast<size_t>(p)].kf);
  }
  reserveGeometric(slots_, static_cast<size_t>(L1));
  reserveGeometric(groups_, groups_.size() + newGroups.size());
  if (kT > keyDone() && histK_.empty())
    histK_.resize(static_cast<size_t>(hk_ * C));
  if (vT > vDone_ && histV_.empty())
    histV_.resize(static_cast<size_t>(hv_ * C));

  // 3. Commit: nothing below allocates or fails. The rows leaving fp16
  // enter the rollback history first, while their blocks are still held.
  using Rows = UpdateRows<decltype(slots_)>;
  remember(
      histK_, hk_, histK0_, keyDone(), kT,
      [](const void *r, int64_t p) {
        return static_cast<const Rows *>(r)->key(p);
      },
      &in);
  remember(
      histV_, hv_, histV0_, vDone_, vT,
      [](const void *r, int64_t p) {
        return static_cast<const Rows *>(r)->value(p);
      },
      &in);
  slots_.resize(static_cast<size_t>(L1));
  for (int64_t p = L0; p < L1; ++p)
    slots_[static_cast<size_t>(p)] = added[static_cast<size_t>(p - L0)];
  for (int64_t p = decided_; p < leaveT; ++p)
    slots_[static_cast<size_t>(p)].sink = plan.becomesSink(p);
  for (int64_t p = vDone_; p < vT; ++p) {
    Slot &s = slots_[static_cast<size_t>(p)];
    if (s.sink)
      continue;
    s.vq = newValues[static_cast<size_t>(p - vDone_)];
    s.vf = Blk(); // released by the commit below (or never allocated)
  }
  for (int64_t p = keyDone(); p < kT; ++p) {
    Slot &s = slots_[static_cast<size_t>(p)];
    if (!s.sink)
      s.kf = Blk();
  }
  for (const Blk &b : newGroups)
    groups_.push_back(b);
  vDone_ = vT;
  decided_ = leaveT;
  nSinks_ = plan.sinks;
  top_.swap(plan.top);
  txn.commit();
  return KVQ_OK;
}

void KiviStore::loadRow(int64_t pos, float *k, float *v) const {
  const int64_t C = channels_;
  const Slot &s = slots_[static_cast<size_t>(pos)];
  if (s.kf) {
    blockRowToFloat(s.kf.p, C, k);
  } else {
    const int64_t g = pos / G_, row = codedBefore(pos);
    const int64_t rows = nibbleKeys_ ? codedRows(g) : 0;
    const auto blk = keyGroup(groups_[static_cast<size_t>(g)].p);
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t code =
          nibbleKeys_ ? nibbleMajorCodeAt(blk.codes(), rows, row, c, kb_)
                      : packedCodeAt(blk.codes(), row * C + c, kb_);
      k[c] = uniformDequant(code, halfToFloat(blk.scale(c)),
                            halfToFloat(blk.zero(c)));
    }
  }
  if (s.vf) {
    blockRowToFloat(s.vf.p, C, v);
  } else {
    const auto blk = valueBlock(s.vq.p);
    for (int64_t c = 0; c < C; ++c)
      v[c] = uniformDequant(packedCodeAt(blk.codes(), c, vb_),
                            halfToFloat(blk.scale(c / G_)),
                            halfToFloat(blk.zero(c / G_)));
  }
}

/// A tile of keys by columns (channel c of row t at out[c * kKeyTile +
/// t]): the kKeyTile consecutive coded rows row0.. of a nibble-major group
/// of `rows` rows (both even), whose nibble i is 8 bytes; nibbles [nib0,
/// nib1) (one head's channels, scale and zero indexed from its first
/// channel); each code becomes uniformDequant(code, scale, zero) of its
/// channel, as loadRow computes it.
KVQ_AVX2_CLONE
void nibbleKeyColumns(const uint8_t *__restrict codes, int64_t rows,
                      int64_t row0, int64_t nib0, int64_t nib1, int bits,
                      const float *__restrict scale,
                      const float *__restrict zero, float *__restrict out) {
  static_assert(kKeyTile == 16, "a tile's nibbles are two 32-bit words");
  // Generic vectors (eight lanes: one AVX2 register, two SSE or NEON
  // ones), so the decode runs across the tile's tokens on every ISA.
  using U32x8 = uint32_t __attribute__((vector_size(32)));
  using F32x8 = float __attribute__((vector_size(32)));
  const U32x8 shift = {0, 4, 8, 12, 16, 20, 24, 28};
  for (int64_t i = 0; i < nib1 - nib0; ++i) {
    uint32_t w[2];
    std::memcpy(w, codes + ((nib0 + i) * rows + row0) / 2, 8);
    for (int half = 0; half < 2; ++half) {
      const U32x8 x = ((U32x8{} + w[half]) >> shift) & 15u;
      if (bits == 4) {
        const F32x8 v = __builtin_convertvector(x, F32x8) * scale[i] + zero[i];
        std::memcpy(out + i * kKeyTile + 8 * half, &v, sizeof(v));
      } else { // 2-bit: channels 2i (bits 0-1) and 2i + 1 (bits 2-3)
        const F32x8 a =
            __builtin_convertvector(x & 3u, F32x8) * scale[2 * i] + zero[2 * i];
        const F32x8 b =
            __builtin_convertvector(x >> 2, F32x8) * scale[2 * i + 1] +
            zero[2 * i + 1];
        std::memcpy(out + 2 * i * kKeyTile + 8 * half, &a, sizeof(a));
        std::memcpy(out + (2 * i + 1) * kKeyTile + 8 * half, &b, sizeof(b));
      }
    }
  }
}

/// The fp16 window and sinks.
bool KiviStore::halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                            const uint16_t **rows) const {
  for (int64_t t = t0; t < t1; ++t) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (!s.kf)
      return false;
    rows[t - t0] = reinterpret_cast<const uint16_t *>(s.kf.p) +
                   h * int64_t{cfg_.head_dim};
  }
  return true;
}

/// Whole tiles of coded rows inside one nibble-major group (2 and 4 bits,
/// an even row count and start, as the nibble words need) go by columns,
/// as many of the group's as the table kernel takes at once (its tables
/// are built per call).
int64_t KiviStore::keyColumnTiles(int64_t t0, int64_t maxTiles) const {
  const int64_t g = t0 / G_;
  if (!nibbleKeys_ || codedRows(g) % 2 != 0 || codedBefore(t0) % 2 != 0)
    return 0;
  const int64_t most = std::min(maxTiles, kRopeNibbleMaxTiles);
  int64_t tiles = 0;
  for (; tiles < most; ++tiles) {
    const int64_t a = t0 + tiles * kKeyTile, b = a + kKeyTile;
    if ((b - 1) / G_ != g || !allCoded(a, b))
      break;
  }
  return tiles;
}

void KiviStore::prefetchValueBlocks(TokenSpan span) const {
  const int64_t vBytes = valueBlockBytes();
  for (int64_t p = span.begin; p < span.end; ++p)
    if (const uint8_t *v = slots_[static_cast<size_t>(p)].vq.p)
      prefetchBytes(v, vBytes);
}

/// Ask for the codes of the head the pre-RoPE key pass scores after head h
/// of group g (the group's next head, else the next group's first), a
/// line at a time: the tile kernels visit a head's nibbles in chain
/// order, not address order, and each first touch of a line stalled.
void KiviStore::prefetchNextHeadCodes(int64_t g, int64_t rows, int64_t h,
                                      int64_t d) const {
  // A head's d channels are d * bits / 4 nibbles of rows / 2 bytes.
  const int64_t headBytes = d * kb_ / 4 * (rows / 2);
  const uint8_t *next = nullptr;
  if ((h + 1) * d < channels_)
    next = keyGroup(groups_[static_cast<size_t>(g)].p).codes() +
           (h + 1) * headBytes;
  else if (g + 1 < static_cast<int64_t>(groups_.size()))
    next = keyGroup(groups_[static_cast<size_t>(g + 1)].p).codes();
  // The next group may hold a few rows fewer (sinks): a hint only, and a
  // prefetch never faults.
  if (next)
    prefetchBytes(next, headBytes);
  // And 1/H of the next group's scales and zeros, which the next group's
  // first call converts (halfToFloatN) before anything else: their first
  // touch had held that conversion ~7 % of a kivi2+rope step at 32K.
  if (g + 1 < static_cast<int64_t>(groups_.size())) {
    const uint8_t *header = groups_[static_cast<size_t>(g + 1)].p;
    const int64_t bytes = keyGroup(header).codes() - header;
    const int64_t slice = (bytes * d / channels_ + 63) / 64 * 64;
    const int64_t from = std::min(bytes, h * slice);
    prefetchBytes(header + from, std::min(bytes - from, slice));
  }
}

/// Where the kernel table has ropeNibbleTiles: all the tiles at once, by
/// tables. Else tile by tile: one query vector per head
/// (decode) decoded in registers (ropeScoresNibbles), several sharing one
/// decode into columns.
void KiviStore::scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles,
                                int64_t h, const float *cos, const float *sin,
                                bool interleaved, float *out,
                                int64_t outStride) const {
  const int64_t C = channels_, d = job.d, g = t0 / G_, P = d / 2;
  const auto blk = keyGroup(groups_[static_cast<size_t>(g)].p);
  // The group's scales, then its zeros, converted once per group (the
  // group's tiles follow each other) and kept across chunks.
  job.keyScratch.resize(static_cast<size_t>(2 * C));
  float *sz = job.keyScratch.data();
  if (job.keyScratchOf != blk.p) {
    job.ops.halfToFloatN(
        reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
    job.keyScratchOf = blk.p;
  }
  const int64_t perNibble = 4 / kb_; // channels per nibble
  const RopeQueries &rq = job.ropeQueries;
  // The group's coded rows and the first tile's first: counted once per
  // call (a KIVI-Sink group's count walks its slots).
  const int64_t rows = codedRows(g), row0 = codedBefore(t0);
  prefetchNextHeadCodes(g, rows, h, d);
  if (job.ops.ropeNibbleTiles) { // the shape's code width is 2 or 4
    RopeNibbleTiles a;
    a.codes = blk.codes();
    a.bits = kb_;
    a.rows = rows;
    a.row0 = row0;
    a.tiles = tiles;
    a.nib0 = h * d / perNibble;
    a.scale = sz + h * d;
    a.zero = sz + C + h * d;
    a.cos = cos;
    a.sin = sin;
    a.q = rq.a(h * job.nq);
    a.qStride = rq.stride();
    a.nq = job.nq;
    a.d = d;
    a.interleaved = interleaved;
    a.out = out;
    a.outStride = outStride;
    job.ops.ropeNibbleTiles(a);
  } else {
    for (int64_t u = 0; u < tiles; ++u) {
      const float *c = cos + u * P * kKeyTile, *s = sin + u * P * kKeyTile;
      float *o = out + u * kKeyTile * outStride;
      const NibbleKeyTile tile = {blk.codes(),       rows, row0 + u * kKeyTile,
                                  h * d / perNibble, kb_,  sz + h * d,
                                  sz + C + h * d};
      if (job.nq == 1 && d % 8 == 0) {
        ropeScoresNibbles(tile, c, s, rq, h, interleaved, o, outStride);
      } else {
        job.scratch3.resize(static_cast<size_t>(d * kKeyTile));
        float *cols = job.scratch3.data();
        nibbleKeyColumns(tile.codes, tile.rows, tile.row0, tile.nib0,
                         tile.nib0 + d / perNibble, kb_, tile.scale, tile.zero,
                         cols);
        ropeScoresColumns(cols, c, s, rq, h * job.nq, job.nq, interleaved, o,
                          outStride);
      }
    }
  }
  // The value pass reads these tokens' value blocks next (one allocation
  // each): each head's turn asks for 1/H of them.
  prefetchValueBlocks(headShare(t0, tiles * kKeyTile, job.heads, h));
}

/// Row-major codes (3 bits) where the kernel table has ropeCodeRows and
/// the tile's tokens are coded rows of one group: head by head, the rows
/// decoded in registers.
bool KiviStore::scoreKeyRows(AttendJob &job, int64_t t0, int64_t t1,
                             const float *cos, const float *sin,
                             bool interleaved) const {
  const int64_t C = channels_, d = job.d, g = t0 / G_, n = t1 - t0;
  if (nibbleKeys_ || !job.ops.ropeCodeRows || (t1 - 1) / G_ != g ||
      !allCoded(t0, t1))
    return false;
  const auto blk = keyGroup(groups_[static_cast<size_t>(g)].p);
  job.keyScratch.resize(static_cast<size_t>(2 * C));
  float *sz = job.keyScratch.data(); // the group's scales, then its zeros
  if (job.keyScratchOf != blk.p) {
    job.ops.halfToFloatN(
        reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
    job.keyScratchOf = blk.p;
  }
  const int64_t row0 = codedBefore(t0), rowBytes = C * kb_ / 8;
  const int64_t headBytes = d * kb_ / 8;
  job.codeRows.resize(static_cast<size_t>(n));
  const uint8_t **rows = job.codeRows.data();
  const RopeQueries &rq = job.ropeQueries;
  // Each head's turn asks for 1/H of the next tile's bytes (this group's
  // next rows, else the next group's scales, zeros and first rows): a
  // head reads a slice of every row, so the first head touched each line
  // of the tile for the first time, and the decoding waited on the loads.
  const Blk &here = groups_[static_cast<size_t>(g)];
  const uint8_t *next = blk.codes() + (row0 + n) * rowBytes;
  int64_t nextBytes =
      std::min(n * rowBytes, static_cast<int64_t>(here.p + here.size - next));
  if (nextBytes <= 0 && g + 1 < static_cast<int64_t>(groups_.size())) {
    const Blk &after = groups_[static_cast<size_t>(g + 1)];
    next = after.p;
    nextBytes = std::min(after.size, keyGroupBytes(0) + n * rowBytes);
  }
  const int64_t slice =
      (std::max<int64_t>(nextBytes, 0) / job.heads + 63) / 64 * 64;
  for (int64_t h = 0; h < job.heads; ++h) {
    const int64_t from = std::min(nextBytes, h * slice);
    if (from < nextBytes)
      prefetchBytes(next + from, std::min(nextBytes - from, slice));
    // And 1/H of the tile's value blocks, which the value pass reads next.
    prefetchValueBlocks(headShare(t0, n, job.heads, h));
    for (int64_t t = 0; t < n; ++t)
      rows[t] = blk.codes() + (row0 + t) * rowBytes + h * headBytes;
    RopeCodeRows a;
    a.rows = rows;
    a.n = n;
    a.bits = kb_;
    a.scale = sz + h * d;
    a.zero = sz + C + h * d;
    a.cos = cos;
    a.sin = sin;
    a.q = rq.a(h * job.nq);
    a.qStride = rq.stride();
    a.nq = job.nq;
    a.d = d;
    a.interleaved = interleaved;
    a.out = job.scoreRow(t0, h);
    a.outStride = job.heads * job.nq;
    job.ops.ropeCodeRows(a);
  }
  return true;
}

/// Keys by rows, each decoded as loadRow does (fp16 rows of the window and
/// sinks, row-major codes, tiles across a group boundary).
void KiviStore::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                         float *out) const {
  const int64_t C = channels_;
  job.scratch2.resize(static_cast<size_t>(2 * C));
  float *sz = job.scratch2.data(); // a group's scales, then its zeros
  int64_t scalesOf = -1; // the group whose scales and zeros sz holds
  for (int64_t p = t0; p < t1; ++p) {
    float *k = out + (p - t0) * C;
    const Slot &s = slots_[static_cast<size_t>(p)];
    if (s.kf) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(s.kf.p), C, k);
      continue;
    }
    const int64_t gp = p / G_, row = codedBefore(p);
    const auto blk = keyGroup(groups_[static_cast<size_t>(gp)].p);
    if (gp != scalesOf) {
      job.ops.halfToFloatN(
          reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
      scalesOf = gp;
    }
    if (!nibbleKeys_ && (row * C * kb_) % 8 == 0) {
      job.ops.dequantCodes(blk.codes() + row * C * kb_ / 8, C, kb_, sz, sz + C,
                           k);
      continue;
    }
    // Nibble-major rows (a tile that holds a sink): the row's codes in
    // one walk down its nibbles, then one product and sum each.
    job.codeBytes.resize(static_cast<size_t>(C));
    uint8_t *codes = job.codeBytes.data();
    if (nibbleKeys_)
      unpackNibbleMajorRow(blk.codes(), codedRows(gp), row, C, kb_, codes);
    else
      for (int64_t c = 0; c < C; ++c)
        codes[c] = packedCodeAt(blk.codes(), row * C + c, kb_);
    for (int64_t c = 0; c < C; ++c)
      k[c] = uniformDequant(codes[c], sz[c], sz[C + c]);
  }
}

/// Keys: per-channel scales fold into the queries once per key group
/// (q'_c = q_c * s_c, bias = q . zero), so a coded row costs one dot of
/// raw codes with q', done for all coded rows of the group in the chunk at
/// once: dotNibbleRows on nibble-major groups (2 and 4 bits, rows in
/// vector lanes), else dotCodesRows. fp16 rows (window, sinks) go through
/// dotHalf.
void KiviStore::attendKeys(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  job.scratch.resize(static_cast<size_t>(H * nq * d + H * nq + G_ * nq));
  float *folded = job.scratch.data(), *bias = folded + H * nq * d;
  float *tmp = bias + H * nq;
  job.codeRows.resize(static_cast<size_t>(G_));
  job.positions.resize(static_cast<size_t>(G_));
  const bool byteRows = (d * kb_) % 8 == 0;
  for (int64_t t = job.t0; t < job.t1;) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      const uint16_t *k = reinterpret_cast<const uint16_t *>(s.kf.p);
      for (int64_t h = 0; h < H; ++h)
        job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(t, h));
      ++t;
      continue;
    }
    // The coded rows of this group inside the chunk.
    const int64_t group = t / G_, end = std::min(job.t1, (group + 1) * G_);
    const int64_t row = codedBefore(t); // sinks have no code slot
    const int64_t groupRows = nibbleKeys_ ? codedRows(group) : 0;
    const uint8_t *block = groups_[static_cast<size_t>(group)].p;
    const uint16_t *scales = reinterpret_cast<const uint16_t *>(block);
    // With one query vector per head the folded queries are one
    // element-wise product over all C channels: one call instead of H.
    if (nq == 1)
      job.ops.mulHalf(scales, job.q.data(), 1, C, folded);
    for (int64_t h = 0; h < H; ++h) {
      if (nq != 1)
        job.ops.mulHalf(scales + h * d, job.query(h), nq, d,
                        folded + h * nq * d);
      job.ops.dotHalf(scales + C + h * d, job.query(h), nq, d, bias + h * nq);
    }
    // Without any sink every row of a quantized group is coded (allCoded):
    // no slot to read (56 bytes a token, the first touch of each).
    int64_t n = 0;
    std::vector<int64_t> &rowOf = job.positions;
    if (nSinks_ == 0)
      n = end - t;
    else
      for (int64_t p = t; p < end; ++p) {
        const Slot &q = slots_[static_cast<size_t>(p)];
        if (q.kf) { // a sink inside the group
          const uint16_t *k = reinterpret_cast<const uint16_t *>(q.kf.p);
          for (int64_t h = 0; h < H; ++h)
            job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(p, h));
          continue;
        }
        rowOf[static_cast<size_t>(n++)] = p;
      }
    const uint8_t *codes = keyGroup(block).codes();
    // Without a sink in the group the coded rows are the chunk's rows
    // t .. end - 1, so the kernels write the score rows in place and the
    // bias is added over the whole [rows][heads][nq] block at once; tmp and
    // the row indirection are only needed around sinks. Either way each
    // score is the kernel's dot plus the bias, one addition.
    const bool inPlace = n == end - t;
    const int64_t K = H * nq;
    // The dot products are arithmetic-bound while the value pass that
    // follows waits on its blocks (one allocation per token, a stride the
    // hardware prefetcher does not follow): each head's turn asks for the
    // value blocks of 1/H of the group's tokens, so those loads overlap
    // with the arithmetic and never arrive as one burst.
    // Likewise, with row-major codes (3 bits), each head's turn asks for
    // 1/H of the next group's key block: a head's rows are a slice of every
    // row, so each head's pass touched lines of the whole block for the
    // first time and the dot kernels waited on them. (Nibble-major groups,
    // a head's rows in one run, were no faster with it at 2 bits and
    // slower at 4, nor with only the next group's scales and zeros.)
    Blk next;
    if (!nibbleKeys_ && end < job.t1 &&
        group + 1 < static_cast<int64_t>(groups_.size()))
      next = groups_[static_cast<size_t>(group + 1)];
    const int64_t slice = (next.size / H + 63) / 64 * 64;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t from = std::min(next.size, h * slice);
      prefetchBytes(next.p + from, std::min(next.size - from, slice));
      float *out = inPlace ? job.scoreRow(t, h) : tmp;
      const int64_t stride = inPlace ? K : nq;
      if (nibbleKeys_) {
        NibbleRowsDot a;
        a.codes = codes;
        a.n = groupRows;
        a.r0 = row;
        a.m = n;
        a.nib0 = h * d * kb_ / 4;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        a.out = out;
        a.outStride = stride;
        job.ops.dotNibbleRows(a);
      } else if (byteRows) {
        for (int64_t i = 0; i < n; ++i)
          job.codeRows[static_cast<size_t>(i)] =
              codes + ((row + i) * C + h * d) * kb_ / 8;
        CodeRowsDot a;
        a.rows = job.codeRows.data();
        a.n = n;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        a.out = out;
        a.outStride = stride;
        job.ops.dotCodesRows(a);
      } else {
        CodesDot a;
        a.packed = codes;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        for (int64_t i = 0; i < n; ++i) {
          a.first = (row + i) * C + h * d;
          a.out = out + i * stride;
          job.ops.dotCodes(a);
        }
      }
      prefetchValueBlocks(headShare(t, end - t, H, h));
      if (!inPlace)
        for (int64_t i = 0; i < n; ++i) {
          float *o = job.scoreRow(rowOf[static_cast<size_t>(i)], h);
          for (int64_t j = 0; j < nq; ++j)
            o[j] = tmp[i * nq + j] + bias[h * nq + j];
        }
    }
    if (inPlace) {
      float *__restrict o = job.scoreRow(t, 0);
      const float *__restrict b = bias;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < K; ++k)
          o[i * K + k] += b[k];
    }
    t = end;
  }
}

/// Values: per-token groups; the weight times each group's scale scales
/// the raw codes (axpyCodesRows over the chunk's coded tokens, per head),
/// and weight x zero is summed per group and added once per chunk. The
/// walk touches each token's slot once: it records the block; one call then
/// converts all blocks' scales and zeros, and every later step works on
/// those chunk-wide arrays.
void KiviStore::attendValues(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  const int64_t perRow = C / G_, perHead = d / G_, chunk = job.t1 - job.t0;
  const int64_t wsStride = H * nq * perHead;
  job.scratch2.assign(static_cast<size_t>(wsStride), 0.0f);
  job.scratch3.resize(
      static_cast<size_t>(chunk * 2 * perRow + chunk * wsStride));
  float *zsum = job.scratch2.data(), *sz = job.scratch3.data();
  float *ws = sz + chunk * 2 * perRow;
  // codeRows: [0, chunk) one head's rows for the kernel, [chunk, 2 chunk)
  // each coded token's code block; positions: its row in the chunk.
  job.codeRows.resize(static_cast<size_t>(2 * chunk));
  const uint8_t **rowsOut = job.codeRows.data();
  const uint8_t **blocks = rowsOut + chunk;
  // The blocks were prefetched during the key pass (attendKeys).
  const int64_t n = walkValueRows(job, slots_, 4 * perRow, blocks);
  // Group weights and zero-point sums from the coded tokens' headers: in
  // one fused call where the cache's ops have one (its shape), else
  // converted in one call and summed by the portable loops (the same bits
  // either way).
  const float *scores = job.scores.data();
  const int64_t *rowOf = job.positions.data();
  if (job.ops.groupWeightsHalf) {
    GroupWeightsArgs a;
    a.headers = job.halfRows.data();
    a.rowOf = rowOf;
    a.n = n;
    a.scores = scores;
    a.heads = H;
    a.nq = nq;
    a.perHead = perHead;
    a.ws = ws;
    a.zsum = zsum;
    job.ops.groupWeightsHalf(a);
  } else {
    job.ops.halfRowsToFloat(job.halfRows.data(), n, 2 * perRow, sz);
    groupWeightsPortable(scores, rowOf, n, sz, H, nq, perHead, ws, zsum);
  }
  const bool byteRows = (d * vb_) % 8 == 0;
  for (int64_t h = 0; h < H; ++h) {
    const float *wsHead = ws + h * nq * perHead;
    if (byteRows) {
      const int64_t off = h * d * vb_ / 8;
      for (int64_t i = 0; i < n; ++i)
        rowsOut[i] = blocks[i] + off;
      CodeRowsAxpy a;
      a.rows = rowsOut;
      a.n = n;
      a.bits = vb_;
      a.ws = wsHead;
      a.wsStride = wsStride;
      a.G = G_;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      job.ops.axpyCodesRows(a);
    } else {
      CodesAxpy a;
      a.first = h * d;
      a.bits = vb_;
      a.G = G_;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      for (int64_t i = 0; i < n; ++i) {
        a.packed = blocks[i];
        a.ws = wsHead + i * wsStride;
        job.ops.axpyCodes(a);
      }
    }
  }
  // One zero-point sum per (query vector, group), added to its G channels.
  float *acc = job.acc.data();
  for (int64_t k = 0; k < H * nq; ++k)
    for (int64_t g = 0; g < perHead; ++g) {
      const float z = zsum[k * perHead + g];
      float *a = acc + k * d + g * G_;
      for (int64_t c = 0; c < G_; ++c)
        a[c] += z;
    }
}

void KiviStore::addStats(kvq_stats &st) const {
  // Scales and zeros come first in both block kinds (blocks.h).
  const UniformLayout valueRow = kiviValueRowLayout(cfg_);
  const int64_t keyGroupHead = kiviKeyGroupLayout(cfg_, 0).codesOffset();
  st.tokens += length();
  for (const Slot &s : slots_) {
    if (s.sink) {
      ++st.sink_tokens;
      st.sink_bytes += s.kf.size + s.vf.size;
    } else if (s.kf || s.vf) {
      ++st.residual_tokens;
      st.residual_bytes += s.kf.size + s.vf.size;
    } else {
      ++st.compressed_tokens;
    }
    if (s.vq) {
      st.scale_zero_bytes += valueRow.codesOffset();
      st.code_bytes += s.vq.size - valueRow.codesOffset();
    }
  }
  for (const Blk &b : groups_)
    if (b) {
      st.scale_zero_bytes += keyGroupHead;
      st.code_bytes += b.size - keyGroupHead;
    }
}

void KiviStore::releaseAll() {
  cancelTruncate();
  for (Slot &s : slots_) {
    payload_.release(s.kf);
    payload_.release(s.vf);
    payload_.release(s.vq);
  }
  for (Blk &b : groups_)
    payload_.release(b);
  slots_.clear();
  groups_.clear();
}

void KiviStore::remember(std::vector<uint16_t> &ring, int64_t h, int64_t &start,
                         int64_t from, int64_t to,
                         const uint16_t *(*row)(const void *, int64_t),
                         const void *rows) {
  if (h == 0 || to <= from)
    return;
  for (int64_t p = std::max(from, to - h); p < to; ++p)
    std::memcpy(ring.data() + (p % h) * channels_, row(rows, p),
                static_cast<size_t>(2 * channels_));
  start = std::max(start, to - h);
}

/// Exact when every kept token can be held as a layer of n tokens holds
/// it: kept rows quantized here but fp16 there (keys from keyTarget(n),
/// values from valueTarget(n)) come back from the rollback history, key
/// groups past keyTarget(n) are dropped, sinks a layer of n tokens has not
/// decided on return to the window; and, with sinks, the running top-k is
/// free of dropped positions once full (else the top-k of the kept
/// positions is unknown; when it is free of them, every sink decision was
/// taken against the same top-k as without the dropped tokens).
kvq_status KiviStore::checkTruncate(int64_t n) const {
  if (n == 0)
    return KVQ_OK;
  const int64_t kT = keyTarget(n), vT = valueTarget(n);
  const bool keysOk = kT >= std::min(keyDone(), n) || kT >= histK0_;
  const bool valuesOk = vT >= std::min(vDone_, n) || vT >= histV0_;
  if (!keysOk || !valuesOk)
    return fail(KVQ_ERR_NOT_EXACT,
                "kivi: keeping %lld of %lld tokens needs the fp16 %s of token "
                "%lld, but the rollback history reaches back to token %lld "
                "only",
                static_cast<long long>(n), static_cast<long long>(length()),
                keysOk ? "values" : "keys",
                static_cast<long long>(keysOk ? vT : kT),
                static_cast<long long>(keysOk ? histV0_ : histK0_));
  if (int64_t p = droppedTopKPosition(top_, k_, n); p >= 0)
    return fail(KVQ_ERR_NOT_EXACT,
                "kivi_sink: dropped token %lld is in the running top-%lld "
                "of key norms, which does not keep the earlier top-k",
                static_cast<long long>(p), static_cast<long long>(k_));
  return KVQ_OK;
}

kvq_status KiviStore::prepareTruncate(int64_t n) {
  cancelTruncate();
  if (n == 0)
    return KVQ_OK;
  const int64_t C = channels_, kT = keyTarget(n), vT = valueTarget(n);
  const int64_t kEnd = std::min(keyDone(), n), vEnd = std::min(vDone_, n);
  try {
    pendingK_.reserve(static_cast<size_t>(std::max<int64_t>(kEnd - kT, 0)));
    pendingV_.reserve(static_cast<size_t>(std::max<int64_t>(vEnd - vT, 0)));
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kivi cache: out of memory");
  }
  auto restore = [&](int64_t from, int64_t to,
                     const std::vector<uint16_t> &ring, int64_t h,
                     std::vector<std::pair<int64_t, Blk>> &out) {
    for (int64_t p = from; p < to; ++p) {
      if (slots_[static_cast<size_t>(p)].sink) // a sink kept its fp16 rows
        continue;
      Blk b = payload_.allocate(2 * C);
      if (!b)
        return false;
      std::memcpy(b.p, ring.data() + (p % h) * C, static_cast<size_t>(2 * C));
      out.emplace_back(p, b);
    }
    return true;
  };
  if (!restore(kT, kEnd, histK_, hk_, pendingK_) ||
      !restore(vT, vEnd, histV_, hv_, pendingV_)) {
    cancelTruncate();
    return allocationFailed("kivi", 2 * C);
  }
  return KVQ_OK;
}

void KiviStore::cancelTruncate() {
  for (auto &e : pendingK_)
    payload_.release(e.second);
  for (auto &e : pendingV_)
    payload_.release(e.second);
  pendingK_.clear();
  pendingV_.clear();
}

void KiviStore::truncate(int64_t n) {
  if (n == 0) {
    releaseAll();
    vDone_ = decided_ = nSinks_ = histK0_ = histV0_ = 0;
    top_.clear();
    return;
  }
  for (size_t p = static_cast<size_t>(n); p < slots_.size(); ++p) {
    Slot &s = slots_[p];
    nSinks_ -= s.sink;
    for (Blk *b : {&s.kf, &s.vf, &s.vq})
      payload_.release(*b);
  }
  slots_.resize(static_cast<size_t>(n));
  const int64_t kT = keyTarget(n), vT = valueTarget(n);
  while (keyDone() > kT) {
    payload_.release(groups_.back());
    groups_.pop_back();
  }
  for (auto &e : pendingK_)
    slots_[static_cast<size_t>(e.first)].kf = e.second;
  for (auto &e : pendingV_) {
    Slot &s = slots_[static_cast<size_t>(e.first)];
    payload_.release(s.vq);
    s.vf = e.second;
  }
  pendingK_.clear();
  pendingV_.clear();
  // Sinks chosen among tokens a layer of n tokens still holds in the window.
  const int64_t decided = std::max(kT, vT);
  for (int64_t p = decided; p < std::min(decided_, n); ++p) {
    Slot &s = slots_[static_cast<size_t>(p)];
    nSinks_ -= s.sink;
    s.sink = false;
  }
  vDone_ = vT;
  decided_ = decided;
  histK0_ = std::min(histK0_, keyDone());
  histV0_ = std::min(histV0_, vDone_);
  // A top-k not yet full never dropped anyone: the kept entries remain.
  top_.erase(std::remove_if(top_.begin(), top_.end(),
                            [&](const auto &e) { return e.second >= n; }),
             top_.end());
}

void KiviStore::copyHistory(const LayerStore &from) {
  const auto &o = static_cast<const KiviStore &>(from);
  histK_ = o.histK_;
  histV_ = o.histV_;
  histK0_ = o.histK0_;
  histV0_ = o.histV0_;
}

/// The state as a section (layer_section.h): the blocks are saved as
/// they are (key codes nibble-major when kiviKeysNibbleMajor).
void KiviStore::save(ByteWriter &w) const {
  KiviSection sec;
  sec.tokens = length();
  sinkPositions(sec.sinks);
  sec.top = top_;
  for (const Slot &s : slots_) {
    sec.kf.push_back(spanOf(s.kf));
    sec.vf.push_back(spanOf(s.vf));
    sec.vq.push_back(spanOf(s.vq));
  }
  for (const Blk &b : groups_)
    sec.keyGroups.push_back(spanOf(b));
  writeSection(w, sec);
}

kvq_status KiviStore::load(ByteReader &r) {
  KiviSection sec;
  if (kvq_status s = readSection(r, cfg_, sec))
    return s;
  const int64_t L = sec.tokens;
  slots_.resize(static_cast<size_t>(L));
  for (int64_t p : sec.sinks)
    slots_[static_cast<size_t>(p)].sink = true;
  nSinks_ = static_cast<int64_t>(sec.sinks.size());
  for (size_t p = 0; p < static_cast<size_t>(L); ++p) {
    Slot &s = slots_[p];
    for (auto [from, to] :
         {std::pair{&sec.kf[p], &s.kf}, std::pair{&sec.vf[p], &s.vf},
          std::pair{&sec.vq[p], &s.vq}})
      if (*from)
        if (kvq_status st = copyBlock(payload_, {*from}, *to))
          return st;
  }
  groups_.reserve(sec.keyGroups.size());
  for (const Span &b : sec.keyGroups) {
    groups_.push_back(Blk());
    if (b)
      if (kvq_status st = copyBlock(payload_, {b}, groups_.back()))
        return st;
  }
  vDone_ = valueTarget(L);
  decided_ = std::max(keyTarget(L), vDone_);
  top_ = std::move(sec.top);
  histK0_ = keyDone(); // no rollback history in a saved cache
  histV0_ = vDone_;
  return KVQ_OK;
}

} // namespace

std::unique_ptr<LayerStore> kvq::makeKiviStore(const kvq_config &cfg,
                                               Payload &payload) {
  return std::make_unique<KiviStore>(cfg, payload);
}
