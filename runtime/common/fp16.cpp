//===- fp16.cpp - Portable IEEE binary16 conversion -----------------------===//
//
// Integer implementation of float <-> binary16 with round-to-nearest-even.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"

uint16_t kvq::floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t mag = bits & 0x7fffffffu;
  if (mag >= 0x7f800000u) // Inf or NaN (keep NaN quiet and NaN).
    return sign | 0x7c00u | (mag > 0x7f800000u ? 0x0200u : 0u);
  // 65520 is halfway between 65504 (odd mantissa) and 65536: ties to even
  // rounds it, and everything above, to infinity.
  if (mag >= 0x477ff000u)
    return sign | 0x7c00u;
  uint32_t exponent = mag >> 23;
  if (exponent < 113) {
    // Result is a binary16 subnormal (or zero): units of 2^-24.
    if (exponent == 0)
      return sign; // float subnormals are far below 2^-25
    uint32_t mantissa = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exponent; // >= 14
    if (shift > 24)
      return sign;
    uint32_t result = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (result & 1u)))
      ++result; // may carry into the smallest normal: still correct
    return sign | static_cast<uint16_t>(result);
  }
  uint32_t result = ((exponent - 112) << 10) | ((mag & 0x7fffffu) >> 13);
  uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u)))
    ++result; // a carry into the exponent is the correct rounding
  return sign | static_cast<uint16_t>(result);
}

float kvq::halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bitsToFloat(floatBits(magnitude) | sign);
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
