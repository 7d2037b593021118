//===- lifecycle.cpp - truncate, fork, save and load of a cache -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle beyond append (docs/RUNTIME.md, "Cache lifecycle" and
// "Saved cache format"). The stores decide whether a cut is exact and
// write/read their own state; this file frames the saved cache (header,
// configuration, layer sections, checksum) and makes every call
// all-or-nothing. A fork is a save into memory loaded back with the same
// allocator (so the two share no block), plus the stores' rollback history,
// which the saved format leaves out.
//
//===----------------------------------------------------------------------===//
#include "cache_handle.h"
#include "config.h"
#include "guard.h"
#include "kvq/runtime.h"
#include "serial.h"
#include "status.h"
#include "store.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

using namespace kvq;

namespace {

constexpr uint8_t kMagic[8] = {'K', 'V', 'Q', 'C', 'A', 'C', 'H', 'E'};
/// 2: the RoPE fields joined the configuration.
constexpr uint32_t kFormatVersion = 2;
/// magic, format version, kvq version (4 x u16), 18 config fields, body size.
constexpr int64_t kHeaderBytes = 8 + 4 + 8 + 18 * 4 + 8;
constexpr int64_t kChecksumBytes = 8;

/// Re-issue the last error of a failed step with the entry point and layer.
kvq_status inLayer(kvq_status s, const char *entry, int32_t layer) {
  char msg[400];
  std::snprintf(msg, sizeof(msg), "%s", kvq_last_error());
  return fail(s, "%s: layer %d: %s", entry, layer, msg);
}

/// The configuration fields in kvq_config order (the allocator is not saved).
void writeConfig(ByteWriter &w, const kvq_config &c) {
  for (int32_t v : {c.method, c.key_bits, c.value_bits, c.group_size,
                    c.residual_length, c.residual_mode, c.n_sink_tokens})
    w.u32(static_cast<uint32_t>(v));
  w.f32(c.outlier_fraction);
  for (int32_t v :
       {c.lloyd_iters, c.refit_interval, c.kvquant_n_sink, c.kvquant_group_size,
        c.num_layers, c.num_kv_heads, c.head_dim, c.backend, c.rope_style})
    w.u32(static_cast<uint32_t>(v));
  w.f32(c.rope_theta);
}

bool readConfig(ByteReader &r, kvq_config &c) {
  uint32_t v[16];
  float fraction = 0, theta = 0;
  bool ok = true;
  for (int i = 0; i < 7; ++i)
    ok = ok && r.u32(v[i]);
  ok = ok && r.f32(fraction);
  for (int i = 7; i < 16; ++i)
    ok = ok && r.u32(v[i]);
  ok = ok && r.f32(theta);
  int32_t *fields[16] = {
      &c.method,         &c.key_bits,           &c.value_bits,
      &c.group_size,     &c.residual_length,    &c.residual_mode,
      &c.n_sink_tokens,  &c.lloyd_iters,        &c.refit_interval,
      &c.kvquant_n_sink, &c.kvquant_group_size, &c.num_layers,
      &c.num_kv_heads,   &c.head_dim,           &c.backend,
      &c.rope_style};
  for (int i = 0; i < 16; ++i)
    *fields[i] = static_cast<int32_t>(v[i]);
  c.outlier_fraction = fraction;
  c.rope_theta = theta;
  return ok;
}

/// Header, layers, checksum into out (or only count them when out is
/// null). Returns the size.
int64_t writeCache(const kvq_cache &cache, uint8_t *out) {
  int64_t body = 0;
  for (const auto &layer : cache.layers) {
    ByteWriter count(nullptr);
    layer->save(count);
    body += 8 + count.size();
  }
  ByteWriter w(out);
  w.bytes(kMagic, 8);
  w.u32(kFormatVersion);
  for (uint16_t v :
       {KVQ_VERSION_MAJOR, KVQ_VERSION_MINOR, KVQ_VERSION_PATCH, 0})
    w.u16(v);
  writeConfig(w, cache.cfg);
  w.u64(static_cast<uint64_t>(body));
  for (const auto &layer : cache.layers) {
    ByteWriter count(nullptr);
    layer->save(count);
    w.u64(static_cast<uint64_t>(count.size()));
    layer->save(w);
  }
  const int64_t end = w.size();
  w.u64(out ? fnv1a64(out, end) : 0);
  return w.size();
}

/// kvq_cache_load's work, for load and fork.
kvq_status readCache(const char *entry, const uint8_t *data, int64_t size,
                     const kvq_allocator *allocator, kvq_cache_t **out) {
  if (allocator &&
      (allocator->alloc == nullptr) != (allocator->release == nullptr))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: allocator: set both alloc and release, or neither", entry);
  if (size < kHeaderBytes + kChecksumBytes)
    return fail(KVQ_ERR_CORRUPT_DATA,
                "%s: %lld bytes are too few for a saved cache (at least %lld)",
                entry, static_cast<long long>(size),
                static_cast<long long>(kHeaderBytes + kChecksumBytes));
  if (std::memcmp(data, kMagic, 8) != 0)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: not a saved kvq cache (bad magic)",
                entry);
  ByteReader r(data + 8, size - 8);
  uint32_t version = 0;
  r.u32(version);
  if (version != kFormatVersion)
    return fail(KVQ_ERR_CORRUPT_DATA,
                "%s: format version %u; this runtime reads version %u", entry,
                version, kFormatVersion);
  r.bytes(6); // the writer's kvq version (major, minor, patch): provenance
  uint16_t reserved = 0;
  r.u16(reserved);
  if (reserved != 0)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: reserved header field %u is not 0",
                entry, reserved);
  kvq_config cfg = {};
  readConfig(r, cfg);
  uint64_t body = 0;
  r.u64(body);
  if (body != static_cast<uint64_t>(size - kHeaderBytes - kChecksumBytes))
    return fail(KVQ_ERR_CORRUPT_DATA,
                "%s: the header announces %llu bytes of layers, the data "
                "holds %lld (truncated or extended)",
                entry, static_cast<unsigned long long>(body),
                static_cast<long long>(size - kHeaderBytes - kChecksumBytes));
  uint64_t sum = 0;
  ByteReader(data + size - kChecksumBytes, kChecksumBytes).u64(sum);
  if (sum != fnv1a64(data, size - kChecksumBytes))
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: checksum mismatch", entry);
  // Checks past the checksum catch files written (or tampered with and
  // re-summed) by something else than kvq_cache_save.
  if (cfg.backend != KVQ_BACKEND_CPU && cfg.backend != KVQ_BACKEND_METAL)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: configuration: unknown backend %d",
                entry, cfg.backend);
  cfg.backend = KVQ_BACKEND_CPU; // a Metal cache's file loads on the CPU
  cfg.allocator = allocator ? *allocator : kvq_allocator{};
  if (validateConfig(cfg) != KVQ_OK) {
    char msg[400];
    std::snprintf(msg, sizeof(msg), "%s", kvq_last_error());
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: configuration: %s", entry, msg);
  }
  std::unique_ptr<kvq_cache> cache = newCache(cfg);
  ByteReader layers(data + kHeaderBytes, static_cast<int64_t>(body));
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    uint64_t bytes = 0;
    if (!layers.u64(bytes) || bytes > static_cast<uint64_t>(layers.remaining()))
      return fail(KVQ_ERR_CORRUPT_DATA,
                  "%s: layer %d: section size beyond the data", entry, l);
    const int64_t n = static_cast<int64_t>(bytes);
    ByteReader section(layers.bytes(n), n);
    if (kvq_status s = cache->layers[static_cast<size_t>(l)]->load(section))
      return inLayer(s, entry, l);
    if (section.remaining() != 0)
      return fail(KVQ_ERR_CORRUPT_DATA, "%s: layer %d: %lld bytes left over",
                  entry, l, static_cast<long long>(section.remaining()));
  }
  if (layers.remaining() != 0)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: %lld bytes after the last layer",
                entry, static_cast<long long>(layers.remaining()));
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
          return inLayer(s, "kvq_cache_truncate", static_cast<int32_t>(l));
    auto &layers = cache->layers;
    for (size_t l = 0; l < layers.size(); ++l) {
      if (layers[l]->length() <= n_tokens)
        continue;
      if (kvq_status s = layers[l]->prepareTruncate(n_tokens)) {
        for (size_t m = 0; m < l; ++m)
          if (layers[m]->length() > n_tokens)
            layers[m]->cancelTruncate();
        return inLayer(s, "kvq_cache_truncate", static_cast<int32_t>(l));
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
    std::vector<uint8_t> bytes(
        static_cast<size_t>(writeCache(*cache, nullptr)));
    writeCache(*cache, bytes.data());
    kvq_config cfg = cache->cfg;
    kvq_cache_t *raw = nullptr;
    if (kvq_status s =
            readCache("kvq_cache_fork", bytes.data(),
                      static_cast<int64_t>(bytes.size()), &cfg.allocator, &raw))
      return s;
    std::unique_ptr<kvq_cache> fork(raw); // freed if a copy below throws
    for (size_t l = 0; l < fork->layers.size(); ++l)
      fork->layers[l]->copyHistory(*cache->layers[l]);
    *out = fork.release();
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_save(const kvq_cache_t *cache, void *buffer,
                                        int64_t capacity, int64_t *size) {
  return guarded("kvq_cache_save", [&]() -> kvq_status {
    if (!cache || !size)
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_cache_save: cache and size must be non-null");
    const int64_t needed = writeCache(*cache, nullptr);
    if (buffer && capacity < needed) {
      *size = needed;
      return fail(KVQ_ERR_BUFFER_TOO_SMALL,
                  "kvq_cache_save: capacity %lld < %lld bytes needed",
                  static_cast<long long>(capacity),
                  static_cast<long long>(needed));
    }
    if (buffer)
      writeCache(*cache, static_cast<uint8_t *>(buffer));
    *size = needed;
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_cache_load(const void *data, int64_t size,
                                        const kvq_allocator *allocator,
                                        kvq_cache_t **out) {
  return guarded("kvq_cache_load", [&]() -> kvq_status {
    if (!out || (!data && size > 0))
      return fail(KVQ_ERR_NULL_POINTER,
                  "kvq_cache_load: out (and data when size > 0) must be "
                  "non-null");
    if (size < 0)
      return fail(KVQ_ERR_INVALID_ARGUMENT, "kvq_cache_load: size %lld < 0",
                  static_cast<long long>(size));
    return readCache("kvq_cache_load", static_cast<const uint8_t *>(data), size,
                     allocator, out);
  });
}

} // extern "C"
