//===- store_kvquant.cpp - KVQuant-NUQ storage ----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Keys: per-channel Lloyd-Max level tables fit on a batch of tokens (the
// prefill) and frozen; a key row is one block of packed codes plus its
// outliers. Values: per (token, head) level tables fit on every row. Outliers
// are fp16 value + 16-bit channel index. The first kvquant_n_sink prefill
// tokens stay fp16 and are left out of every fit and threshold.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "bitpack.h"
#include "kernels.h"
#include "kvquant_plan.h"
#include "layer_section.h"
#include "paged.h"
#include "parallel.h"
#include "rope.h"
#include "rope_keys.h"
#include "serial.h"
#include "status.h"
#include "store.h"
#include "store_io.h"
#include "store_util.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

using namespace kvq;

namespace {

/// Tokens per run of attendKeys: one tile of dotLutRows' AVX-512 kernel
/// (rows in its 16 lanes).
constexpr int64_t kKeyRun = 16;

/// The level fits of an update are split into fixed tasks for the host's
/// parallel-for: key channels per task, and value rows per task within
/// chunks of kValueChunk rows (which bound the floats held at once). Each
/// channel or row is fitted on its own, so the split never changes a bit.
constexpr int64_t kFitTaskChannels = 32;
constexpr int64_t kFitTaskRows = 8;
constexpr int64_t kValueChunk = 32;
/// Key rows converted, coded and written per chunk: a batch (a whole
/// prefill) is never held as floats, whose fresh pages cost more than the
/// conversion on this project's VMs.
constexpr int64_t kKeyChunk = 64;

/// Outlier o of a row's side list (blocks.h).
void writeOutlier(uint8_t *outliers, int64_t o, float value, int64_t c) {
  OutlierList<uint8_t>{outliers}.set(
      o, {floatToHalf(value), static_cast<uint16_t>(c)});
}

class KvquantStore final : public LayerStore {
public:
  KvquantStore(const kvq_config &cfg, Payload &payload)
      : LayerStore(cfg, payload), kb_(cfg.key_bits), vb_(cfg.value_bits),
        kLevels_(1 << cfg.key_bits), vLevels_(1 << cfg.value_bits),
        frozen_(cfg.refit_interval == 0), keyRow_(kvquantKeyRowLayout(cfg)),
        valueRow_(kvquantValueRowLayout(cfg)), table_(kvquantTableLayout(cfg)) {
  }

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
  void releaseAll() override;
  void attendKeys(AttendJob &job) const override;
  void attendValues(AttendJob &job) const override;
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override;
  int64_t keyColumnTiles(int64_t t0, int64_t maxTiles) const override;
  void scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles, int64_t h,
                       const float *cos, const float *sin, bool interleaved,
                       float *out, int64_t outStride) const override;
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
  const bool frozen_;       ///< refit_interval == 0: one frozen key segment
  const KvquantKeyRowLayout keyRow_;     ///< blocks.h
  const KvquantValueRowLayout valueRow_; ///< blocks.h
  const KvquantTableLayout table_;       ///< blocks.h
  PagedVector<Slot> slots_; ///< never moves on growth (paged.h)
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

void KvquantStore::fitKeys(const uint16_t *const *rows, int64_t m,
                           uint8_t *mask, uint8_t *table,
                           const kvq_parallel &parallel) const {
  const int64_t C = channels_;
  const int64_t tasks = (C + kFitTaskChannels - 1) / kFitTaskChannels;
  runTasks(parallel, tasks, [&](int64_t task) {
    fitKeyChannels(rows, m, task * kFitTaskChannels,
                   std::min(C, (task + 1) * kFitTaskChannels), mask, table);
  });
}

void KvquantStore::fitKeyChannels(const uint16_t *const *rows, int64_t m,
                                  int64_t c0, int64_t c1, uint8_t *mask,
                                  uint8_t *table) const {
  const int64_t C = channels_, w = c1 - c0;
  const KernelTable &kt = kernels();
  const int64_t k = outlierCount(cfg_.outlier_fraction, m);
  // The task's channels gathered once, each into its own column: the rank
  // split bisects over a column about 31 times, and the kernels' vector
  // paths take contiguous input. Row by row, so each row is read once.
  // Not zeroed first (every element is written): fresh pages are costly.
  const std::unique_ptr<float[]> scratch(
      new float[static_cast<size_t>(lloydScratchFloats(m))]),
      columns(new float[static_cast<size_t>(m * w)]);
  float part[kFitTaskChannels];
  for (int64_t t = 0; t < m; ++t) {
    halfRowToFloat(rows[t] + c0, w, part);
    for (int64_t j = 0; j < w; ++j)
      columns[static_cast<size_t>(j * m + t)] = part[j];
  }
  float levels[kMaxLevels];
  for (int64_t c = c0; c < c1; ++c) {
    float *column = columns.get() + (c - c0) * m;
    float threshold;
    TopkAbsArgs top;
    top.x = column;
    top.n = m;
    top.k = k;
    top.mask = mask + c;
    top.maskStride = C;
    top.threshold = &threshold;
    kt.topkAbs(top);
    LloydFitArgs fit;
    fit.x = column;
    fit.n = m;
    fit.exclude = mask + c; // the outliers just split off
    fit.exStride = C;
    fit.bits = kb_;
    fit.iters = cfg_.lloyd_iters;
    fit.scratch = scratch.get();
    fit.levels = levels;
    kt.lloydFit(fit);
    for (int l = 0; l < kLevels_; ++l)
      write16(table, table_.levelAt(c, l), floatToHalf(levels[l]));
    if (frozen_) // the k-th largest |x| is an fp16 value (or +inf): exact
      write16(table, table_.thresholdAt(c), floatToHalf(threshold));
  }
}

void KvquantStore::writeKeyRow(const float *x, const uint8_t *codes,
                               const uint8_t *mask, uint8_t *out) const {
  const int64_t C = channels_;
  int64_t o = 0;
  uint8_t *outliers = out + keyRow_.outliersOffset();
  // An outlier keeps its (unused) dense code slot, as in the paper's
  // dense-and-sparse split.
  for (int64_t c = 0; c < C; ++c)
    if (mask[c])
      writeOutlier(outliers, o++, x[c], c);
  kernels().packCodes(codes, C, kb_, out);
}

int64_t KvquantStore::planValueRow(const float *x, uint8_t *mask, float *levels,
                                   float *scratch) const {
  const int64_t D = cfg_.head_dim;
  const KernelTable &kt = kernels();
  const int64_t k = outlierCount(cfg_.outlier_fraction, D);
  int64_t count = 0;
  for (int32_t h = 0; h < cfg_.num_kv_heads; ++h) {
    TopkAbsArgs top;
    top.x = x + h * D;
    top.n = D;
    top.k = k;
    top.mask = mask + h * D;
    kt.topkAbs(top);
    LloydFitArgs fit;
    fit.x = x + h * D;
    fit.n = D;
    fit.exclude = mask + h * D; // the outliers just split off
    fit.exStride = 1;
    fit.bits = vb_;
    fit.iters = cfg_.lloyd_iters;
    fit.scratch = scratch;
    fit.levels = levels + h * vLevels_;
    kt.lloydFit(fit);
    for (int l = 0; l < vLevels_; ++l) // store and use fp16 levels
      levels[h * vLevels_ + l] = roundToHalf(levels[h * vLevels_ + l]);
    for (int64_t d = 0; d < D; ++d)
      count += mask[h * D + d];
  }
  return count;
}

void KvquantStore::writeValueRow(const float *x, const uint8_t *mask,
                                 const float *levels, uint8_t *out) const {
  const int64_t C = channels_;
  const int64_t heads = cfg_.num_kv_heads;
  std::vector<uint16_t> table(static_cast<size_t>(heads * vLevels_));
  for (int64_t i = 0; i < heads * vLevels_; ++i) {
    table[static_cast<size_t>(i)] = floatToHalf(levels[i]);
    write16(out, i, table[static_cast<size_t>(i)]);
  }
  // The nearest levels by the kernel table's kvq_nuq_quant: one group of
  // head_dim per head (the levels are fp16 already, so the same codes).
  Grid g;
  g.rows = 1;
  g.cols = C;
  g.group = cfg_.head_dim;
  g.axis = KVQ_AXIS_PER_TOKEN;
  kernels().nuqQuant(x, KVQ_DTYPE_F32, g, vb_, table.data(), KVQ_CODES_PACKED,
                     out + valueRow_.codesOffset());
  uint8_t *outliers = out + valueRow_.outliersOffset();
  int64_t o = 0;
  for (int64_t c = 0; c < C; ++c)
    if (mask[c])
      writeOutlier(outliers, o++, x[c], c);
}

kvq_status KvquantStore::update(const uint16_t *k, const uint16_t *v, int64_t n,
                                const kvq_parallel &parallel) {
  const int64_t C = channels_, L0 = length(), L1 = L0 + n;
  const int64_t rowBytes = 2 * C;
  const UpdateRows<decltype(slots_)> in(slots_, k, v, L0, C);

  // The policy (kvquant_plan.h, shared with the Metal host).
  const KvquantPlan plan = planKvquantUpdate(
      cfg_, L0, quantizedUpTo_, static_cast<int64_t>(segs_.size()), n);
  const int64_t sinks = plan.sinks, first = plan.first,
                quantEnd = plan.quantEnd;
  std::vector<KvquantBatch> fits; // the batches fitted afresh
  for (const KvquantBatch &b : plan.batches)
    if (b.fresh)
      fits.push_back(b);

  Txn txn(payload_);
  auto oom = [](int64_t bytes) { return allocationFailed("kvquant", bytes); };
  std::vector<Slot> added(static_cast<size_t>(n));
  for (int64_t p = L0; p < L1; ++p) {
    Slot &s = added[static_cast<size_t>(p - L0)];
    s.sink = p < L0 + sinks;
    if (s.sink || p >= quantEnd) {
      if (!(s.kf = txn.allocate(rowBytes)) || !(s.vf = txn.allocate(rowBytes)))
        return oom(rowBytes);
      std::memcpy(s.kf.p, in.key(p), static_cast<size_t>(rowBytes));
      std::memcpy(s.vf.p, in.value(p), static_cast<size_t>(rowBytes));
    }
  }

  // Key rows, batch by batch: a fresh fit, or the frozen segment 0.
  std::vector<Segment> newSegs;
  std::vector<Blk> kq(static_cast<size_t>(quantEnd - first));
  std::vector<uint16_t> kOut(kq.size(), 0), vOut(kq.size(), 0);
  std::vector<float> x;
  std::unique_ptr<uint8_t[]> mask; // every entry written before it is read
  std::vector<uint8_t> codes;
  std::vector<const uint16_t *> keyRows;
  auto quantizeKeys = [&](int64_t a, int64_t b, const uint8_t *table,
                          bool fresh) -> bool {
    const int64_t m = b - a;
    mask.reset(new uint8_t[static_cast<size_t>(m * C)]);
    if (fresh) {
      keyRows.resize(static_cast<size_t>(m));
      for (int64_t p = a; p < b; ++p)
        keyRows[static_cast<size_t>(p - a)] = in.key(p);
      fitKeys(keyRows.data(), m, mask.get(), const_cast<uint8_t *>(table),
              parallel);
    }
    // Chunks of rows: converted, screened (frozen levels), coded and
    // written. The nearest levels by kvq_nuq_quant, per channel one group
    // of the chunk's rows against the table's levels (a code depends only
    // on its element and its channel's levels, so chunks change nothing).
    const int64_t chunk = std::min(kKeyChunk, m);
    x.resize(static_cast<size_t>(chunk * C));
    codes.resize(static_cast<size_t>(chunk * C));
    for (int64_t r0 = 0; r0 < m; r0 += chunk) {
      const int64_t rows = std::min(chunk, m - r0);
      for (int64_t i = 0; i < rows; ++i)
        halfRowToFloat(in.key(a + r0 + i), C, x.data() + i * C);
      uint8_t *chunkMask = mask.get() + r0 * C;
      if (!fresh) // decode keys: screened against the prefill's thresholds
        for (int64_t i = 0; i < rows * C; ++i)
          chunkMask[i] =
              std::fabs(x[static_cast<size_t>(i)]) >=
                      halfToFloat(read16(table, table_.thresholdAt(i % C)))
                  ? 1
                  : 0;
      kernels().nuqQuant(x.data(), KVQ_DTYPE_F32, Grid::columns(rows, C), kb_,
                         reinterpret_cast<const uint16_t *>(table),
                         KVQ_CODES_UNPACKED, codes.data());
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t p = a + r0 + i;
        const uint8_t *rowMask = chunkMask + i * C;
        const int64_t outs = std::count(rowMask, rowMask + C, uint8_t{1});
        const int64_t bytes = keyRowBytes(outs);
        Blk blk = txn.allocate(bytes);
        if (!blk)
          return false;
        writeKeyRow(x.data() + i * C, codes.data() + i * C, rowMask, blk.p);
        kq[static_cast<size_t>(p - first)] = blk;
        kOut[static_cast<size_t>(p - first)] = static_cast<uint16_t>(outs);
      }
    }
    return true;
  };
  for (const KvquantBatch &batch : plan.batches) {
    const uint8_t *levels = nullptr;
    if (batch.fresh) {
      Blk table = txn.allocate(tableBytes());
      if (!table)
        return oom(tableBytes());
      newSegs.push_back({batch.from, table});
      levels = table.p;
    } else {
      levels = segs_[0].table.p; // the prefill's frozen levels
    }
    if (!quantizeKeys(batch.from, batch.to, levels, batch.fresh))
      return oom(keyRowBytes(0));
  }

