//===- config.h - Configuration checks shared by the cache ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Limits of the storage formats, the validation used by create and the
// configuration of the flat (compiled-graph) constructors.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_CONFIG_H
#define KVQ_RUNTIME_COMMON_CONFIG_H

#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

static_assert(limits::kLayerTokens * kMaxChannels * 2 * 2 * limits::kLayers <
                  (int64_t{1} << 62),
              "tokens x channels x K,V x fp16 bytes x layers fits in int64");

/// Full validation; distinct status per problem, message via fail().
kvq_status validateConfig(const kvq_config &cfg);

/// The configuration the flat constructors of compiled graphs
/// (kvq_cache_create_flat, kvq_metal_cache_create_flat) receive field by
/// field; the allocator is malloc/free (a graph cannot pass one).
kvq_config flatConfig(int32_t method, int32_t keyBits, int32_t valueBits,
                      int32_t groupSize, int32_t residualLength,
                      int32_t residualMode, int32_t nSinkTokens,
                      float outlierFraction, int32_t lloydIters,
                      int32_t refitInterval, int32_t kvquantNSink,
                      int32_t kvquantGroupSize, int32_t numLayers,
                      int32_t numKvHeads, int32_t headDim, int32_t backend,
                      int32_t ropeStyle, float ropeTheta);

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_CONFIG_H
