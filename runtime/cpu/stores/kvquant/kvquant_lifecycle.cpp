//===- kvquant_lifecycle.cpp - KVQuant: truncate, fork, save, load --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle of a KVQuant layer (docs/RUNTIME.md, "Cache
// lifecycle"): exact truncation (the last refit batch through its
// rollback history), the history's copy on a fork, the saved section, and
// releasing it all.
//
//===----------------------------------------------------------------------===//
#include "kvquant_plan.h"
#include "kvquant_store.h"
#include "layer_section.h"
#include "serial.h"
#include "status.h"
#include "store_io.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

using namespace kvq;

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
