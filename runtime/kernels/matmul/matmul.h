//===- matmul.h - kvq_matmul's kernels: one summation order -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The contract every matmul kernel of a kernel table keeps, and the one
// summation order (kvq/runtime.h, kvq_matmul): a dot product of length k
// is 32 partial sums, partial sum l fused-multiply-adding elements l,
// l + 32, ... in order from +0, then s[l] + s[l + 16] (l < 16), + 8, + 4,
// + 2, + 1. A kernel of W-lane vectors holds the 32 partial sums in 32 / W
// vectors (vector c lane i = partial sum c * W + i), so halving the vector
// count first and then the lanes of the last vector is that tree. An
// element past k contributes fma(+0, +0, s) = s (s is never -0: it starts
// at +0 and a sum that is exactly zero rounds to +0), so a zero-padded last
// chunk is the same as stopping at k.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_MATMUL_MATMUL_H
#define KVQ_RUNTIME_KERNELS_MATMUL_MATMUL_H

#include "fp16.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

/// Partial sums of one dot product (kvq_matmul's order).
constexpr int kMatmulLanes = 32;

/// A validated kvq_matmul call.
struct MatmulArgs {
  const float *x;
  int64_t xStride;
  const void *w;
  kvq_weight_type wType;
  int64_t wStride;
  float *y;
  int64_t yStride;
  int64_t m, n, k;
};

/// Computes outputs y[i][j] for all i < m and j in [j0, j1), in the order
/// above; the same bits whatever [j0, j1) a caller splits n into.
using MatmulKernel = void (*)(const MatmulArgs &a, int64_t j0, int64_t j1);

/// The portable kernel: scalar partial sums with std::fma.
void matmulRef(const MatmulArgs &a, int64_t j0, int64_t j1);

/// Element i of a weight buffer of `type`, as float (exact).
inline float weightAt(const void *w, kvq_weight_type type, int64_t i) {
  const auto *half = static_cast<const uint16_t *>(w);
  switch (type) {
  case KVQ_WEIGHT_F16:
    return halfToFloat(half[i]);
  case KVQ_WEIGHT_BF16:
    return bitsToFloat(static_cast<uint32_t>(half[i]) << 16);
  default:
    return static_cast<const float *>(w)[i];
  }
}

/// Bytes per element of a (valid) weight type.
inline int64_t weightBytes(kvq_weight_type type) {
  return type == KVQ_WEIGHT_F32 ? 4 : 2;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_MATMUL_MATMUL_H
