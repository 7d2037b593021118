//===- method_rules.h - Method rules shared by the CPU and Metal caches ---===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Decisions of a method that both backends' caches make on the same state,
// written once so the CPU store and the Metal host cannot drift apart
// (issue 14 plans full update planners in this place).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_METHOD_RULES_H
#define KVQ_RUNTIME_COMMON_METHOD_RULES_H

#include "kvq/runtime.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

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

/// kivi_sink's truncation rule, shared by the CPU and Metal caches: once
/// the running top-k of key norms is full (k entries), an entry at a
/// dropped position (>= n) means the top-k over the kept tokens is not
/// known, so the cut cannot be exact. Returns that position, or -1.
inline int64_t
droppedTopKPosition(const std::vector<std::pair<float, int64_t>> &top,
                    int64_t k, int64_t n) {
  if (static_cast<int64_t>(top.size()) != k)
    return -1;
  for (const auto &e : top)
    if (e.second >= n)
      return e.second;
  return -1;
}

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_METHOD_RULES_H
