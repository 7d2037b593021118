//===- cache.cpp - The Metal KV cache: its C entry points -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_metal_cache_* entry points over a cache of per-layer objects
// (cache_layer.h): cache_uniform.cpp for fp16, kivi and kivi_sink,
// cache_kvquant.cpp for kvquant. The argument checks and the entry points
// that only do bookkeeping are the CPU cache's (checks/cache_entry.h), so
// both backends fail and count alike.
//
//===----------------------------------------------------------------------===//
#include "guard.h"
#include "kvq/runtime_metal.h"

#include "cache_entry.h"
#include "cache_layer.h"
#include "config.h"
#include "device_array.h"
#include "dispatch.h"
#include "layer_section.h"
#include "rope_table.h"
#include "saved_cache.h"
#include "serial.h"
#include "status.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <utility>
#include <vector>

using namespace kvq;
using namespace kvq::metal;

namespace {

/// Head dims the attention kernel handles (8 components per lane).
constexpr int32_t kMaxHeadDim = 256;

} // namespace

struct kvq_metal_cache {
  kvq_config cfg;
  std::vector<std::unique_ptr<CacheLayer>> layers;
  /// The low angle table of a pre-RoPE cache (null without a RoPE), shared
  /// by its layers and its forks.
  std::shared_ptr<const RopeLow> rope;
  /// Appends n checked fp16 rows to a layer (cacheUpdate's last step; the
  /// Metal host's fits stay on the calling thread).
  kvq_status append(int32_t layer, const uint16_t *k, const uint16_t *v,
                    int64_t n) {
    return layers[static_cast<size_t>(layer)]->update(k, v, n);
  }
};

