//===- saved_cache.cpp - Framing of a saved cache, for every backend ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Header, configuration, layer section sizes and checksum of the saved
// cache format (docs/RUNTIME.md, "Saved cache format"), shared by the CPU
// and Metal caches.
//
//===----------------------------------------------------------------------===//
#include "saved_cache.h"

#include "config.h"
#include "serial.h"
#include "status.h"

#include <cstdio>
#include <cstring>
#include <vector>

using namespace kvq;

namespace {

constexpr uint8_t kMagic[8] = {'K', 'V', 'Q', 'C', 'A', 'C', 'H', 'E'};
/// 2: the RoPE fields joined the configuration.
constexpr uint32_t kFormatVersion = 2;
/// magic, format version, kvq version (4 x u16), 18 config fields, body size.
constexpr int64_t kHeaderBytes = 8 + 4 + 8 + 18 * 4 + 8;
constexpr int64_t kChecksumBytes = 8;

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
  float fraction = 0;
  bool ok = true;
  for (int i = 0; i < 7; ++i)
    ok = ok && r.u32(v[i]);
  ok = ok && r.f32(fraction);
  for (int i = 7; i < 16; ++i)
    ok = ok && r.u32(v[i]);
  float theta = 0;
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

} // namespace

kvq_status kvq::failInLayer(kvq_status s, const char *entry, int32_t layer) {
  char msg[400];
  std::snprintf(msg, sizeof(msg), "%s", kvq_last_error());
  return fail(s, "%s: layer %d: %s", entry, layer, msg);
}

int64_t kvq::writeSavedCache(const kvq_config &cfg,
                             const SaveLayerFn &saveLayer, uint8_t *out) {
  std::vector<int64_t> sections(static_cast<size_t>(cfg.num_layers));
  int64_t body = 0;
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    ByteWriter count(nullptr);
    saveLayer(l, count);
    sections[static_cast<size_t>(l)] = count.size();
    body += 8 + count.size();
  }
  ByteWriter w(out);
  w.bytes(kMagic, 8);
  w.u32(kFormatVersion);
  for (uint16_t v :
       {KVQ_VERSION_MAJOR, KVQ_VERSION_MINOR, KVQ_VERSION_PATCH, 0})
    w.u16(v);
  writeConfig(w, cfg);
  w.u64(static_cast<uint64_t>(body));
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    w.u64(static_cast<uint64_t>(sections[static_cast<size_t>(l)]));
    if (out)
      saveLayer(l, w);
    else
      w.bytes(nullptr, sections[static_cast<size_t>(l)]);
  }
  const int64_t end = w.size();
  w.u64(out ? fnv1a64(out, end) : 0);
  return w.size();
}

kvq_status kvq::saveSavedCache(const char *entry, const kvq_config &cfg,
                               const SaveLayerFn &saveLayer, void *buffer,
                               int64_t capacity, int64_t *size) {
  if (!size)
    return fail(KVQ_ERR_NULL_POINTER, "%s: cache and size must be non-null",
                entry);
  const int64_t needed = writeSavedCache(cfg, saveLayer, nullptr);
  if (buffer && capacity < needed) {
    *size = needed;
    return fail(KVQ_ERR_BUFFER_TOO_SMALL,
                "%s: capacity %lld < %lld bytes needed", entry,
                static_cast<long long>(capacity),
                static_cast<long long>(needed));
  }
  if (buffer)
    writeSavedCache(cfg, saveLayer, static_cast<uint8_t *>(buffer));
  *size = needed;
  return KVQ_OK;
}

kvq_status kvq::checkLoadArguments(const char *entry, const void *data,
                                   int64_t size, const void *out) {
  if (!out || (!data && size > 0))
    return fail(KVQ_ERR_NULL_POINTER,
                "%s: out (and data when size > 0) must be non-null", entry);
  if (size < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: size %lld < 0", entry,
                static_cast<long long>(size));
  return KVQ_OK;
}

kvq_status kvq::readSavedCache(const char *entry, const uint8_t *data,
                               int64_t size, const CreateFn &create,
                               const LoadLayerFn &loadLayer) {
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
  // re-summed) by something else than a save entry point.
  if (cfg.backend != KVQ_BACKEND_CPU && cfg.backend != KVQ_BACKEND_METAL)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: configuration: unknown backend %d",
                entry, cfg.backend);
  cfg.backend = KVQ_BACKEND_CPU; // either backend's file loads on either
  if (validateConfig(cfg) != KVQ_OK) {
    char msg[400];
    std::snprintf(msg, sizeof(msg), "%s", kvq_last_error());
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: configuration: %s", entry, msg);
  }
  if (kvq_status s = create(cfg))
    return s;
  ByteReader layers(data + kHeaderBytes, static_cast<int64_t>(body));
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    uint64_t bytes = 0;
    if (!layers.u64(bytes) || bytes > static_cast<uint64_t>(layers.remaining()))
      return fail(KVQ_ERR_CORRUPT_DATA,
                  "%s: layer %d: section size beyond the data", entry, l);
    const int64_t n = static_cast<int64_t>(bytes);
    ByteReader section(layers.bytes(n), n);
    if (kvq_status s = loadLayer(l, section))
      return failInLayer(s, entry, l);
    if (section.remaining() != 0)
      return fail(KVQ_ERR_CORRUPT_DATA, "%s: layer %d: %lld bytes left over",
                  entry, l, static_cast<long long>(section.remaining()));
  }
  if (layers.remaining() != 0)
    return fail(KVQ_ERR_CORRUPT_DATA, "%s: %lld bytes after the last layer",
                entry, static_cast<long long>(layers.remaining()));
  return KVQ_OK;
}
