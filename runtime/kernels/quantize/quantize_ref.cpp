//===- quantize_ref.cpp - Uniform min/max group quantization --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reference calibration and quantization of one strided vector; the scale
// and zero are rounded to fp16 before use, because that is what is stored.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "kernels.h"

#include <cmath>

void kvq::uniformCalibrateRef(const UniformCalibrateArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t exStride = a.exStride;
  const int bits = a.bits;
  uint16_t *scale = a.scale, *zero = a.zero;
  bool any = false;
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (exclude && exclude[i * exStride])
      continue;
    float v = x[i * stride];
    if (!any) {
      lo = hi = v;
      any = true;
    } else {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  uniformParams(lo, hi, any, bits, scale, zero);
}

void kvq::uniformParams(float lo, float hi, bool any, int bits, uint16_t *scale,
                        uint16_t *zero) {
  if (!any) {
    *scale = 0;
    *zero = 0;
    return;
  }
  float levels = static_cast<float>((1 << bits) - 1);
  *zero = floatToHalf(lo);
  // max == min gives exactly 0; a range below fp16's resolution also rounds
  // to a 0 scale and is then treated as constant (codes 0).
  *scale = floatToHalf((hi - lo) / levels);
  if ((*scale & 0x7fffu) == 0)
    *scale = 0;
}

void kvq::uniformQuantizeRef(const UniformQuantizeArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint16_t scale = a.scale, zero = a.zero;
  const int bits = a.bits;
  uint8_t *codes = a.codes;
  const int64_t codeStride = a.codeStride;
  float s = halfToFloat(scale);
  float z = halfToFloat(zero);
  float maxCode = static_cast<float>((1 << bits) - 1);
  for (int64_t i = 0; i < n; ++i)
    codes[i * codeStride] = uniformCode(x[i * stride], s, z, maxCode);
}

uint8_t kvq::uniformCode(float x, float s, float z, float maxCode) {
  if (s == 0.0f)
    return 0;
  // nearbyint honours the default round-half-to-even mode.
  float q = std::nearbyint((x - z) / s);
  q = q < 0.0f ? 0.0f : (q > maxCode ? maxCode : q);
  return static_cast<uint8_t>(q);
}