namespace {

/// An empty layer of cfg's method.
std::unique_ptr<CacheLayer>
freshLayer(const kvq_config &cfg, Device &dev,
           const std::shared_ptr<const RopeLow> &rope) {
  if (cfg.method == KVQ_METHOD_KVQUANT)
    return makeKvquantLayer(cfg, dev, rope);
  return makeUniformLayer(cfg, dev, rope);
}

/// An empty Metal cache of cfg (validated by the CPU rules, backend METAL)
/// on the default context: KVQ_ERR_INVALID_ARGUMENT past the Metal limits.
kvq_status newCache(const char *entry, const kvq_config &cfg,
                    std::unique_ptr<kvq_metal_cache> &out) {
  if (cfg.head_dim > kMaxHeadDim)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: the Metal attention kernel supports head_dim <= %d, not "
                "%d",
                entry, kMaxHeadDim, cfg.head_dim);
  Device *dev = defaultDevice();
  if (!dev)
    return fail(KVQ_ERR_NULL_POINTER, "%s: no Metal device", entry);
  std::shared_ptr<const RopeLow> rope;
  if (kvq_status s = RopeLow::make(cfg, *dev, rope))
    return s;
  try {
    out.reset(new kvq_metal_cache{cfg, {}, rope});
    for (int32_t l = 0; l < cfg.num_layers; ++l)
      out->layers.push_back(freshLayer(cfg, *dev, rope));
  } catch (const std::bad_alloc &) {
    out.reset();
    return fail(KVQ_ERR_OUT_OF_MEMORY, "%s: out of memory", entry);
  }
  return KVQ_OK;
}

} // namespace

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_metal_cache_create_flat(
    KVQ_CONFIG_FIELDS(KVQ_CONFIG_PARAM) kvq_metal_cache_t **out) {
  return kvq::guarded("kvq_metal_cache_create_flat", [&]() -> kvq_status {
    if (!out)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_metal_cache_create_flat: out must be non-null");
    if (backend != KVQ_BACKEND_METAL)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "kvq_metal_cache_create_flat: backend %d is not "
                  "KVQ_BACKEND_METAL",
                  backend);
    // Validated by the CPU rules (which reject METAL), then marked Metal.
    kvq_config flat = flatConfigBase();
    KVQ_CONFIG_FIELDS(KVQ_SET_FLAT_FIELD)
    flat.backend = KVQ_BACKEND_CPU;
    if (kvq_status s = kvq_config_validate(&flat))
      return s;
    flat.backend = KVQ_BACKEND_METAL;
    std::unique_ptr<kvq_metal_cache> cache;
    if (kvq_status s = newCache("kvq_metal_cache_create_flat", flat, cache))
      return s;
    *out = cache.release();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT void kvq_metal_cache_destroy(kvq_metal_cache_t *cache) {
  delete cache;
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_update(kvq_metal_cache_t *cache,
                                                int32_t layer, const void *keys,
                                                const void *values,
                                                int64_t n_tokens,
                                                kvq_dtype dtype) {
  return kvq::guarded("kvq_metal_cache_update", [&]() -> kvq_status {
    return cacheUpdate("kvq_metal_cache_update", cache, layer, keys, values,
                       n_tokens, dtype);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_length(const kvq_metal_cache_t *cache,
                                                int32_t layer,
                                                int64_t *n_tokens) {
  return kvq::guarded("kvq_metal_cache_length", [&]() -> kvq_status {
    return cacheLength("kvq_metal_cache_length", cache, layer, n_tokens);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_fetch(const kvq_metal_cache_t *cache,
                                               int32_t layer, void *keys_out,
                                               void *values_out,
                                               int64_t capacity_tokens,
                                               kvq_dtype dtype) {
  return kvq::guarded("kvq_metal_cache_fetch", [&]() -> kvq_status {
    if (kvq_status s = checkCacheLayerArgs(
            "kvq_metal_cache_fetch", cache ? &cache->cfg : nullptr,
            keys_out && values_out, "cache, keys_out and values_out", layer))
      return s;
    const CacheLayer &l = *cache->layers[layer];
    if (kvq_status s =
            checkFetchArgs("kvq_metal_cache_fetch", keys_out, values_out,
                           capacity_tokens, dtype, l.length()))
      return s;
    // fp16 output past the fp16 range (a KIVI group spanning [-65504,
    // 65504], or a key rotated past it) is a status, as on the CPU: checked
    // on an f32 fetch first.
    if (dtype == KVQ_DTYPE_F16 &&
        (cache->cfg.method != KVQ_METHOD_FP16 ||
         cache->cfg.rope_style != KVQ_ROPE_NONE) &&
        l.length() > 0) {
      const size_t n = static_cast<size_t>(
          l.length() * int64_t{cache->cfg.num_kv_heads} * cache->cfg.head_dim);
      std::vector<float> k(n), v(n);
      if (kvq_status s = l.fetch(k.data(), v.data(), KVQ_DTYPE_F32))
        return s;
      for (size_t i = 0; i < n; ++i)
        if (!(std::fabs(k[i]) < 65520.0f && std::fabs(v[i]) < 65520.0f))
          return fail(KVQ_ERR_NON_FINITE,
                      "kvq_metal_cache_fetch: element %zu dequantizes "
                      "outside the fp16 range (use f32)",
                      i);
    }
    return l.fetch(keys_out, values_out, dtype);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_attend(const kvq_metal_cache_t *cache,
                                                int32_t layer,
                                                const float *queries,
                                                int64_t n_queries,
                                                int32_t q_heads, float *out) {
  return kvq::guarded("kvq_metal_cache_attend", [&]() -> kvq_status {
    if (kvq_status s = checkCacheLayerArgs(
            "kvq_metal_cache_attend", cache ? &cache->cfg : nullptr,
            queries && out, "cache, queries and out", layer))
      return s;
    const CacheLayer &l = *cache->layers[layer];
    if (kvq_status s = checkAttendArgs("kvq_metal_cache_attend", cache->cfg,
                                       queries, n_queries, q_heads, l.length()))
      return s;
    return l.attend(queries, n_queries, q_heads, out);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_stats(const kvq_metal_cache_t *cache,
                                               int32_t layer, kvq_stats *out) {
  return kvq::guarded("kvq_metal_cache_stats", [&]() -> kvq_status {
    return cacheStats("kvq_metal_cache_stats", cache, layer, out);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_truncate(kvq_metal_cache_t *cache,
                                                  int64_t n_tokens) {
  return kvq::guarded("kvq_metal_cache_truncate", [&]() -> kvq_status {
    if (!cache)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_metal_cache_truncate: cache is null");
    if (n_tokens < 0)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "kvq_metal_cache_truncate: n_tokens %lld < 0",
                  static_cast<long long>(n_tokens));
    auto &layers = cache->layers;
    if (n_tokens == 0) { // fresh layers, built before any is replaced
      Device *dev = defaultDevice();
      std::vector<std::unique_ptr<CacheLayer>> fresh;
      for (size_t l = 0; l < layers.size(); ++l)
        fresh.push_back(layers[l]->length() == 0
                            ? nullptr
                            : freshLayer(cache->cfg, *dev, cache->rope));
      for (size_t l = 0; l < layers.size(); ++l)
        if (fresh[l])
          layers[l] = std::move(fresh[l]);
      return KVQ_OK;
    }
    for (size_t l = 0; l < layers.size(); ++l)
      if (layers[l]->length() > n_tokens)
        if (kvq_status s = layers[l]->checkTruncate(n_tokens))
          return failInLayer(s, "kvq_metal_cache_truncate",
                             static_cast<int32_t>(l));
    for (auto &layer : layers)
      if (layer->length() > n_tokens)
        layer->truncate(n_tokens);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_fork(const kvq_metal_cache_t *cache,
                                              kvq_metal_cache_t **out) {
  return kvq::guarded("kvq_metal_cache_fork", [&]() -> kvq_status {
    if (!cache || !out)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_metal_cache_fork: cache and out must be non-null");
    std::unique_ptr<kvq_metal_cache> copy(
        new kvq_metal_cache{cache->cfg, {}, cache->rope});
    for (const auto &layer : cache->layers) {
      std::unique_ptr<CacheLayer> c = layer->clone();
      if (!c)
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "kvq_metal_cache_fork: device allocation failed");
      copy->layers.push_back(std::move(c));
    }
    *out = copy.release();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_save(const kvq_metal_cache_t *cache,
                                              void *buffer, int64_t capacity,
                                              int64_t *size) {
  return kvq::guarded("kvq_metal_cache_save", [&]() -> kvq_status {
    if (!cache)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_metal_cache_save: cache and size must be non-null");
    auto layer = [cache](int32_t l, ByteWriter &w) {
      cache->layers[static_cast<size_t>(l)]->save(w);
    };
    return saveSavedCache("kvq_metal_cache_save", cache->cfg, layer, buffer,
                          capacity, size);
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_load(const void *data, int64_t size,
                                              kvq_metal_cache_t **out) {
  return kvq::guarded("kvq_metal_cache_load", [&]() -> kvq_status {
    const char *entry = "kvq_metal_cache_load";
    if (kvq_status s = checkLoadArguments(entry, data, size, out))
      return s;
    std::unique_ptr<kvq_metal_cache> cache;
    auto create = [&](const kvq_config &saved) {
      kvq_config cfg = saved;
      cfg.backend = KVQ_BACKEND_METAL;
      return newCache(entry, cfg, cache);
    };
    auto layer = [&](int32_t l, ByteReader &r) {
      return cache->layers[static_cast<size_t>(l)]->load(r);
    };
    if (kvq_status s = readSavedCache(entry, static_cast<const uint8_t *>(data),
                                      size, create, layer))
      return s;
    *out = cache.release();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_cache_sink_positions(
    const kvq_metal_cache_t *cache, int32_t layer, int64_t *positions,
    int64_t capacity, int64_t *count) {
  return kvq::guarded("kvq_metal_cache_sink_positions", [&]() -> kvq_status {
    return cacheSinkPositions("kvq_metal_cache_sink_positions", cache, layer,
                              positions, capacity, count);
  });
}

} // extern "C"