  // Value rows: levels per (token, head), refit on every row. A chunk's
  // rows are fitted in tasks over the host's workers, then allocated and
  // written in order on this thread (the allocator is the host's).
  std::vector<Blk> vq(kq.size());
  {
    const int64_t HL = cfg_.num_kv_heads * vLevels_;
    const int64_t chunk = std::min(kValueChunk, quantEnd - first);
    std::vector<float> rows(static_cast<size_t>(chunk * C)),
        levels(static_cast<size_t>(chunk * HL));
    std::vector<uint8_t> vmasks(static_cast<size_t>(chunk * C));
    std::vector<int64_t> outs(static_cast<size_t>(chunk));
    for (int64_t p0 = first; p0 < quantEnd; p0 += chunk) {
      const int64_t m = std::min(chunk, quantEnd - p0);
      runTasks(parallel, (m + kFitTaskRows - 1) / kFitTaskRows,
               [&](int64_t task) {
                 // One fit scratch per task, not zeroed (each fit gathers
                 // into it first).
                 const std::unique_ptr<float[]> scratch(
                     new float[static_cast<size_t>(
                         lloydScratchFloats(cfg_.head_dim))]);
                 const int64_t i1 = std::min(m, (task + 1) * kFitTaskRows);
                 for (int64_t i = task * kFitTaskRows; i < i1; ++i) {
                   float *row = rows.data() + i * C;
                   halfRowToFloat(in.value(p0 + i), C, row);
                   outs[static_cast<size_t>(i)] =
                       planValueRow(row, vmasks.data() + i * C,
                                    levels.data() + i * HL, scratch.get());
                 }
               });
      for (int64_t i = 0; i < m; ++i) {
        const int64_t p = p0 + i;
        const int64_t o = outs[static_cast<size_t>(i)];
        const int64_t bytes = valueRowBytes(o);
        Blk blk = txn.allocate(bytes);
        if (!blk)
          return oom(bytes);
        writeValueRow(rows.data() + i * C, vmasks.data() + i * C,
                      levels.data() + i * HL, blk.p);
        vq[static_cast<size_t>(p - first)] = blk;
        vOut[static_cast<size_t>(p - first)] = static_cast<uint16_t>(o);
        if (p < L0) { // a token that waited fp16 for its refit
          txn.retire(slots_[static_cast<size_t>(p)].kf);
          txn.retire(slots_[static_cast<size_t>(p)].vf);
        }
      }
    }
  }
  reserveGeometric(slots_, static_cast<size_t>(L1));
  reserveGeometric(segs_, segs_.size() + newSegs.size());
  // The last refit batch of this call (not the prefill fit) enters the
  // rollback history.
  const bool refit = fits.size() > (segs_.empty() ? 1u : 0u);
  if (refit && lastK_.empty()) {
    lastK_.resize(static_cast<size_t>(cfg_.refit_interval * C));
    lastV_.resize(lastK_.size());
  }

