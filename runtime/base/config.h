//===- config.h - Configuration checks shared by the cache ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Limits of the storage formats, the validation used by create and the
// configuration of the flat (compiled-graph) constructors.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_BASE_CONFIG_H
#define KVQ_RUNTIME_BASE_CONFIG_H

#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

static_assert(limits::kLayerTokens * kMaxChannels * 2 * 2 * limits::kLayers <
                  (int64_t{1} << 62),
              "tokens x channels x K,V x fp16 bytes x layers fits in int64");

/// Full validation; distinct status per problem, message via fail().
kvq_status validateConfig(const kvq_config &cfg);

/// The body of a flat constructor (kvq_cache_create_flat,
/// kvq_metal_cache_create_flat), whose parameters are kvq_config's fields
/// (kvq/config_fields.h): `KVQ_CONFIG_FIELDS(KVQ_SET_FLAT_FIELD)` copies
/// each into the kvq_config `flat` in scope. Start `flat` from
/// flatConfigBase(): a graph cannot pass an allocator.
#define KVQ_SET_FLAT_FIELD(type, name) flat.name = name;

/// A configuration with the malloc allocator, for a flat constructor to
/// fill (KVQ_SET_FLAT_FIELD).
kvq_config flatConfigBase();

} // namespace kvq

#endif // KVQ_RUNTIME_BASE_CONFIG_H
