//===- kernels_fast.cpp - Portable fast paths shared by SIMD tables -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Lloyd-Max with a merge-walk assignment (see kernels_fast.h).
//
//===----------------------------------------------------------------------===//
#include "kernels_fast.h"

#include <algorithm>

using namespace kvq;

void kvq::lloydFitGatheredWalk(float *data, int64_t m, int bits, int iters,
                               float *levels, double *distortion) {
  // The distortion trace is a debugging aid: keep the reference for it.
  if (distortion || m == 0) {
    lloydFitGathered(data, m, bits, iters, levels, distortion);
    return;
  }
  const int count = 1 << bits;
  std::sort(data, data + m);
  lloydInitSorted(data, m, count, levels);
  double sums[kMaxLevels];
  int64_t counts[kMaxLevels];
  int next[kMaxLevels]; // first index holding a larger level value
  for (int it = 0; it < iters; ++it) {
    for (int l = count - 1; l >= 0; --l)
      next[l] =
          l + 1 < count && levels[l + 1] == levels[l] ? next[l + 1] : l + 1;
    std::fill(sums, sums + count, 0.0);
    std::fill(counts, counts + count, int64_t{0});
    // cur is always the first index of its value, as nearestLevel returns.
    int cur = nearestLevel(levels, count, data[0]);
    for (int64_t i = 0; i < m; ++i) {
      const float x = data[i];
      // Move up while the next distinct level wins under nearestLevel's
      // rule: strictly closer, ties to the lower level.
      while (next[cur] < count) {
        const float lo = levels[cur], hi = levels[next[cur]];
        if (x >= hi || (x > lo && hi - x < x - lo))
          cur = next[cur];
        else
          break;
      }
      sums[cur] += x;
      ++counts[cur];
    }
    for (int l = 0; l < count; ++l)
      if (counts[l])
        levels[l] =
            static_cast<float>(sums[l] / static_cast<double>(counts[l]));
    std::sort(levels, levels + count);
  }
}

int64_t kvq::lloydFitWalk(const float *x, int64_t n, int64_t stride,
                          const uint8_t *exclude, int64_t exStride, int bits,
                          int iters, float *scratch, float *levels,
                          double *distortion) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!exclude || !exclude[i * exStride])
      scratch[m++] = x[i * stride];
  lloydFitGatheredWalk(scratch, m, bits, iters, levels, distortion);
  return m;
}