  // Commit: nothing below allocates or fails.
  if (refit) {
    lastStart_ = fits.back().from;
    for (int64_t p = lastStart_; p < fits.back().to; ++p) {
      const size_t at = static_cast<size_t>((p - lastStart_) * C);
      std::memcpy(lastK_.data() + at, in.key(p), static_cast<size_t>(rowBytes));
      std::memcpy(lastV_.data() + at, in.value(p),
                  static_cast<size_t>(rowBytes));
    }
  }
  slots_.resize(static_cast<size_t>(L1));
  for (int64_t p = L0; p < L1; ++p)
    slots_[static_cast<size_t>(p)] = added[static_cast<size_t>(p - L0)];
  for (int64_t p = first; p < quantEnd; ++p) {
    Slot &s = slots_[static_cast<size_t>(p)];
    s.kf = Blk();
    s.vf = Blk();
    s.kq = kq[static_cast<size_t>(p - first)];
    s.vq = vq[static_cast<size_t>(p - first)];
    s.kOut = kOut[static_cast<size_t>(p - first)];
    s.vOut = vOut[static_cast<size_t>(p - first)];
  }
  if (segs_.empty() && !fits.empty())
    seg0End_ = fits[0].to;
  for (const Segment &s : newSegs)
    segs_.push_back(s);
  quantizedUpTo_ = quantEnd;
  txn.commit();
  return KVQ_OK;
}

