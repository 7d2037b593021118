//===- cache.cpp - C entry points of the quantized KV cache ---------------===//
//
// create/destroy/update/fetch/length/stats/sink_positions/attend. This layer
// checks every argument, converts K/V input to fp16 (the stored precision)
// and turns allocation failures into KVQ_ERR_OUT_OF_MEMORY; the per-method
// stores do the rest (attention: attention.cpp over the stores' packed
// walks).
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "config.h"
#include "fp16.h"
#include "status.h"
#include "store.h"

#include <cmath>
#include <new>
#include <vector>

using namespace kvq;

struct kvq_cache {
  explicit kvq_cache(const kvq_config &c) : cfg(c), payload(c.allocator) {}
  ~kvq_cache() {
    for (auto &layer : layers)
      layer->releaseAll();
  }
  kvq_config cfg;
  Payload payload;
  std::vector<std::unique_ptr<LayerStore>> layers;
  int64_t channels() const { return int64_t{cfg.num_kv_heads} * cfg.head_dim; }
};

namespace {

kvq_status checkLayer(const kvq_cache *cache, int32_t layer) {
  if (layer < 0 || layer >= cache->cfg.num_layers)
    return fail(KVQ_ERR_LAYER_OUT_OF_RANGE,
                "layer %d is outside [0, %d)", layer, cache->cfg.num_layers);
  return KVQ_OK;
}

/// Convert n elements to fp16 bits; every one must be finite in fp16.
kvq_status toHalf(const void *src, kvq_dtype dtype, int64_t n,
                  std::vector<uint16_t> &dst, const char *what) {
  dst.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    if (dtype == KVQ_DTYPE_F16) {
      h = static_cast<const uint16_t *>(src)[i];
    } else {
      float v = static_cast<const float *>(src)[i];
      h = floatToHalf(v);
      if (std::isnan(v))
        h = 0x7e00u;
    }
    if (!halfIsFinite(h))
      return fail(KVQ_ERR_NON_FINITE,
                  "%s element %lld is NaN, infinite or outside the fp16 "
                  "range",
                  what, static_cast<long long>(i));
    dst[static_cast<size_t>(i)] = h;
  }
  return KVQ_OK;
}

void finishStats(kvq_stats &s, int64_t channels) {
  s.total_bytes = s.code_bytes + s.scale_zero_bytes + s.level_table_bytes +
                  s.outlier_bytes + s.sink_bytes + s.residual_bytes;
  int64_t elements = s.tokens * channels * 2;
  s.fp16_bytes = elements * 2;
  s.effective_bits =
      elements ? 8.0 * static_cast<double>(s.total_bytes) / elements : 0.0;
}

} // namespace

kvq_status kvq::cacheAttend(const kvq_cache_t *cache, int32_t layer,
                            const float *queries, int64_t n_queries,
                            int32_t q_heads, float *out, AttendImpl impl) {
  if (!cache || !queries || !out)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_attend: cache, queries and out must be non-null");
  if (kvq_status s = checkLayer(cache, layer))
    return s;
  const LayerStore &store = *cache->layers[layer];
  const int64_t length = store.length();
  const int32_t kvHeads = cache->cfg.num_kv_heads;
  const int64_t d = cache->cfg.head_dim;
  if (n_queries <= 0)
    return fail(n_queries == 0 ? KVQ_ERR_EMPTY_INPUT
                               : KVQ_ERR_INVALID_ARGUMENT,
                "kvq_cache_attend: n_queries = %lld",
                static_cast<long long>(n_queries));
  if (q_heads <= 0 || q_heads % kvHeads != 0)
    return fail(KVQ_ERR_SHAPE_MISMATCH,
                "q_heads %d is not a positive multiple of num_kv_heads %d",
                q_heads, kvHeads);
  if (n_queries > length)
    return fail(KVQ_ERR_SHAPE_MISMATCH,
                "%lld queries but only %lld cached tokens",
                static_cast<long long>(n_queries),
                static_cast<long long>(length));
  for (int64_t i = 0; i < n_queries * q_heads * d; ++i)
    if (!std::isfinite(queries[i]))
      return fail(KVQ_ERR_NON_FINITE, "query element %lld is not finite",
                  static_cast<long long>(i));
  try {
    if (impl == AttendImpl::Fused)
      attendFused(store, cache->cfg, queries, n_queries, q_heads, out);
    else
      attendReference(store, cache->cfg, queries, n_queries, q_heads, out);
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_attend: out of memory");
  }
  return KVQ_OK;
}

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_cache_create(const kvq_config *cfg,
                                          kvq_cache_t **out) {
  if (!cfg || !out)
    return fail(KVQ_ERR_NULL_POINTER, "kvq_cache_create: cfg and out must "
                                      "be non-null");
  if (kvq_status s = validateConfig(*cfg))
    return s;
  try {
    std::unique_ptr<kvq_cache> cache(new kvq_cache(*cfg));
    for (int32_t l = 0; l < cfg->num_layers; ++l) {
      switch (cfg->method) {
      case KVQ_METHOD_FP16:
        cache->layers.push_back(makeFp16Store(*cfg, cache->payload));
        break;
      case KVQ_METHOD_KIVI:
      case KVQ_METHOD_KIVI_SINK:
        cache->layers.push_back(makeKiviStore(*cfg, cache->payload));
        break;
      default:
        cache->layers.push_back(makeKvquantStore(*cfg, cache->payload));
        break;
      }
    }
    *out = cache.release();
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_create: out of memory");
  }
  return KVQ_OK;
}

