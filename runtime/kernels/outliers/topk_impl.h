//===- topk_impl.h - Rank split without scratch memory ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Template body of topkAbsGeneric, shared by the strided float kernel and the
// C entry points that read fp16/f32 buffers directly (no conversion copy).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_OUTLIERS_TOPK_IMPL_H
#define KVQ_RUNTIME_KERNELS_OUTLIERS_TOPK_IMPL_H

#include "fp16.h"
#include "kernels.h"

namespace kvq {

/// The split's marks once the k-th largest magnitude t is known: every
/// eligible element above t, and the first `ties` equal to it (ties to the
/// earlier index). Every rank split ends with it, whichever way it found t.
template <class Magnitude, class Skip, class Mark>
void markRanked(Magnitude magnitude, Skip skip, Mark &&mark, int64_t n,
                uint32_t t, int64_t ties) {
  for (int64_t i = 0; i < n; ++i) {
    bool take = false;
    if (!skip(i)) {
      const uint32_t b = magnitude(i);
      take = b > t || (b == t && ties > 0);
      ties -= b == t && take;
    }
    mark(i, take);
  }
}

template <class Get, class Skip, class Mark>
uint32_t topkAbsGeneric(Get get, Skip skip, Mark mark, int64_t n, int64_t k) {
  auto magnitude = [&](int64_t i) { return floatBits(get(i)) & 0x7fffffffu; };
  auto countAtLeast = [&](uint32_t t) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i)
      if (!skip(i) && magnitude(i) >= t)
        ++c;
    return c;
  };
  int64_t eligible = countAtLeast(0);
  if (k > eligible)
    k = eligible;
  if (k <= 0) {
    for (int64_t i = 0; i < n; ++i)
      mark(i, false);
    return 0;
  }
  // Non-negative floats order like their bit patterns: bisect for the
  // largest t with at least k magnitudes >= t, the k-th largest magnitude.
  uint32_t lo = 0, hi = 0x7f800001u;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (countAtLeast(mid) >= k)
      lo = mid;
    else
      hi = mid;
  }
  int64_t ties = k - countAtLeast(lo + 1); // elements equal to lo to take
  markRanked(magnitude, skip, mark, n, lo, ties);
  return lo;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_OUTLIERS_TOPK_IMPL_H
