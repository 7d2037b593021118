//===- kivi_plan.h - KIVI / KIVI-Sink update policy, as a planner -*- C++ -*-=//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What one kvq_cache_update does to a kivi or kivi_sink layer, decided by a
// pure function of the layer's progress, its running top-k of key norms and
// the incoming tokens' key norms: which keys fold into groups, which values
// are quantized, which tokens become fp16 sinks. The CPU store
// (cpu/stores/kivi/kivi_update.cpp) and the Metal host
// (metal/host/cache_uniform.cpp) both execute this plan and differ only in
// where they put the bytes, so a change to a window or sink rule is made here
// once.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METHODS_KIVI_PLAN_H
#define KVQ_RUNTIME_METHODS_KIVI_PLAN_H

#include "kvq/runtime.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

/// Running top-k of key norms: (norm, position), unordered.
using KiviTopK = std::vector<std::pair<float, int64_t>>;

/// How far a layer has got; the planner reads nothing else of it.
struct KiviProgress {
  int64_t length = 0;    ///< tokens held
  int64_t keyDone = 0;   ///< keys of [0, keyDone) are in groups (or sinks)
  int64_t valueDone = 0; ///< values of [0, valueDone) quantized (or sinks)
  int64_t decided = 0;   ///< sink decision made for [0, decided)
  int64_t sinks = 0;     ///< sinks chosen so far
};

/// The update of n tokens [length, length + n).
struct KiviPlan {
  int64_t keyTo = 0;     ///< keys of [keyDone, keyTo) fold, G at a time
  int64_t valueTo = 0;   ///< values of [valueDone, valueTo) are quantized
  int64_t decidedTo = 0; ///< sink decision made now for [decided, decidedTo)
  int64_t sinks = 0;     ///< sinks after the update
  KiviTopK top;          ///< running top-k after the update
  /// 1 where a position of [decided, decidedTo) becomes a sink.
  std::vector<uint8_t> newSink;
  int64_t decidedFrom = 0;

  /// Whether position p, not decided before this update, is a sink.
  bool becomesSink(int64_t p) const {
    return p >= decidedFrom && p < decidedTo &&
           newSink[static_cast<size_t>(p - decidedFrom)] != 0;
  }
};

/// Sink budget of a configuration (0 for plain KIVI).
inline int64_t kiviSinkBudget(const kvq_config &c) {
  return c.method == KVQ_METHOD_KIVI_SINK ? c.n_sink_tokens : 0;
}

/// KIVI's window (kivi, kivi_sink): the keys of positions [0, target) are
/// quantized once a layer holds L tokens. Block mode (KIVI's official code)
/// flushes R keys whenever R accumulate; sliding mode leaves the window in
/// whole groups of G.
inline int64_t kiviKeyTarget(const kvq_config &c, int64_t L) {
  const int64_t G = c.group_size, R = c.residual_length;
  if (c.residual_mode == KVQ_RESIDUAL_BLOCK)
    return R * (L / R);
  return L > R ? G * ((L - R) / G) : 0;
}

/// The values of positions [0, target) are quantized (token by token) once
/// a layer holds L tokens.
inline int64_t kiviValueTarget(const kvq_config &c, int64_t L) {
  return L > c.residual_length ? L - c.residual_length : 0;
}

/// kivi_sink's truncation rule: once the running top-k of key norms is full
/// (k entries), an entry at a dropped position (>= n) means the top-k over
/// the kept tokens is not known, so the cut cannot be exact. Returns that
/// position, or -1.
inline int64_t droppedTopKPosition(const KiviTopK &top, int64_t k, int64_t n) {
  if (static_cast<int64_t>(top.size()) != k)
    return -1;
  for (const auto &e : top)
    if (e.second >= n)
      return e.second;
  return -1;
}

/// Fold a token's key norm into the running top-k of budget k: the weakest
/// entry is the lowest norm, among equal norms the latest position, and an
/// equal norm never displaces it (ties go to the earlier position).
void kiviFoldTopK(KiviTopK &top, int64_t k, float norm, int64_t pos);

/// The plan of appending n tokens whose key norms are norms[0 .. n) (read
/// only when the configuration has a sink budget). A token becomes a sink
/// when it leaves the fp16 window for the first time (its key or its value
/// is about to be quantized) while it is in the top-k of every key norm
/// seen so far, the new tokens included, and the budget is not spent.
KiviPlan planKiviUpdate(const kvq_config &c, const KiviProgress &now,
                        const KiviTopK &top, const float *norms, int64_t n);

} // namespace kvq

#endif // KVQ_RUNTIME_METHODS_KIVI_PLAN_H
