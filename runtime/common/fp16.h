//===- fp16.h - Portable IEEE binary16 conversion ---------------*- C++ -*-===//
//
// Bit-exact float <-> binary16 conversion in integer code (round to nearest,
// ties to even), so the reference path needs neither _Float16 nor F16C and
// gives the same bytes on every compiler and ISA.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_FP16_H
#define KVQ_RUNTIME_COMMON_FP16_H

#include "kvq/runtime.h"

#include <cstdint>
#include <cstring>

namespace kvq {

/// float -> binary16 bits, round to nearest even; overflow gives +-inf, NaN
/// stays NaN (quiet).
uint16_t floatToHalf(float value);

/// binary16 bits -> float (exact).
float halfToFloat(uint16_t half);

/// True when `half` encodes a finite number.
inline bool halfIsFinite(uint16_t half) { return (half & 0x7c00u) != 0x7c00u; }

/// The float nearest to `value` that binary16 represents.
inline float roundToHalf(float value) {
  return halfToFloat(floatToHalf(value));
}

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Element `i` of a buffer of `dtype` as float.
inline float loadElement(const void *data, kvq_dtype dtype, int64_t i) {
  if (dtype == KVQ_DTYPE_F16)
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  return static_cast<const float *>(data)[i];
}

/// Store `value` as element `i` of a buffer of `dtype` (f16: rounded).
inline void storeElement(void *data, kvq_dtype dtype, int64_t i, float value) {
  if (dtype == KVQ_DTYPE_F16)
    static_cast<uint16_t *>(data)[i] = floatToHalf(value);
  else
    static_cast<float *>(data)[i] = value;
}

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_FP16_H
