//===- kvquant_plan.cpp - KVQuant update policy ---------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "kvquant_plan.h"

#include <algorithm>

kvq::KvquantPlan kvq::planKvquantUpdate(const kvq_config &c, int64_t length,
                                        int64_t quantizedUpTo, int64_t segments,
                                        int64_t n) {
  const int64_t L1 = length + n;
  KvquantPlan plan;
  plan.sinks =
      length == 0 ? std::min<int64_t>(c.kvquant_n_sink, n) : int64_t{0};
  plan.first = length == 0 ? plan.sinks : quantizedUpTo;
  plan.quantEnd = plan.first;
  if (segments == 0) { // the prefill: the first eligible tokens, one fit
    if (L1 > plan.first)
      plan.batches.push_back({plan.first, L1, true});
    plan.quantEnd = L1;
  } else if (c.refit_interval == 0) { // frozen levels: quantize at once
    if (L1 > plan.first)
      plan.batches.push_back({plan.first, L1, false});
    plan.quantEnd = L1;
  } else {
    const int64_t every = c.refit_interval;
    while (L1 - plan.quantEnd >= every) {
      plan.batches.push_back({plan.quantEnd, plan.quantEnd + every, true});
      plan.quantEnd += every;
    }
  }
  return plan;
}
