//===- saved_file_util.h - Saved cache bytes in tests -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What the tests of kvq_cache_save / kvq_metal_cache_save share: a CPU
// cache's saved bytes, and the tools to tamper with a saved file (write a
// little-endian field, recompute the checksum so that only the semantic
// checks can reject it). The checksum is written here from its definition,
// not taken from the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_RUNTIME_SAVED_FILE_UTIL_H
#define KVQ_TEST_UNIT_RUNTIME_SAVED_FILE_UTIL_H

#include "kvq/runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvqtest {

/// Offset of the configuration's backend field (the 16th field at 20).
constexpr size_t kBackendField = 20 + 4 * 15;

/// What kvq_cache_save writes for c.
inline std::vector<uint8_t> saveBytes(const kvq_cache_t *c) {
  int64_t size = 0;
  EXPECT_EQ(kvq_cache_save(c, nullptr, 0, &size), KVQ_OK) << kvq_last_error();
  std::vector<uint8_t> out(static_cast<size_t>(size));
  EXPECT_EQ(kvq_cache_save(c, out.data(), size, &size), KVQ_OK);
  return out;
}

/// FNV-1a 64 of the first n bytes.
inline uint64_t fnv(const std::vector<uint8_t> &b, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/// Write v as `bytes` little-endian bytes at `at`.
inline void put(std::vector<uint8_t> &b, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}

/// Re-seal a tampered file so that only the semantic checks can reject it.
inline void reseal(std::vector<uint8_t> &b) {
  put(b, b.size() - 8, fnv(b, b.size() - 8), 8);
}

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_RUNTIME_SAVED_FILE_UTIL_H