KVQ_RT_EXPORT void kvq_cache_destroy(kvq_cache_t *cache) { delete cache; }

KVQ_RT_EXPORT kvq_status kvq_cache_update(kvq_cache_t *cache, int32_t layer,
                                          const void *keys,
                                          const void *values,
                                          int64_t n_tokens, kvq_dtype dtype) {
  if (!cache || !keys || !values)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_update: cache, keys and values must be non-null");
  if (kvq_status s = checkLayer(cache, layer))
    return s;
  if (n_tokens < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "n_tokens %lld < 0",
                static_cast<long long>(n_tokens));
  if (n_tokens == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "kvq_cache_update: zero tokens");
  if (dtype != KVQ_DTYPE_F16 && dtype != KVQ_DTYPE_F32)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown dtype %d",
                static_cast<int>(dtype));
  try {
    const int64_t n = n_tokens * cache->channels();
    std::vector<uint16_t> k, v;
    if (kvq_status s = toHalf(keys, dtype, n, k, "key"))
      return s;
    if (kvq_status s = toHalf(values, dtype, n, v, "value"))
      return s;
    return cache->layers[layer]->update(k.data(), v.data(), n_tokens);
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_update: out of memory");
  }
}

KVQ_RT_EXPORT kvq_status kvq_cache_length(const kvq_cache_t *cache,
                                          int32_t layer, int64_t *n_tokens) {
  if (!cache || !n_tokens)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_length: cache and n_tokens must be non-null");
  if (kvq_status s = checkLayer(cache, layer))
    return s;
  *n_tokens = cache->layers[layer]->length();
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_cache_fetch(const kvq_cache_t *cache,
                                         int32_t layer, void *keys_out,
                                         void *values_out,
                                         int64_t capacity_tokens,
                                         kvq_dtype dtype) {
  if (!cache || !keys_out || !values_out)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_fetch: cache, keys_out and values_out must be "
                "non-null");
  if (kvq_status s = checkLayer(cache, layer))
    return s;
  if (dtype != KVQ_DTYPE_F16 && dtype != KVQ_DTYPE_F32)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown dtype %d",
                static_cast<int>(dtype));
  const LayerStore &store = *cache->layers[layer];
  const int64_t length = store.length();
  if (capacity_tokens < length)
    return fail(KVQ_ERR_BUFFER_TOO_SMALL,
                "capacity %lld tokens < %lld cached",
                static_cast<long long>(capacity_tokens),
                static_cast<long long>(length));
  const int64_t c = cache->channels();
  try {
    std::vector<float> k(static_cast<size_t>(c)), v(static_cast<size_t>(c));
    for (int64_t t = 0; t < length; ++t) {
      store.loadRow(t, k.data(), v.data());
      for (int64_t i = 0; i < c; ++i) {
        storeElement(keys_out, dtype, t * c + i, k[i]);
        storeElement(values_out, dtype, t * c + i, v[i]);
      }
    }
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_cache_fetch: out of memory");
  }
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_cache_attend(const kvq_cache_t *cache,
                                          int32_t layer, const float *queries,
                                          int64_t n_queries, int32_t q_heads,
                                          float *out) {
  return cacheAttend(cache, layer, queries, n_queries, q_heads, out,
                     AttendImpl::Fused);
}

KVQ_RT_EXPORT kvq_status kvq_cache_stats(const kvq_cache_t *cache,
                                         int32_t layer, kvq_stats *out) {
  if (!cache || !out)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_stats: cache and out must be non-null");
  kvq_stats s = {};
  if (layer == -1) {
    for (const auto &l : cache->layers)
      l->addStats(s);
  } else {
    if (kvq_status st = checkLayer(cache, layer))
      return st;
    cache->layers[layer]->addStats(s);
  }
  finishStats(s, cache->channels());
  *out = s;
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_cache_sink_positions(const kvq_cache_t *cache,
                                                  int32_t layer,
                                                  int64_t *positions,
                                                  int64_t capacity,
                                                  int64_t *count) {
  if (!cache || !count || (!positions && capacity > 0))
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_cache_sink_positions: cache, count (and positions when "
                "capacity > 0) must be non-null");
  if (kvq_status s = checkLayer(cache, layer))
    return s;
  if (capacity < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "capacity %lld < 0",
                static_cast<long long>(capacity));
  try {
    std::vector<int64_t> sinks;
    cache->layers[layer]->sinkPositions(sinks);
    int64_t total = static_cast<int64_t>(sinks.size());
    for (int64_t i = 0; i < total && i < capacity; ++i)
      positions[i] = sinks[static_cast<size_t>(i)];
    *count = total;
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY,
                "kvq_cache_sink_positions: out of memory");
  }
  return KVQ_OK;
}

} // extern "C"
