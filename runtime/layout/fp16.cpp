//===- fp16.cpp - Portable IEEE binary16 conversion -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
