//===- kernels_fast.h -------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Portable fast paths shared by SIMD tables.
//
// Algorithmic speedups that need no intrinsics and are shared by the x86 and
// NEON tables. Each gives exactly the reference's bytes (differential tests
// in test/unit/runtime/simd_kernels_test.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_KERNELS_FAST_H
#define KVQ_RUNTIME_COMMON_KERNELS_FAST_H

#include "kernels.h"

namespace kvq {

/// lloydFitGathered with the assign step as one merge walk over the sorted
/// data (O(m + L) per sweep instead of O(m log L)): the nearest level is
/// non-decreasing in x, so each value only moves the current level up.
/// Sums are taken in the same order, so the levels are bit-identical.
void lloydFitGatheredWalk(float *data, int64_t m, int bits, int iters,
                          float *levels, double *distortion);

/// lloydFitRef's contract on top of lloydFitGatheredWalk.
int64_t lloydFitWalk(const float *x, int64_t n, int64_t stride,
                     const uint8_t *exclude, int64_t exStride, int bits,
                     int iters, float *scratch, float *levels,
                     double *distortion);

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_KERNELS_FAST_H
