//===- outliers_ref.cpp - Rank-based dense-and-sparse split ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Exactly k outliers per vector, chosen by rank of |x| with ties to the
// earlier index. Bisection on the float bit pattern finds the k-th largest
// magnitude without sorting, so the kernel needs no scratch memory.
//
//===----------------------------------------------------------------------===//
#include "topk_impl.h"

#include <cmath>
#include <limits>

int64_t kvq::outlierCount(float fraction, int64_t eligible) {
  if (!(fraction > 0.0f) || eligible <= 0)
    return 0;
  double k = std::ceil(
      static_cast<double>(fraction) * static_cast<double>(eligible) - 1e-6);
  if (k < 0.0)
    return 0;
  return k > static_cast<double>(eligible) ? eligible : static_cast<int64_t>(k);
}

void kvq::topkAbsRef(const TopkAbsArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t exStride = a.exStride, k = a.k;
  uint8_t *mask = a.mask;
  const int64_t maskStride = a.maskStride;
  float *threshold = a.threshold;
  int64_t taken = 0;
  uint32_t t = topkAbsGeneric(
      [&](int64_t i) { return x[i * stride]; },
      [&](int64_t i) { return exclude && exclude[i * exStride]; },
      [&](int64_t i, bool m) {
        mask[i * maskStride] = m ? 1 : 0;
        taken += m;
      },
      n, k);
  if (threshold)
    *threshold =
        taken ? bitsToFloat(t) : std::numeric_limits<float>::infinity();
}
