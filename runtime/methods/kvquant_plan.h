//===- kvquant_plan.h - KVQuant update policy, as a planner -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What one kvq_cache_update does to a kvquant layer, decided from the
// layer's progress alone: which leading tokens stay fp16 sinks, which
// tokens are quantized now, in which batches, and whether a batch fits
// fresh key levels or uses the ones frozen at prefill. The CPU store
// (cpu/stores/kvquant/kvquant_update.cpp) and the Metal host
// (metal/host/cache_kvquant.cpp) both execute this plan, so a refit or
// sink rule is written here once.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METHODS_KVQUANT_PLAN_H
#define KVQ_RUNTIME_METHODS_KVQUANT_PLAN_H

#include "kvq/runtime.h"

#include <cstdint>
#include <vector>

namespace kvq {

/// Tokens [from, to) quantized together: with key levels fitted on
/// exactly those tokens (fresh), or with the prefill's frozen levels.
struct KvquantBatch {
  int64_t from = 0, to = 0;
  bool fresh = false;
};

struct KvquantPlan {
  int64_t sinks = 0;    ///< tokens [0, sinks) of this update stay fp16 sinks
  int64_t first = 0;    ///< tokens [first, quantEnd) are quantized now
  int64_t quantEnd = 0; ///< tokens from here on stay fp16 for now
  std::vector<KvquantBatch> batches; ///< cover [first, quantEnd), in order
  int64_t freshFits() const {
    int64_t f = 0;
    for (const KvquantBatch &b : batches)
      f += b.fresh;
    return f;
  }
};

/// The plan of appending n tokens to a layer of `length` tokens whose
/// tokens before quantizedUpTo are quantized (or sinks) and which holds
/// `segments` key-level fits. The first update with eligible tokens is the
/// prefill: its first kvquant_n_sink tokens become sinks and the rest are
/// fitted together. After it, refit_interval == 0 quantizes every new token
/// with the prefill's levels at once (the seed's frozen keys); otherwise
/// tokens wait fp16 until refit_interval of them accumulate, which are then
/// fitted as one batch.
KvquantPlan planKvquantUpdate(const kvq_config &c, int64_t length,
                              int64_t quantizedUpTo, int64_t segments,
                              int64_t n);

} // namespace kvq

#endif // KVQ_RUNTIME_METHODS_KVQUANT_PLAN_H
