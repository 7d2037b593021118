//===- kvquant_update.cpp - KVQuant: update, row decode, byte counts ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The update executes the plan of kvquant_plan.h (the policy the Metal
// host shares) on the payload: key segments fit on a batch, key and value
// rows coded with their outliers, all inside one transaction. loadRow
// decodes what it wrote.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "kernels.h"
#include "kvquant_plan.h"
#include "kvquant_store.h"
#include "parallel.h"
#include "status.h"
#include "store_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

using namespace kvq;

namespace {

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

} // namespace

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
  NuqQuantArgs q;
  q.x = x;
  q.dtype = KVQ_DTYPE_F32;
  q.grid.rows = 1;
  q.grid.cols = C;
  q.grid.group = cfg_.head_dim;
  q.grid.axis = KVQ_AXIS_PER_TOKEN;
  q.bits = vb_;
  q.levels = table.data();
  q.layout = KVQ_CODES_PACKED;
  q.codes = out + valueRow_.codesOffset();
  kernels().nuqQuant(q);
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
      NuqQuantArgs q;
      q.x = x.data();
      q.dtype = KVQ_DTYPE_F32;
      q.grid = Grid::columns(rows, C);
      q.bits = kb_;
      q.levels = reinterpret_cast<const uint16_t *>(table);
      q.layout = KVQ_CODES_UNPACKED;
      q.codes = codes.data();
      kernels().nuqQuant(q);
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

std::unique_ptr<LayerStore> kvq::makeKvquantStore(const kvq_config &cfg,
                                                  Payload &payload) {
  return std::make_unique<KvquantStore>(cfg, payload);
}
