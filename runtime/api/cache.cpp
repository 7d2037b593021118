//===- cache.cpp - C entry points of the quantized KV cache ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// create/destroy/update/fetch/length/stats/sink_positions/attend. This layer
// checks every argument, converts K/V input to fp16 (the stored precision)
// and turns allocation failures into KVQ_ERR_OUT_OF_MEMORY, through
// cache_entry.h, which the Metal cache shares; the per-method stores do the
// rest (attention: attention.cpp over the stores' packed walks).
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "cache_entry.h"
#include "cache_handle.h"
#include "config.h"
#include "fp16.h"
#include "guard.h"
#include "parallel.h"
#include "rope.h"
#include "status.h"
#include "store.h"

#include <cmath>
#include <new>
#include <vector>

using namespace kvq;

std::unique_ptr<kvq_cache> kvq::newCache(const kvq_config &cfg) {
  std::unique_ptr<kvq_cache> cache(new kvq_cache(cfg));
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    switch (cfg.method) {
    case KVQ_METHOD_FP16:
      cache->layers.push_back(makeFp16Store(cfg, cache->payload));
      break;
    case KVQ_METHOD_KIVI:
    case KVQ_METHOD_KIVI_SINK:
      cache->layers.push_back(makeKiviStore(cfg, cache->payload));
      break;
    default:
      cache->layers.push_back(makeKvquantStore(cfg, cache->payload));
      break;
    }
  }
  return cache;
}

