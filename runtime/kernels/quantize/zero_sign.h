//===- zero_sign.h - The sign of a group's zero minimum ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What every SIMD quantizer needs to give the reference's fp16 zero point
// when a group's minimum is a zero.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_QUANTIZE_ZERO_SIGN_H
#define KVQ_RUNTIME_KERNELS_QUANTIZE_ZERO_SIGN_H

#include "fp16.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

/// The reference takes the first minimal element, so a minimum of zero
/// carries the sign of the first zero in the group (it ends up in the fp16
/// zero point); SIMD min does not know the order. The sign of the group's
/// minimum `lo` as the reference has it: the first zero among the n
/// elements, `stride` apart from `base`.
inline float fixZeroSign(float lo, const void *x, kvq_dtype dtype, int64_t base,
                         int64_t n, int64_t stride) {
  if (lo != 0.0f)
    return lo;
  for (int64_t i = 0; i < n; ++i) {
    float v = loadElement(x, dtype, base + i * stride);
    if (v == 0.0f)
      return v;
  }
  return lo;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_QUANTIZE_ZERO_SIGN_H