void KvquantStore::loadRow(int64_t pos, float *k, float *v) const {
  const int64_t C = channels_, D = cfg_.head_dim;
  const Slot &s = slots_[static_cast<size_t>(pos)];
  if (s.kf) {
    blockRowToFloat(s.kf.p, C, k);
    blockRowToFloat(s.vf.p, C, v);
    return;
  }
  const uint8_t *table = segmentFor(pos).table.p;
  for (int64_t c = 0; c < C; ++c)
    k[c] = halfToFloat(
        read16(table, table_.levelAt(c, packedCodeAt(s.kq.p, c, kb_))));
  const OutlierList<const uint8_t> kOutliers{s.kq.p + keyRow_.outliersOffset()};
  for (int64_t o = 0; o < s.kOut; ++o)
    k[kOutliers.at(o).channel] = halfToFloat(kOutliers.at(o).value);

  const uint8_t *packed = s.vq.p + valueRow_.codesOffset();
  for (int64_t c = 0; c < C; ++c)
    v[c] = halfToFloat(
        read16(s.vq.p, (c / D) * vLevels_ + packedCodeAt(packed, c, vb_)));
  const OutlierList<const uint8_t> vOutliers{s.vq.p +
                                             valueRow_.outliersOffset()};
  for (int64_t o = 0; o < s.vOut; ++o)
    v[vOutliers.at(o).channel] = halfToFloat(vOutliers.at(o).value);
}

/// A key row from its unpacked codes: each channel's level (exact).
KVQ_AVX2_CLONE
void lookupKeyLevels(const uint8_t *__restrict codes, int64_t C, int64_t L,
                     const float *__restrict levels, float *__restrict out) {
  for (int64_t c = 0; c < C; ++c)
    out[c] = levels[c * L + codes[c]];
}

/// Pre-RoPE keys by rows, as loadRow decodes them: the segment's levels
/// converted once (job.keyScratch, kept across chunks), codes unpacked by
/// the kernel table, one lookup per channel, then the outliers.
void KvquantStore::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                            float *out) const {
  const int64_t C = channels_, L = kLevels_;
  job.keyScratch.resize(static_cast<size_t>(C * L));
  job.scratch3.resize(static_cast<size_t>(C / 4 + 8)); // C code bytes
  float *levels = job.keyScratch.data();
  uint8_t *codes = reinterpret_cast<uint8_t *>(job.scratch3.data());
  for (int64_t t = t0; t < t1; ++t) {
    float *k = out + (t - t0) * C;
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(s.kf.p), C, k);
      continue;
    }
    const uint8_t *table = segmentFor(t).table.p;
    if (job.keyScratchOf != table) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(table), C * L,
                           levels);
      job.keyScratchOf = table;
    }
    kernels().unpackCodes(s.kq.p, C, kb_, codes);
    lookupKeyLevels(codes, C, L, levels, k);
    const OutlierList<const uint8_t> outliers{s.kq.p +
                                              keyRow_.outliersOffset()};
    for (int64_t o = 0; o < s.kOut; ++o)
      k[outliers.at(o).channel] = halfToFloat(outliers.at(o).value);
    // The value pass reads this token's block next (as attendKeys asks).
    prefetchBytes(s.vq.p, s.vq.size);
  }
}

static_assert(kKeyTile == kLevelColumnRows,
              "a pre-RoPE key tile is one levelColumns call per head");

