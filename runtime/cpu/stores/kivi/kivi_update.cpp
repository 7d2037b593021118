//===- kivi_update.cpp - KIVI: update, row decode, byte counts ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The update executes the plan of kivi_plan.h (the policy the Metal host
// shares) on the payload: fp16 window rows, value blocks, key groups, all
// inside one transaction. loadRow decodes what it wrote.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "kernels.h"
#include "kivi_plan.h"
#include "kivi_store.h"
#include "status.h"
#include "store_util.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace kvq;

void KiviStore::quantizeValue(const uint16_t *row, uint8_t *out) const {
  const int64_t groups = channels_ / G_;
  std::vector<uint16_t> scales(static_cast<size_t>(2 * groups));
  uint16_t *zeros = scales.data() + groups;
  // One kvq_group_quant call of the kernel table on the fp16 row (per-token
  // groups of G), the codes packed straight into the block.
  const UniformBlock<uint8_t> blk{out, groups};
  GroupQuantArgs q;
  q.x = row;
  q.dtype = KVQ_DTYPE_F16;
  q.grid.rows = 1;
  q.grid.cols = channels_;
  q.grid.group = G_;
  q.grid.axis = KVQ_AXIS_PER_TOKEN;
  q.bits = vb_;
  q.layout = KVQ_CODES_PACKED;
  q.codes = blk.codes();
  q.scale = scales.data();
  q.zero = zeros;
  kernels().groupQuant(q);
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
  uint8_t *codes =
      threadScratch<uint8_t, CodesTag>(static_cast<size_t>(G_ * C));
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
  GroupQuantArgs q;
  q.x = x;
  q.dtype = KVQ_DTYPE_F16;
  q.grid = Grid::columns(G_, C);
  q.bits = kb_;
  q.exclude = exclude.empty() ? nullptr : exclude.data();
  q.layout = KVQ_CODES_UNPACKED;
  q.codes = codes;
  q.scale = scales.data();
  q.zero = zeros;
  kernels().groupQuant(q);
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

std::unique_ptr<LayerStore> kvq::makeKiviStore(const kvq_config &cfg,
                                               Payload &payload) {
  return std::make_unique<KiviStore>(cfg, payload);
}
