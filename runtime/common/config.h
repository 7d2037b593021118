//===- config.h - Configuration checks shared by the cache ------*- C++ -*-===//
//
// Limits of the storage formats, the validation used by create and the
// configuration of the flat (compiled-graph) constructors.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_CONFIG_H
#define KVQ_RUNTIME_COMMON_CONFIG_H

#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

/// The only accepted kvquant_group_size (see docs/RUNTIME.md).
constexpr int32_t kKvquantGroupSize = 32;

/// Outlier positions are stored as 16-bit channel indices within a token
/// row, which bounds the channels per layer.
constexpr int64_t kMaxChannels = 65535;

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
                      int32_t numKvHeads, int32_t headDim, int32_t backend);

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_CONFIG_H
