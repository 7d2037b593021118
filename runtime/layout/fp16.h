//===- fp16.h - Portable IEEE binary16 conversion ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Bit-exact float <-> binary16 conversion in integer code (round to nearest,
// ties to even), so the reference path needs neither _Float16 nor F16C and
// gives the same bytes on every compiler and ISA.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_FP16_H
#define KVQ_RUNTIME_LAYOUT_FP16_H

#include "kvq/runtime.h"

#include <cstdint>
#include <cstring>

namespace kvq {

/// float -> binary16 bits, round to nearest even; overflow gives +-inf, NaN
/// stays NaN (quiet).
uint16_t floatToHalf(float value);

/// floatToHalf over n values: the same bits for every input (NaN included),
/// in branch-free integer lanes that vectorize (kvq_cache_update converts
/// every f32 K/V element with it; no FP environment is consulted).
void floatToHalfN(const float *src, int64_t n, uint16_t *dst);

/// The fp16 bits of element i of a byte buffer (a payload block or a saved
/// section), read and written unaligned.
inline uint16_t read16(const uint8_t *p, int64_t i) {
  uint16_t v;
  std::memcpy(&v, p + 2 * i, 2);
  return v;
}

inline void write16(uint8_t *p, int64_t i, uint16_t v) {
  std::memcpy(p + 2 * i, &v, 2);
}

/// True when `half` encodes a finite number.
inline bool halfIsFinite(uint16_t half) { return (half & 0x7c00u) != 0x7c00u; }

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

/// binary16 bits -> float (exact). Inline: the attention walks convert
/// single values (outliers, levels) in their inner loops.
inline float halfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude =
        static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bitsToFloat(floatBits(magnitude) | sign);
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// The float nearest to `value` that binary16 represents.
inline float roundToHalf(float value) {
  return halfToFloat(floatToHalf(value));
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

#endif // KVQ_RUNTIME_LAYOUT_FP16_H
