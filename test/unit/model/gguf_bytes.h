//===- gguf_bytes.h - little-endian GGUF encoding for tests -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The byte writers the GGUF tests build their files with.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_MODEL_GGUF_BYTES_H
#define KVQ_TEST_UNIT_MODEL_GGUF_BYTES_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvq::test {

inline void put(std::string &b, const void *p, size_t n) {
  b.append(static_cast<const char *>(p), n);
}
template <typename T> void put(std::string &b, T v) { put(b, &v, sizeof v); }
/// A GGUF string: u64 length, then the bytes.
inline void putString(std::string &b, const std::string &s) {
  put<uint64_t>(b, s.size());
  b += s;
}

} // namespace kvq::test

#endif
