//===- kivi_lifecycle.cpp - KIVI: truncate, fork, save, load --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle of a KIVI layer (docs/RUNTIME.md, "Cache
// lifecycle"): exact truncation through the rollback history, the
// history's copy on a fork, the saved section, and releasing it all.
//
//===----------------------------------------------------------------------===//
#include "kivi_plan.h"
#include "kivi_store.h"
#include "layer_section.h"
#include "serial.h"
#include "status.h"
#include "store_io.h"
#include "store_util.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

using namespace kvq;

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
