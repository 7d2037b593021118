//===- lifecycle.cpp - truncate, fork, save and load of a cache -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle beyond append (docs/RUNTIME.md, "Cache lifecycle" and
// "Saved cache format"). The stores decide whether a cut is exact and
// write/read their own state (layer_section.h); the framing (header,
// configuration, section sizes, checksum) is saved_cache.h's, shared with
// the Metal cache; this file makes every call all-or-nothing. A fork is a save
// into memory loaded back with the same allocator (so the two share no block),
// plus the stores' rollback history, which the saved format leaves out.
//
//===----------------------------------------------------------------------===//
#include "cache_handle.h"
#include "guard.h"
#include "kvq/runtime.h"
#include "saved_cache.h"
#include "serial.h"
#include "status.h"
#include "store.h"

#include <memory>
#include <new>
#include <vector>

using namespace kvq;

namespace {

/// Every layer's section, in layer order.
SaveLayerFn layersOf(const kvq_cache &cache) {
  return [&cache](int32_t l, ByteWriter &w) {
    cache.layers[static_cast<size_t>(l)]->save(w);
  };
}

/// kvq_cache_load's work, for load and fork.
kvq_status readCache(const char *entry, const uint8_t *data, int64_t size,
                     const kvq_allocator *allocator, kvq_cache_t **out) {
  if (allocator &&
      (allocator->alloc == nullptr) != (allocator->release == nullptr))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: allocator: set both alloc and release, or neither", entry);
  std::unique_ptr<kvq_cache> cache;
  auto create = [&](const kvq_config &saved) {
    kvq_config cfg = saved;
    cfg.allocator = allocator ? *allocator : kvq_allocator{};
    cache = newCache(cfg);
    return KVQ_OK;
  };
  auto loadLayer = [&](int32_t l, ByteReader &r) {
    return cache->layers[static_cast<size_t>(l)]->load(r);
  };
  if (kvq_status s = readSavedCache(entry, data, size, create, loadLayer))
    return s;
  *out = cache.release();
  return KVQ_OK;
}

} // namespace

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_cache_truncate(kvq_cache_t *cache,
                                            int64_t n_tokens) {
  return guarded("kvq_cache_truncate", [&]() -> kvq_status {
    if (!cache)
      return fail(KVQ_ERR_NULL_POINTER, "kvq_cache_truncate: cache is null");
    if (n_tokens < 0)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "kvq_cache_truncate: n_tokens %lld < 0",
                  static_cast<long long>(n_tokens));
    // Every layer is checked before any changes: all or nothing.
    for (size_t l = 0; l < cache->layers.size(); ++l)
      if (cache->layers[l]->length() > n_tokens)
        if (kvq_status s = cache->layers[l]->checkTruncate(n_tokens))
          return failInLayer(s, "kvq_cache_truncate", static_cast<int32_t>(l));
    auto &layers = cache->layers;
    for (size_t l = 0; l < layers.size(); ++l) {
      if (layers[l]->length() <= n_tokens)
        continue;
      if (kvq_status s = layers[l]->prepareTruncate(n_tokens)) {
        for (size_t m = 0; m < l; ++m)
          if (layers[m]->length() > n_tokens)
            layers[m]->cancelTruncate();
        return failInLayer(s, "kvq_cache_truncate", static_cast<int32_t>(l));
      }
    }
    for (auto &layer : layers)
      if (layer->length() > n_tokens)
        layer->truncate(n_tokens);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_fork(const kvq_cache_t *cache,
                                        kvq_cache_t **out) {
  return guarded("kvq_cache_fork", [&]() -> kvq_status {
    if (!cache || !out)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_cache_fork: cache and out must be non-null");
    std::vector<uint8_t> bytes(static_cast<size_t>(
        writeSavedCache(cache->cfg, layersOf(*cache), nullptr)));
    writeSavedCache(cache->cfg, layersOf(*cache), bytes.data());
    kvq_config cfg = cache->cfg;
    kvq_cache_t *raw = nullptr;
    if (kvq_status s =
            readCache("kvq_cache_fork", bytes.data(),
                      static_cast<int64_t>(bytes.size()), &cfg.allocator, &raw))
      return s;
    std::unique_ptr<kvq_cache> fork(raw); // freed if a copy below throws
    for (size_t l = 0; l < fork->layers.size(); ++l)
      fork->layers[l]->copyHistory(*cache->layers[l]);
    fork->parallel = cache->parallel; // the host's threads, not state
    *out = fork.release();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_save(const kvq_cache_t *cache, void *buffer,
                                        int64_t capacity, int64_t *size) {
  return guarded("kvq_cache_save", [&]() -> kvq_status {
    if (!cache)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_cache_save: cache and size must be non-null");
    return saveSavedCache("kvq_cache_save", cache->cfg, layersOf(*cache),
                          buffer, capacity, size);
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_load(const void *data, int64_t size,
                                        const kvq_allocator *allocator,
                                        kvq_cache_t **out) {
  return guarded("kvq_cache_load", [&]() -> kvq_status {
    if (kvq_status s = checkLoadArguments("kvq_cache_load", data, size, out))
      return s;
    return readCache("kvq_cache_load", static_cast<const uint8_t *>(data), size,
                     allocator, out);
  });
}

} // extern "C"