/// Whole tiles of coded rows of one key segment go by columns, one per
/// call (the outlier cursor, AttendJob::outlierNext, covers one tile).
int64_t KvquantStore::keyColumnTiles(int64_t t0, int64_t) const {
  const int64_t t1 = t0 + kKeyTile;
  if (t1 > length() || segmentEnd(t0) < t1)
    return 0;
  for (int64_t t = t0; t < t1; ++t)
    if (slots_[static_cast<size_t>(t)].kf)
      return 0;
  return 1;
}

/// A tile of head h's pre-RoPE keys by columns, as loadRow decodes them:
/// the tile's rows dequantized by the segment's levels (levelColumns,
/// tokens in lanes), the head's outliers written over their slots, then
/// the canonical rotated scores (ropeScoresColumns).
void KvquantStore::scoreKeyColumns(AttendJob &job, int64_t t0,
                                   [[maybe_unused]] int64_t tiles, int64_t h,
                                   const float *cos, const float *sin,
                                   bool interleaved, float *out,
                                   int64_t outStride) const {
  assert(tiles == 1);
  const int64_t C = channels_, L = kLevels_, d = job.d;
  job.keyScratch.resize(static_cast<size_t>(C * L));
  job.codeRows.resize(static_cast<size_t>(kKeyTile));
  float *levels = job.keyScratch.data();
  const uint8_t **rows = job.codeRows.data();
  if (h == 0) { // the heads follow in order: the tile's levels and rows
    const uint8_t *table = segmentFor(t0).table.p;
    if (job.keyScratchOf != table) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(table), C * L,
                           levels);
      job.keyScratchOf = table;
    }
    job.outlierNext.assign(static_cast<size_t>(kKeyTile), 0);
    for (int64_t t = t0; t < t0 + kKeyTile; ++t) {
      const Slot &s = slots_[static_cast<size_t>(t)];
      rows[t - t0] = s.kq.p;
      // The outlier list follows the codes, on a line levelColumns does
      // not read: ask for it now, while the codes are decoded.
      if (s.kOut > 0)
        __builtin_prefetch(s.kq.p + keyRow_.outliersOffset());
    }
  }
  // Each head's turn asks for 1/H of the next tile's key rows (of which
  // each head reads only its slice) and of this tile's value blocks, which
  // the value pass reads next (all at head 0 held that loop on its
  // prefetches).
  prefetchValueRows(headShare(t0, kKeyTile, job.heads, h));
  prefetchKeyRows(headShare(t0 + kKeyTile, kKeyTile, job.heads, h));
  job.scratch3.resize(static_cast<size_t>(d * kKeyTile));
  float *cols = job.scratch3.data();
  LevelColumns a;
  a.rows = rows;
  a.n = kKeyTile;
  a.first = h * d;
  a.bits = kb_;
  a.levels = levels + h * d * L;
  a.d = d;
  a.cols = cols;
  job.ops.levelColumns(a);
  // Each token's outliers of this head, from where the previous head's
  // ended (channel order), written over their slots.
  int64_t *next = job.outlierNext.data();
  for (int64_t t = t0; t < t0 + kKeyTile; ++t) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    const OutlierList<const uint8_t> outliers{s.kq.p +
                                              keyRow_.outliersOffset()};
    int64_t o = next[t - t0];
    for (; o < s.kOut; ++o) {
      const OutlierEntry e = outliers.at(o);
      const int64_t c = e.channel - h * d;
      if (c >= d)
        break; // the rest are later heads'
      if (c >= 0)
        cols[c * kKeyTile + (t - t0)] = halfToFloat(e.value);
    }
    next[t - t0] = o;
  }
  ropeScoresColumns(cols, cos, sin, job.ropeQueries, h * job.nq, job.nq,
                    interleaved, out, outStride);
}

/// Keys: the frozen per-channel levels times the queries form a lookup
/// table per segment (lut[h][j][c][l] = q_c * level_c[l]), so a row's score
/// is a sum of table entries picked by its codes; outliers replace their
/// dense slot's term.
void KvquantStore::attendKeys(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  const int64_t L = kLevels_;
  // Levels, then the product tables, kept across chunks in keyScratch
  // (the value pass leaves it alone) for the segment they were built of.
  job.keyScratch.resize(static_cast<size_t>(C * L + H * nq * d * L));
  job.codeRows.resize(static_cast<size_t>(kKeyRun));
  float *levels = job.keyScratch.data(), *lut = levels + C * L;
  const uint8_t **run = job.codeRows.data();
  for (int64_t t = job.t0, end; t < job.t1; t = end) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      const uint16_t *k = reinterpret_cast<const uint16_t *>(s.kf.p);
      for (int64_t h = 0; h < H; ++h)
        job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(t, h));
      end = t + 1;
      continue;
    }
    const Segment &seg = segmentFor(t);
    if (job.keyScratchOf != seg.table.p) {
      job.keyScratchOf = seg.table.p;
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(seg.table.p),
                           C * L, levels);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < nq; ++j) {
          const float *q = job.query(h) + j * d;
          float *row = lut + (h * nq + j) * d * L;
          for (int64_t c = 0; c < d; ++c)
            for (int64_t l = 0; l < L; ++l)
              row[c * L + l] = q[c] * levels[(h * d + c) * L + l];
        }
    }
    // A run of at most kKeyRun coded tokens of this segment.
    const int64_t last = std::min({job.t1, t + kKeyRun, segmentEnd(t)});
    for (end = t; end < last && !slots_[static_cast<size_t>(end)].kf; ++end)
      run[end - t] = slots_[static_cast<size_t>(end)].kq.p;
    // Each head's turn below asks for 1/H of the next run's key rows and
    // of the value blocks of this run's tokens, which the value pass reads
    // next (each token's rows its own allocations, a stride the hardware
    // prefetcher does not follow), while the key arithmetic runs, as the
    // KIVI store does.
    const int64_t next = std::min(job.t1, end + kKeyRun);
    // The run's rows of each head at once against the head's product
    // tables (the AVX-512 kernel holds 16 rows in its lanes and decodes
    // their codes once for the nq query vectors).
    LutRowsDot a;
    a.rows = run;
    a.n = end - t;
    a.bits = kb_;
    a.nq = nq;
    a.d = d;
    a.outStride = H * nq;
    for (int64_t h = 0; h < H; ++h) {
      prefetchValueRows(headShare(t, end - t, H, h));
      prefetchKeyRows(headShare(end, next - end, H, h));
      a.first = h * d;
      a.lut = lut + h * nq * d * L;
      a.out = job.scoreRow(t, h);
      job.ops.dotLutRows(a);
    }
    for (int64_t u = t; u < end; ++u)
      patchKeyOutliers(job, u, lut);
  }
}

