//===- fp16.cpp - Portable IEEE binary16 conversion -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Integer implementation of float <-> binary16 with round-to-nearest-even.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"

using namespace kvq;

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

/// x86_64 gets AVX-512 and AVX2 clones (chosen at load time); the lanes are
/// integer operations, so every clone and the arm64 build give one answer.
#if defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void kvq::floatToHalfN(const float *src, int64_t n, uint16_t *dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = floatBits(src[i]);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t mag = bits & 0x7fffffffu;
    // Normal result: rebias and round the 13 dropped bits to nearest even
    // (a carry into the exponent is the correct rounding).
    const uint32_t rebiased = mag - (112u << 23);
    const uint32_t normal =
        (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
    // Subnormal result (exponent < 113): the mantissa with its implicit
    // bit shifted right by 126 - exponent, clamped to [14, 31] (every
    // shift past 24 gives zero either way, float subnormals and zero
    // included; normal results ignore it).
    const uint32_t exponent = mag >> 23;
    const uint32_t clamped = exponent < 95u ? 95u : (exponent > 112u ? 112u : exponent);
    const uint32_t shift = 126u - clamped;
    const uint32_t mantissa = (mag & 0x7fffffu) | 0x800000u;
    const uint32_t low = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    uint32_t sub = mantissa >> shift;
    sub += (low > halfway) | ((low == halfway) & sub & 1u);
    uint32_t h = exponent < 113u ? sub : normal;
    h = mag >= 0x477ff000u ? 0x7c00u : h; // rounds to infinity
    h = mag >= 0x7f800000u ? 0x7c00u | (mag > 0x7f800000u ? 0x0200u : 0u) : h;
    dst[i] = static_cast<uint16_t>(sign | h);
  }
}
