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

#include <cstdint>
#include <utility>
#include <vector>

namespace kvq {

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