/// Each outlier of token t's key row replaces its dense slot's term in the
/// scores (outlierScores: q * value - the table entry, added in the
/// stored order).
void KvquantStore::patchKeyOutliers(AttendJob &job, int64_t t,
                                    const float *lut) const {
  const Slot &s = slots_[static_cast<size_t>(t)];
  if (s.kOut == 0)
    return;
  OutlierScores a;
  a.entries = s.kq.p + keyRow_.outliersOffset();
  a.k = s.kOut;
  a.codes = s.kq.p;
  a.bits = kb_;
  a.q = job.q.data();
  a.lut = lut;
  a.nq = job.nq;
  a.d = job.d;
  a.scores = job.scoreRow(t, 0);
  job.ops.outlierScores(a);
}

/// luts[i][h][j] = w[j] * the levels of token i, head h, repeated to
/// lutEntries (periodic tables). LT = L as a template parameter for the
/// usual widths, so the products are straight-line vector code; one
/// multiply per entry either way.
template <int LT>
void valueLuts(AttendJob &job, int64_t n, const float *levels, float *luts,
               int64_t Lrt = 0) {
  const int64_t L = LT > 0 ? LT : Lrt, H = job.heads, nq = job.nq;
  const int64_t E = L > 16 ? L : 16, lutStride = H * nq * E;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = job.t0 + job.positions[static_cast<size_t>(i)];
    for (int64_t h = 0; h < H; ++h) {
      const float *__restrict w = job.scoreRow(t, h);
      const float *__restrict lv = levels + (i * H + h) * L;
      float *__restrict lut = luts + i * lutStride + h * nq * E;
      for (int64_t j = 0; j < nq; ++j) {
        // The products are made once in registers and stored E / L times
        // (reading back entries just stored would stall on forwarding).
        float *__restrict dst = lut + j * E;
        if constexpr (LT > 0) {
          float prod[LT];
          for (int l = 0; l < LT; ++l)
            prod[l] = w[j] * lv[l];
          for (int64_t k = 0; k < E; k += LT)
            std::memcpy(dst + k, prod, sizeof(prod));
        } else {
          for (int64_t k = 0; k < E; k += L)
            for (int64_t l = 0; l < L; ++l)
              dst[k + l] = w[j] * lv[l];
        }
      }
    }
  }
}

