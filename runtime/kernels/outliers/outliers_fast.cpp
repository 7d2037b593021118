//===- outliers_fast.cpp - The rank split in one pass ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// topkAbsFast (outliers_fast.h).
//
//===----------------------------------------------------------------------===//
#include "outliers_fast.h"
#include "topk_impl.h"

using namespace kvq;

void kvq::topkAbsFast(const float *x, int64_t n, int64_t stride,
                      const uint8_t *exclude, int64_t exStride, int64_t k,
                      uint8_t *mask, int64_t maskStride, float *threshold) {
  if (stride != 1 || exclude || k < 1 || k > n || k > kOnePassK)
    return topkAbsRef(x, n, stride, exclude, exStride, k, mask, maskStride,
                      threshold);
  KLargest top(k);
  for (int64_t i = 0; i < n; ++i)
    top.offer(floatBits(x[i]) & 0x7fffffffu);
  int64_t ties;
  const uint32_t t = top.kthLargest(&ties);
  markRanked([&](int64_t i) { return floatBits(x[i]) & 0x7fffffffu; },
             [](int64_t) { return false; },
             [&](int64_t i, bool take) { mask[i * maskStride] = take; }, n, t,
             ties);
  if (threshold)
    *threshold = bitsToFloat(t);
}
