//===- config.h - Configuration checks shared by the cache ------*- C++ -*-===//
//
// Limits of the storage formats and the validation used by create.
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

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_CONFIG_H