/// Values: one level table per (token, head); the weights times the table
/// form per-row lookups ([token][head][j][lutEntries] for the chunk's
/// quantized tokens), summed per head in one axpyLutRows call so the
/// accumulators stay in registers across the rows. Outliers then add
/// their corrections, token by token.
void KvquantStore::attendValues(AttendJob &job) const {
  const int64_t d = job.d, nq = job.nq, H = job.heads;
  const int64_t L = vLevels_, E = lutEntries(vb_), chunk = job.t1 - job.t0;
  const int64_t lutStride = H * nq * E;
  // 16 floats of slack: a SIMD lookup may read a whole register of the
  // last table.
  job.scratch2.resize(static_cast<size_t>(chunk * H * L + 16));
  job.scratch3.resize(
      static_cast<size_t>(nq == 1 ? chunk * lutStride : chunk * nq));
  float *levels = job.scratch2.data(), *luts = job.scratch3.data();
  job.codeRows.resize(static_cast<size_t>(2 * chunk));
  const uint8_t **rowsOut = job.codeRows.data();
  const uint8_t **packedOf = rowsOut + chunk; // each coded token's codes
  const int64_t n =
      walkValueRows(job, slots_, valueRow_.codesOffset(), packedOf);
  job.ops.halfRowsToFloat(job.halfRows.data(), n, H * L, levels);
  // One query vector per head: weighted tables, one lookup and addition
  // per element. More (GQA): each code looked up once in its row's level
  // table, then one FMA per query vector.
  if (nq == 1) {
    switch (L) {
    case 4:
      valueLuts<4>(job, n, levels, luts);
      break;
    case 8:
      valueLuts<8>(job, n, levels, luts);
      break;
    case 16:
      valueLuts<16>(job, n, levels, luts);
      break;
    default:
      valueLuts<0>(job, n, levels, luts, L);
      break;
    }
  }
  // The row kernels read codes from bit 0 of their row pointer. A head
  // whose codes start inside a byte (h * d * vb not a multiple of 8: odd
  // head_dim shapes) gets its codes repacked at bit 0 first, so every
  // kernel table (reference, AVX2, AVX-512, NEON) reads the right codes.
  const bool byteRows = (d * vb_) % 8 == 0;
  const int64_t headBytes = packedBytes(d, vb_) + 16; // + SIMD read slack
  std::vector<uint8_t> repacked, codes;
  if (!byteRows) {
    repacked.assign(static_cast<size_t>(n * headBytes), 0);
    codes.resize(static_cast<size_t>(d));
  }
  for (int64_t h = 0; h < H; ++h) {
    if (byteRows) {
      const int64_t off = h * d * vb_ / 8;
      for (int64_t i = 0; i < n; ++i)
        rowsOut[i] = packedOf[i] + off;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < d; ++c)
          codes[static_cast<size_t>(c)] =
              static_cast<uint8_t>(packedCodeAt(packedOf[i], h * d + c, vb_));
        uint8_t *dst = repacked.data() + i * headBytes;
        packCodesRef(codes.data(), d, vb_, dst);
        rowsOut[i] = dst;
      }
    }
    if (nq == 1) {
      LutRowsAxpy a;
      a.rows = rowsOut;
      a.n = n;
      a.bits = vb_;
      a.luts = luts + h * nq * E;
      a.lutStride = lutStride;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      job.ops.axpyLutRows(a);
      continue;
    }
    float *w = luts; // the chunk's weights of this head, [i][j]
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(
          w + i * nq,
          job.scoreRow(job.t0 + job.positions[static_cast<size_t>(i)], h),
          static_cast<size_t>(nq) * sizeof(float));
    LevelRowsAxpy a;
    a.rows = rowsOut;
    a.n = n;
    a.bits = vb_;
    a.levels = levels + h * L; // the head's table per row
    a.levelStride = H * L;
    a.w = w;
    a.wStride = nq;
    a.nq = nq;
    a.d = d;
    a.acc = job.accumulator(h);
    job.ops.axpyLevelRows(a);
  }
  // The outliers, token by token: each replaces its dense slot's level.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = job.t0 + job.positions[static_cast<size_t>(i)];
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.vOut == 0)
      continue;
    OutlierAxpy a;
    // The outliers follow the row's codes (blocks.h).
    a.entries = packedOf[i] + valueRow_.codeBytes;
    a.k = s.vOut;
    a.codes = packedOf[i];
    a.bits = vb_;
    a.levels = levels + i * H * L;
    a.levelCount = L;
    a.w = job.scoreRow(t, 0);
    a.nq = nq;
    a.d = d;
    a.acc = job.accumulator(0);
    job.ops.outlierAxpy(a);
  }
}

void KvquantStore::addStats(kvq_stats &st) const {
  const int64_t valueTables = valueRow_.codesOffset(); // fp16 levels
  st.tokens += length();
  for (const Slot &s : slots_) {
    if (s.sink) {
      ++st.sink_tokens;
      st.sink_bytes += s.kf.size + s.vf.size;
    } else if (s.kf) {
      ++st.residual_tokens;
      st.residual_bytes += s.kf.size + s.vf.size;
    } else {
      ++st.compressed_tokens;
      st.code_bytes += keyRow_.codeBytes + valueRow_.codeBytes;
      st.level_table_bytes += valueTables;
      st.outlier_count += s.kOut + s.vOut;
      st.outlier_bytes += kOutlierBytes * (s.kOut + s.vOut);
    }
  }
  for (const Segment &s : segs_)
    st.level_table_bytes += s.table.size;
}

void KvquantStore::releaseAll() {
  cancelTruncate();
  for (Slot &s : slots_) {
    payload_.release(s.kf);
    payload_.release(s.vf);
    payload_.release(s.kq);
    payload_.release(s.vq);
  }
  for (Segment &s : segs_)
    payload_.release(s.table);
  slots_.clear();
  segs_.clear();
}

/// Exact when every kept quantized token was quantized against levels fit
/// on kept tokens only: the cut keeps only sinks (no fit yet), or lies at
/// or after the end of the prefill fit and, when refitting, at or after
/// the last refit batch or exactly on a batch boundary. Rows are
/// quantized one by one against their segment, so nothing else depends on
/// the dropped tokens.
kvq_status KvquantStore::checkTruncate(int64_t n) const {
  if (n == 0 || n <= sinkCount())
    return KVQ_OK;
  if (n < seg0End_)
    return fail(KVQ_ERR_NOT_EXACT,
                "kvquant: the prefill key levels were fit on tokens [%lld, "
                "%lld); keeping %lld tokens would need them refit",
                static_cast<long long>(segs_[0].start),
                static_cast<long long>(seg0End_), static_cast<long long>(n));
  if (!frozen_ && n < quantizedUpTo_ && !insideLastBatch(n) &&
      std::none_of(segs_.begin(), segs_.end(),
                   [&](const Segment &s) { return s.start == n; }))
    return fail(KVQ_ERR_NOT_EXACT,
                "kvquant: token %lld was quantized with key levels refit on "
                "a batch of %d tokens that reaches past the cut",
                static_cast<long long>(n - 1), cfg_.refit_interval);
  return KVQ_OK;
}

