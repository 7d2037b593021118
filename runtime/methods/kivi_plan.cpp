//===- kivi_plan.cpp - KIVI / KIVI-Sink update policy ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "kivi_plan.h"

#include <algorithm>

void kvq::kiviFoldTopK(KiviTopK &top, int64_t k, float norm, int64_t pos) {
  if (static_cast<int64_t>(top.size()) < k) {
    top.emplace_back(norm, pos);
    return;
  }
  if (top.empty())
    return;
  size_t weakest = 0;
  for (size_t i = 1; i < top.size(); ++i)
    if (top[i].first < top[weakest].first ||
        (top[i].first == top[weakest].first &&
         top[i].second > top[weakest].second))
      weakest = i;
  if (norm > top[weakest].first) // equal: the earlier position stays
    top[weakest] = {norm, pos};
}

kvq::KiviPlan kvq::planKiviUpdate(const kvq_config &c, const KiviProgress &now,
                                  const KiviTopK &top, const float *norms,
                                  int64_t n) {
  const int64_t k = kiviSinkBudget(c), L1 = now.length + n;
  KiviPlan plan;
  plan.top = top;
  if (k > 0)
    for (int64_t p = now.length; p < L1; ++p)
      kiviFoldTopK(plan.top, k, norms[p - now.length], p);

  // Keys leave by group or block, values token by token; a position's
  // protection is decided the first time either of them leaves.
  plan.keyTo = std::max(now.keyDone, kiviKeyTarget(c, L1));
  plan.valueTo = std::max(now.valueDone, kiviValueTarget(c, L1));
  plan.decidedFrom = now.decided;
  plan.decidedTo = std::max(std::max(plan.keyTo, plan.valueTo), now.decided);
  plan.newSink.assign(static_cast<size_t>(plan.decidedTo - now.decided), 0);
  plan.sinks = now.sinks;
  for (int64_t p = now.decided; p < plan.decidedTo && plan.sinks < k; ++p)
    if (std::any_of(plan.top.begin(), plan.top.end(),
                    [&](const auto &e) { return e.second == p; })) {
      plan.newSink[static_cast<size_t>(p - now.decided)] = 1;
      ++plan.sinks;
    }
  return plan;
}
