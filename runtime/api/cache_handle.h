//===- cache_handle.h - The CPU cache handle --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// struct kvq_cache, shared by the entry points of cache.cpp and the
// lifecycle of lifecycle.cpp: the configuration, the payload allocator and
// one store per layer, and the RoPE of a pre-RoPE key cache.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_API_CACHE_HANDLE_H
#define KVQ_RUNTIME_API_CACHE_HANDLE_H

#include "kvq/runtime.h"
#include "parallel.h"
#include "payload.h"
#include "rope.h"
#include "store.h"

#include <memory>
#include <optional>
#include <vector>

struct kvq_cache {
  explicit kvq_cache(const kvq_config &c)
      : cfg(c), payload(c.allocator), rope(c) {}
  ~kvq_cache() {
    for (auto &layer : layers)
      layer->releaseAll();
  }
  kvq_config cfg;
  kvq::Payload payload;
  kvq::Rope rope; ///< rotates keys of a pre-RoPE cache (disabled otherwise)
  std::vector<std::unique_ptr<kvq::LayerStore>> layers;
  /// The host's parallel-for of kvq_cache_set_parallel; unset: the process
  /// default (parallel.h).
  std::optional<kvq_parallel> parallel;
  int64_t channels() const { return int64_t{cfg.num_kv_heads} * cfg.head_dim; }
  /// The parallel-for this cache's work runs through.
  kvq_parallel lentParallel() const {
    return parallel ? *parallel : kvq::defaultParallel();
  }
  /// Appends n checked fp16 rows to a layer (cacheUpdate's last step).
  kvq_status append(int32_t layer, const uint16_t *k, const uint16_t *v,
                    int64_t n) {
    return layers[static_cast<size_t>(layer)]->update(k, v, n, lentParallel());
  }
};

namespace kvq {

/// A cache of empty layers for a validated cfg (may throw std::bad_alloc).
std::unique_ptr<kvq_cache> newCache(const kvq_config &cfg);

} // namespace kvq

#endif // KVQ_RUNTIME_API_CACHE_HANDLE_H