kvq_status KvquantStore::prepareTruncate(int64_t n) {
  cancelTruncate();
  if (!insideLastBatch(n))
    return KVQ_OK;
  const int64_t C = channels_, rowBytes = 2 * C;
  try {
    pending_.reserve(static_cast<size_t>(n - lastStart_));
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvquant cache: out of memory");
  }
  for (int64_t p = lastStart_; p < n; ++p) {
    const size_t at = static_cast<size_t>((p - lastStart_) * C);
    Blk k = payload_.allocate(rowBytes), v = payload_.allocate(rowBytes);
    if (!k || !v) {
      payload_.release(k);
      payload_.release(v);
      cancelTruncate();
      return allocationFailed("kvquant", rowBytes);
    }
    std::memcpy(k.p, lastK_.data() + at, static_cast<size_t>(rowBytes));
    std::memcpy(v.p, lastV_.data() + at, static_cast<size_t>(rowBytes));
    pending_.emplace_back(k, v);
  }
  return KVQ_OK;
}

void KvquantStore::cancelTruncate() {
  for (auto &e : pending_) {
    payload_.release(e.first);
    payload_.release(e.second);
  }
  pending_.clear();
}

void KvquantStore::copyHistory(const LayerStore &from) {
  const auto &o = static_cast<const KvquantStore &>(from);
  lastK_ = o.lastK_;
  lastV_ = o.lastV_;
  lastStart_ = o.lastStart_;
}

void KvquantStore::truncate(int64_t n) {
  for (size_t p = static_cast<size_t>(n); p < slots_.size(); ++p) {
    Slot &s = slots_[p];
    for (Blk *b : {&s.kf, &s.vf, &s.kq, &s.vq})
      payload_.release(*b);
  }
  slots_.resize(static_cast<size_t>(n));
  if (!pending_.empty()) { // undo the last refit batch (prepareTruncate)
    for (int64_t p = lastStart_; p < n; ++p) {
      Slot &s = slots_[static_cast<size_t>(p)];
      payload_.release(s.kq);
      payload_.release(s.vq);
      s.kOut = s.vOut = 0;
      s.kf = pending_[static_cast<size_t>(p - lastStart_)].first;
      s.vf = pending_[static_cast<size_t>(p - lastStart_)].second;
    }
    pending_.clear();
    payload_.release(segs_.back().table); // the batch's refit levels
    segs_.pop_back();
    quantizedUpTo_ = lastStart_;
  }
  if (n <= sinkCount()) { // only sinks (or nothing) left: no fit yet
    for (Segment &s : segs_)
      payload_.release(s.table);
    segs_.clear();
    seg0End_ = 0;
  }
  while (!segs_.empty() && segs_.back().start >= n) {
    payload_.release(segs_.back().table);
    segs_.pop_back();
  }
  quantizedUpTo_ = std::min(quantizedUpTo_, n);
  if (lastStart_ >= 0 && lastStart_ + cfg_.refit_interval != quantizedUpTo_)
    lastStart_ = -1; // that batch is gone (or undone)
}

/// The state as a section (layer_section.h).
void KvquantStore::save(ByteWriter &w) const {
  KvquantSection sec;
  sec.tokens = length();
  sec.sinks = sinkCount();
  sec.seg0End = seg0End_;
  sec.quantizedUpTo = quantizedUpTo_;
  for (const Segment &s : segs_)
    sec.tables.push_back(spanOf(s.table));
  for (const Slot &s : slots_)
    sec.rows.push_back({spanOf(s.kf), spanOf(s.vf), spanOf(s.kq), spanOf(s.vq),
                        s.kOut, s.vOut});
  writeSection(w, sec);
}

kvq_status KvquantStore::load(ByteReader &r) {
  KvquantSection sec;
  if (kvq_status s = readSection(r, cfg_, sec))
    return s;
  segs_.reserve(sec.tables.size());
  for (size_t j = 0; j < sec.tables.size(); ++j) {
    segs_.push_back(
        {kvquantSegmentStart(cfg_, sec, static_cast<int64_t>(j)), Blk()});
    if (kvq_status st =
            copyBlock(payload_, {sec.tables[j]}, segs_.back().table))
      return st;
  }
  slots_.resize(sec.rows.size());
  for (size_t p = 0; p < sec.rows.size(); ++p) {
    const KvquantSection::Row &row = sec.rows[p];
    Slot &s = slots_[p];
    s.sink = static_cast<int64_t>(p) < sec.sinks;
    for (auto [from, to] :
         {std::pair{&row.kf, &s.kf}, std::pair{&row.vf, &s.vf},
          std::pair{&row.kq, &s.kq}, std::pair{&row.vq, &s.vq}})
      if (*from)
        if (kvq_status st = copyBlock(payload_, {*from}, *to))
          return st;
    s.kOut = row.kOut;
    s.vOut = row.vOut;
  }
  quantizedUpTo_ = sec.quantizedUpTo;
  seg0End_ = sec.seg0End;
  lastStart_ = -1; // no rollback history in a saved cache
  return KVQ_OK;
}

} // namespace

std::unique_ptr<LayerStore> kvq::makeKvquantStore(const kvq_config &cfg,
                                                  Payload &payload) {
  return std::make_unique<KvquantStore>(cfg, payload);
}