kvq_status kvq::cacheAttend(const kvq_cache_t *cache, int32_t layer,
                            const float *queries, int64_t n_queries,
                            int32_t q_heads, float *out, AttendImpl impl) {
  if (kvq_status s =
          checkCacheLayerArgs("kvq_cache_attend", cache ? &cache->cfg : nullptr,
                              queries && out, "cache, queries and out", layer))
    return s;
  const LayerStore &store = *cache->layers[layer];
  if (kvq_status s = checkAttendArgs("kvq_cache_attend", cache->cfg, queries,
                                     n_queries, q_heads, store.length()))
    return s;
  // The rows of the RoPE's angles this layer's positions need, once per
  // cache rather than per call (Rope::cover).
  cache->rope.cover(store.length());
  try {
    if (impl == AttendImpl::Fused)
      attendFused(store, cache->cfg, cache->rope, cache->lentParallel(),
                  queries, n_queries, q_heads, out);
    else
      attendReference(store, cache->cfg, cache->rope, queries, n_queries,
                      q_heads, out);
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_attend: out of memory");
  }
  return KVQ_OK;
}

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_cache_create(const kvq_config *cfg,
                                          kvq_cache_t **out) {
  return kvq::guarded("kvq_cache_create", [&]() -> kvq_status {
    if (!cfg || !out)
      return fail(KVQ_ERR_NULL_POINTER, "kvq_cache_create: cfg and out must "
                                        "be non-null");
    if (kvq_status s = validateConfig(*cfg))
      return s;
    try {
      std::unique_ptr<kvq_cache> cache = newCache(*cfg);
      *out = cache.release();
    } catch (const std::bad_alloc &) {
      return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_create: out of memory");
    }
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT void kvq_cache_destroy(kvq_cache_t *cache) { delete cache; }

KVQ_RT_EXPORT kvq_status kvq_cache_update(kvq_cache_t *cache, int32_t layer,
                                          const void *keys, const void *values,
                                          int64_t n_tokens, kvq_dtype dtype) {
  return kvq::guarded("kvq_cache_update", [&]() -> kvq_status {
    return cacheUpdate("kvq_cache_update", cache, layer, keys, values, n_tokens,
                       dtype);
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_length(const kvq_cache_t *cache,
                                          int32_t layer, int64_t *n_tokens) {
  return kvq::guarded("kvq_cache_length", [&]() -> kvq_status {
    return cacheLength("kvq_cache_length", cache, layer, n_tokens);
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_fetch(const kvq_cache_t *cache,
                                         int32_t layer, void *keys_out,
                                         void *values_out,
                                         int64_t capacity_tokens,
                                         kvq_dtype dtype) {
  return kvq::guarded("kvq_cache_fetch", [&]() -> kvq_status {
    if (kvq_status s = checkCacheLayerArgs(
            "kvq_cache_fetch", cache ? &cache->cfg : nullptr,
            keys_out && values_out, "cache, keys_out and values_out", layer))
      return s;
    const LayerStore &store = *cache->layers[layer];
    const int64_t length = store.length();
    if (kvq_status s = checkFetchArgs("kvq_cache_fetch", keys_out, values_out,
                                      capacity_tokens, dtype, length))
      return s;
    const int64_t c = cache->channels();
    const Rope &rope = cache->rope;
    try {
      std::vector<float> k(static_cast<size_t>(c)), v(static_cast<size_t>(c));
      Rope::Cursor cursor;
      // A pre-RoPE cache returns its keys rotated (as the model uses them).
      auto load = [&](int64_t t) {
        store.loadRow(t, k.data(), v.data());
        if (rope.enabled())
          rope.rotateAt(k.data(), cache->cfg.num_kv_heads, t, cursor);
      };
      // fp16 output: a KIVI code * scale + zero can round past 65504 (a
      // group spanning [-65504, 65504]); checked before the first write so
      // that no Inf is returned with KVQ_OK and a failure writes nothing.
      if (dtype == KVQ_DTYPE_F16 &&
          (cache->cfg.method != KVQ_METHOD_FP16 || rope.enabled()))
        for (int64_t t = 0; t < length; ++t) {
          load(t);
          for (int64_t i = 0; i < c; ++i)
            if (!(std::fabs(k[i]) < 65520.0f && std::fabs(v[i]) < 65520.0f))
              return fail(KVQ_ERR_NON_FINITE,
                          "kvq_cache_fetch: token %lld channel %lld "
                          "dequantizes outside the fp16 range (use f32)",
                          static_cast<long long>(t), static_cast<long long>(i));
        }
      for (int64_t t = 0; t < length; ++t) {
        load(t);
        for (int64_t i = 0; i < c; ++i) {
          storeElement(keys_out, dtype, t * c + i, k[i]);
          storeElement(values_out, dtype, t * c + i, v[i]);
        }
      }
    } catch (const std::bad_alloc &) {
      return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_fetch: out of memory");
    }
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_attend(const kvq_cache_t *cache,
                                          int32_t layer, const float *queries,
                                          int64_t n_queries, int32_t q_heads,
                                          float *out) {
  return kvq::guarded("kvq_cache_attend", [&]() -> kvq_status {
    return cacheAttend(cache, layer, queries, n_queries, q_heads, out,
                       AttendImpl::Fused);
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_set_parallel(kvq_cache_t *cache,
                                                const kvq_parallel *p) {
  return kvq::guarded("kvq_cache_set_parallel", [&]() -> kvq_status {
    if (!cache)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_cache_set_parallel: cache must be non-null");
    if (kvq_status s = checkParallel("kvq_cache_set_parallel", p))
      return s;
    if (p)
      cache->parallel = *p;
    else
      cache->parallel.reset();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_set_default_parallel(const kvq_parallel *p) {
  return kvq::guarded("kvq_set_default_parallel", [&]() -> kvq_status {
    if (kvq_status s = checkParallel("kvq_set_default_parallel", p))
      return s;
    setDefaultParallel(p ? *p : kvq_parallel{});
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_stats(const kvq_cache_t *cache,
                                         int32_t layer, kvq_stats *out) {
  return kvq::guarded("kvq_cache_stats", [&]() -> kvq_status {
    return cacheStats("kvq_cache_stats", cache, layer, out);
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_sink_positions(const kvq_cache_t *cache,
                                                  int32_t layer,
                                                  int64_t *positions,
                                                  int64_t capacity,
                                                  int64_t *count) {
  return kvq::guarded("kvq_cache_sink_positions", [&]() -> kvq_status {
    return cacheSinkPositions("kvq_cache_sink_positions", cache, layer,
                              positions, capacity, count);
  });
}

} // extern "C"
