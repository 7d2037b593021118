//===- fuzz_cache_load.cpp - libFuzzer target for kvq_cache_load ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every input is loaded twice: as it is (almost always stopped by the
// checksum) and re-sealed with a correct checksum, so that the fuzzer
// reaches the semantic checks behind it. A load either fails with a status
// and no cache, or gives a cache that must behave: stats partition its
// tokens, fetch and attention stay finite, it saves back to exactly the
// bytes it was loaded from (the format is canonical), and it takes a
// truncation and one more token. Any violation aborts; ASan/UBSan catch
// reads out of bounds and leaks.
//
//===----------------------------------------------------------------------===//
#include "kvq/runtime.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(bool ok) {
  if (!ok)
    std::abort();
}

/// FNV-1a 64 (docs/RUNTIME.md, "Saved cache format").
uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void exercise(kvq_cache_t *c, const std::vector<uint8_t> &bytes) {
  int64_t size = 0;
  check(kvq_cache_save(c, nullptr, 0, &size) == KVQ_OK);
  std::vector<uint8_t> again(static_cast<size_t>(size));
  check(kvq_cache_save(c, again.data(), size, &size) == KVQ_OK);
  // The same bytes, except the writer's kvq version (and so the checksum)
  // and the backend field: a file a Metal cache saved (backend 1) loads
  // into this CPU cache, which saves backend 0 (docs/RUNTIME.md).
  check(again.size() == bytes.size());
  constexpr size_t kBackend = 20 + 4 * 15;
  check(again[kBackend] == KVQ_BACKEND_CPU &&
        std::memcmp(again.data() + kBackend + 1, "\0\0\0", 3) == 0);
  std::vector<uint8_t> expected = bytes;
  std::memset(expected.data() + kBackend, 0, 4);
  check(std::memcmp(again.data(), expected.data(), 12) == 0);
  check(std::memcmp(again.data() + 18, expected.data() + 18,
                    bytes.size() - 26) == 0);
  kvq_stats all;
  check(kvq_cache_stats(c, -1, &all) == KVQ_OK);
  check(all.compressed_tokens + all.sink_tokens + all.residual_tokens ==
        all.tokens);
  // The configuration (offsets of docs/RUNTIME.md): layers, heads, head_dim.
  auto field = [&](int i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b)
      v |= uint32_t{bytes[static_cast<size_t>(20 + 4 * i + b)]} << (8 * b);
    return static_cast<int64_t>(static_cast<int32_t>(v));
  };
  const int64_t layers = field(12), heads = field(13), dim = field(14);
  const int64_t channels = heads * dim;
  for (int32_t l = 0; l < layers; ++l) {
    int64_t n = 0;
    check(kvq_cache_length(c, l, &n) == KVQ_OK);
    if (n == 0 || n * channels > (int64_t{1} << 22))
      continue;
    std::vector<float> k(static_cast<size_t>(n * channels)), v(k.size());
    check(kvq_cache_fetch(c, l, k.data(), v.data(), n, KVQ_DTYPE_F32) ==
          KVQ_OK);
    for (size_t i = 0; i < k.size(); ++i)
      check(std::isfinite(k[i]) && std::isfinite(v[i]));
    std::vector<float> q(static_cast<size_t>(channels), 1.0f),
        out(q.size(), 0.0f);
    check(kvq_cache_attend(c, l, q.data(), 1, static_cast<int32_t>(heads),
                           out.data()) == KVQ_OK);
    for (float x : out)
      check(std::isfinite(x));
  }
  // Lifecycle calls keep working on a loaded cache.
  kvq_status t =
      kvq_cache_truncate(c, all.tokens / (2 * (layers ? layers : 1)));
  check(t == KVQ_OK || t == KVQ_ERR_NOT_EXACT);
  if (channels <= 4096) {
    std::vector<float> row(static_cast<size_t>(channels), 0.5f);
    kvq_status u =
        kvq_cache_update(c, 0, row.data(), row.data(), 1, KVQ_DTYPE_F32);
    check(u == KVQ_OK || u == KVQ_ERR_INVALID_ARGUMENT);
  }
}

void loadOne(const std::vector<uint8_t> &bytes) {
  kvq_cache_t *c = nullptr;
  kvq_status s = kvq_cache_load(
      bytes.data(), static_cast<int64_t>(bytes.size()), nullptr, &c);
  if (s != KVQ_OK) {
    check(c == nullptr);
    check(s == KVQ_ERR_CORRUPT_DATA || s == KVQ_ERR_OUT_OF_MEMORY);
    return;
  }
  exercise(c, bytes);
  kvq_cache_destroy(c);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  loadOne(bytes);
  if (size >= 8) {
    const uint64_t h = fnv(bytes.data(), size - 8);
    for (int b = 0; b < 8; ++b)
      bytes[size - 8 + static_cast<size_t>(b)] =
          static_cast<uint8_t>(h >> (8 * b));
    loadOne(bytes);
  }
  return 0;
}
