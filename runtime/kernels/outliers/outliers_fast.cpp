//===- outliers_fast.cpp - The rank split in one pass ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// topkAbsFast (outliers_fast.h).
//
//===----------------------------------------------------------------------===//
#include "outliers_fast.h"
#include "topk_impl.h"

using namespace kvq;

void kvq::topkAbsFast(const TopkAbsArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t k = a.k;
  uint8_t *mask = a.mask;
  const int64_t maskStride = a.maskStride;
  float *threshold = a.threshold;
  if (stride != 1 || exclude || k < 1 || k > n || k > kOnePassK)
    return topkAbsRef(a);
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
