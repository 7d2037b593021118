//===- cache_entry.h - What the two KV cache ABIs share ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The CPU cache (kvq_cache_*, cache.cpp) and the Metal cache
// (kvq_metal_cache_*, metal/host/cache.cpp) take the same arguments, check
// them in the same order and convert K/V input to fp16 the same way; only
// where the layers keep their payload differs. The checks and the entry
// points whose whole work is layer bookkeeping live here once, so the two
// ABIs cannot drift apart. Each function takes the name of the calling
// entry point, which its messages quote.
//
// The templates take any cache struct with a `kvq_config cfg` and a
// `layers` vector of (smart) pointers to objects with update, length,
// addStats and sinkPositions, as LayerStore and metal::CacheLayer have.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CHECKS_CACHE_ENTRY_H
#define KVQ_RUNTIME_CHECKS_CACHE_ENTRY_H

#include "checked.h"
#include "config.h"
#include "kvq/runtime.h"
#include "status.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <vector>

namespace kvq {

//===----------------------------------------------------------------------===//
// Argument checks
//===----------------------------------------------------------------------===//

/// The layer index in [0, cfg.num_layers).
kvq_status checkLayerIndex(const kvq_config &cfg, int32_t layer);

/// The prologue of every per-layer entry point: cfg (the cache's, null for
/// a null cache) and the other required pointers (`pointersOk`, spelled
/// `names` in the message) non-null, then the layer index in range.
kvq_status checkCacheLayerArgs(const char *entry, const kvq_config *cfg,
                               bool pointersOk, const char *names,
                               int32_t layer);

/// kvq_cache_update up to the fp16 conversion of the input.
kvq_status validateCacheUpdateArgs(const char *entry, const kvq_config *cfg,
                                   int32_t layer, const void *keys,
                                   const void *values, int64_t nTokens,
                                   kvq_dtype dtype);

/// kvq_cache_fetch: the checks after checkCacheLayerArgs, given the length
/// of the (validated) layer.
kvq_status checkFetchArgs(const char *entry, const void *keysOut,
                          const void *valuesOut, int64_t capacityTokens,
                          kvq_dtype dtype, int64_t length);

/// kvq_cache_attend: the checks after checkCacheLayerArgs, given the length
/// of the (validated) layer.
kvq_status checkAttendArgs(const char *entry, const kvq_config &cfg,
                           const float *queries, int64_t nQueries,
                           int32_t qHeads, int64_t length);

//===----------------------------------------------------------------------===//
// Shared work
//===----------------------------------------------------------------------===//

/// The K and V input of one update as fp16 rows: the caller's buffers
/// themselves when they are fp16 (nothing copied), else converted from f32
/// into a per-thread buffer (or `owned`, for an update too large to keep).
struct HalfKV {
  const uint16_t *k = nullptr, *v = nullptr;
  std::unique_ptr<uint16_t[]> owned;
};

/// Check that the n elements of keys, then of values, are finite in fp16
/// and fill `out` (the message names the entry, the layer and the tensor).
kvq_status halfKV(const char *entry, int32_t layer, const void *keys,
                  const void *values, kvq_dtype dtype, int64_t n,
                  HalfKV &out);

/// Fill the fields the layers leave out: total_bytes, fp16_bytes and
/// effective_bits.
void finishStats(kvq_stats &s, int64_t channels);

/// kvq_cache_update: check, convert K and V to fp16, append to the layer.
/// Allocation failures before the layer's commit point leave it unchanged.
template <class Cache>
kvq_status cacheUpdate(const char *entry, Cache *cache, int32_t layer,
                       const void *keys, const void *values, int64_t nTokens,
                       kvq_dtype dtype) {
  if (kvq_status s =
          validateCacheUpdateArgs(entry, cache ? &cache->cfg : nullptr, layer,
                                  keys, values, nTokens, dtype))
    return s;
  // Bounded before any size is formed: the layer's length stays within
  // limits::kLayerTokens, so n below (and every size the store derives)
  // fits int64 by config.h's static_asserts; the checked product is the
  // proof at the boundary.
  const int64_t length = cache->layers[layer]->length();
  int64_t n = 0;
  if (nTokens > limits::kLayerTokens - length ||
      !checkedProduct({nTokens, cache->cfg.num_kv_heads, cache->cfg.head_dim},
                      kMaxBufferBytes / 4, &n))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: n_tokens %lld would bring layer %d from %lld to more "
                "than %lld tokens",
                entry, static_cast<long long>(nTokens), layer,
                static_cast<long long>(length),
                static_cast<long long>(limits::kLayerTokens));
  try {
    HalfKV in;
    if (kvq_status s = halfKV(entry, layer, keys, values, dtype, n, in))
      return s;
    return cache->append(layer, in.k, in.v, nTokens);
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "%s: out of memory", entry);
  }
}

/// kvq_cache_length.
template <class Cache>
kvq_status cacheLength(const char *entry, const Cache *cache, int32_t layer,
                       int64_t *nTokens) {
  if (kvq_status s = checkCacheLayerArgs(entry, cache ? &cache->cfg : nullptr,
                                         nTokens, "cache and n_tokens", layer))
    return s;
  *nTokens = cache->layers[layer]->length();
  return KVQ_OK;
}

/// kvq_cache_stats: one layer, or all of them for layer == -1.
template <class Cache>
kvq_status cacheStats(const char *entry, const Cache *cache, int32_t layer,
                      kvq_stats *out) {
  if (!cache || !out)
    return fail(KVQ_ERR_NULL_POINTER, "%s: cache and out must be non-null",
                entry);
  kvq_stats s = {};
  if (layer == -1) {
    for (const auto &l : cache->layers)
      l->addStats(s);
  } else {
    if (kvq_status st = checkLayerIndex(cache->cfg, layer))
      return st;
    cache->layers[layer]->addStats(s);
  }
  finishStats(s, int64_t{cache->cfg.num_kv_heads} * cache->cfg.head_dim);
  *out = s;
  return KVQ_OK;
}

/// kvq_cache_sink_positions: the first `capacity` positions, and the count.
template <class Cache>
kvq_status cacheSinkPositions(const char *entry, const Cache *cache,
                              int32_t layer, int64_t *positions,
                              int64_t capacity, int64_t *count) {
  if (kvq_status s = checkCacheLayerArgs(
          entry, cache ? &cache->cfg : nullptr,
          count && (positions || capacity <= 0),
          "cache, count (and positions when capacity > 0)", layer))
    return s;
  if (capacity < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "capacity %lld < 0",
                static_cast<long long>(capacity));
  try {
    std::vector<int64_t> sinks;
    cache->layers[layer]->sinkPositions(sinks);
    const int64_t total = static_cast<int64_t>(sinks.size());
    for (int64_t i = 0; i < total && i < capacity; ++i)
      positions[i] = sinks[static_cast<size_t>(i)];
    *count = total;
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "%s: out of memory", entry);
  }
  return KVQ_OK;
}

} // namespace kvq

#endif // KVQ_RUNTIME_CHECKS_CACHE_ENTRY_H
