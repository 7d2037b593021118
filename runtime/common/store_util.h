//===- store_util.h - Small helpers shared by the method stores -*- C++ -*-===//
//
// Unaligned-safe fp16 reads/writes inside payload blocks and row conversion.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_STORE_UTIL_H
#define KVQ_RUNTIME_COMMON_STORE_UTIL_H

#include "fp16.h"

#include <cstdint>
#include <cstring>

namespace kvq {

inline uint16_t read16(const uint8_t *p, int64_t i) {
  uint16_t v;
  std::memcpy(&v, p + 2 * i, 2);
  return v;
}

inline void write16(uint8_t *p, int64_t i, uint16_t v) {
  std::memcpy(p + 2 * i, &v, 2);
}

/// n fp16 values (host-order uint16 array) to floats.
inline void halfRowToFloat(const uint16_t *h, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

/// n fp16 values stored in a payload block to floats.
inline void blockRowToFloat(const uint8_t *p, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(read16(p, i));
}

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_STORE_UTIL_H
