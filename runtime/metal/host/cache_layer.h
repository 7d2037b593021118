//===- cache_layer.h - One layer of a Metal KV cache ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The kvq_metal_cache_* entry points (cache.cpp) check their arguments and
// hand each layer's work to a CacheLayer: the uniform-quantization layer
// of cache.cpp (fp16, kivi, kivi_sink) or the KVQuant layer of
// cache_kvquant.cpp. Each keeps its payload in device buffers and its
// bookkeeping on the host, mirroring the CPU store of its method.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_CACHE_LAYER_H
#define KVQ_RUNTIME_METAL_HOST_CACHE_LAYER_H

#include "device.h"
#include "kvq/runtime.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kvq {
class ByteReader;
class ByteWriter;
} // namespace kvq

namespace kvq::metal {

class CacheLayer {
public:
  virtual ~CacheLayer() = default;
  /// Append n tokens of fp16 K and V rows ([n, C] each, checked finite by
  /// the caller). All or nothing: a failure leaves the layer unchanged.
  virtual kvq_status update(const uint16_t *k, const uint16_t *v,
                            int64_t n) = 0;
  virtual int64_t length() const = 0;
  /// Every cached token's K and V as dtype ([length, C] each).
  virtual kvq_status fetch(void *kout, void *vout, kvq_dtype dtype) const = 0;
  /// Causal attention of nq queries (the last nq positions), qHeads heads.
  virtual kvq_status attend(const float *q, int64_t nq, int32_t qHeads,
                            float *out) const = 0;
  /// Add this layer's counts and bytes (not the derived fields).
  virtual void addStats(kvq_stats &s) const = 0;
  virtual void sinkPositions(std::vector<int64_t> &out) const = 0;

  // Lifecycle (kvq_metal_cache_truncate / _fork). A cut to 0 tokens is a
  // fresh layer (cache.cpp); the layers themselves take only cuts that
  // drop tokens held fp16 and change no kept token (no rollback history),
  // a subset of the CPU stores' exact cuts, with the same result.

  /// KVQ_OK when keeping the first n tokens (0 < n < length()) is such a
  /// cut, else KVQ_ERR_NOT_EXACT with a message.
  virtual kvq_status checkTruncate(int64_t n) const = 0;
  /// Keep the first n tokens, after checkTruncate(n): cannot fail.
  virtual void truncate(int64_t n) = 0;
  /// A deep copy with its own device buffers; null when the device is out
  /// of memory. May throw std::bad_alloc.
  virtual std::unique_ptr<CacheLayer> clone() const = 0;

  // Save and load (kvq_metal_cache_save / _load): the CPU cache's layer
  // sections (layout/layer_section.h), so the files of both backends are
  // interchangeable.

  /// Append this layer's section: the bytes a CPU cache that received the
  /// same updates writes for its layer. May throw std::bad_alloc.
  virtual void save(ByteWriter &w) const = 0;
  /// Become the layer a section describes (called on a fresh layer, which
  /// is discarded on failure): the section reader's KVQ_ERR_CORRUPT_DATA,
  /// KVQ_ERR_OUT_OF_MEMORY, or KVQ_ERR_INVALID_ARGUMENT when the layer
  /// exceeds a limit of the device arrays (4 GiB code arenas).
  virtual kvq_status load(ByteReader &r) = 0;
};

/// out = the positions p with flags[p] != 0, ascending (sinkPositions of
/// layers that keep one sink flag per token).
inline void flaggedPositions(const std::vector<uint8_t> &flags,
                             std::vector<int64_t> &out) {
  out.clear();
  for (size_t p = 0; p < flags.size(); ++p)
    if (flags[p])
      out.push_back(static_cast<int64_t>(p));
}

class RopeLow;

/// A layer of an fp16, KIVI or KIVI-Sink cache (cfg validated) whose keys
/// are rotated with `rope` (null: no RoPE).
std::unique_ptr<CacheLayer>
makeUniformLayer(const kvq_config &cfg, Device &dev,
                 std::shared_ptr<const RopeLow> rope);

/// A layer of a KVQuant cache (cfg.method == KVQ_METHOD_KVQUANT, validated)
/// whose keys are rotated with `rope` (null: no RoPE).
std::unique_ptr<CacheLayer>
makeKvquantLayer(const kvq_config &cfg, Device &dev,
                 std::shared_ptr<const RopeLow> rope);

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_CACHE_LAYER_H
