//===- lloyd_ref.cpp - Lloyd-Max non-uniform levels -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reference 1-D Lloyd-Max: quantile initialisation, then assign-to-nearest /
// move-to-mean sweeps on the sorted eligible elements. Deterministic: no RNG,
// sums in double, a fixed tie rule.
//
//===----------------------------------------------------------------------===//
#include "kernels.h"

#include <algorithm>

int kvq::nearestLevel(const float *levels, int count, float x) {
  // First level >= x; the nearest is it or its predecessor.
  const float *hiIt = std::lower_bound(levels, levels + count, x);
  int hi = static_cast<int>(hiIt - levels);
  if (hi == 0)
    return 0;
  int lo = hi - 1;
  if (hi < count) {
    float dLo = x - levels[lo];
    float dHi = levels[hi] - x;
    if (dHi < dLo)
      return hi; // lower_bound already gives the first of equal levels
  }
  // Ties (and x above every level) go to the lowest index of that value.
  return static_cast<int>(std::lower_bound(levels, levels + count, levels[lo]) -
                          levels);
}

namespace {
double meanSquaredError(const float *sorted, int64_t m, const float *levels,
                        int count) {
  double sum = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    double d = static_cast<double>(sorted[i]) -
               levels[kvq::nearestLevel(levels, count, sorted[i])];
    sum += d * d;
  }
  return m ? sum / static_cast<double>(m) : 0.0;
}
} // namespace

int64_t kvq::lloydFitRef(const LloydFitArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t exStride = a.exStride;
  const int bits = a.bits, iters = a.iters;
  float *scratch = a.scratch, *levels = a.levels;
  double *distortion = a.distortion;
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!exclude || !exclude[i * exStride])
      scratch[m++] = x[i * stride];
  LloydFitGatheredArgs fit;
  fit.data = scratch;
  fit.m = m;
  fit.work = scratch + m;
  fit.bits = bits;
  fit.iters = iters;
  fit.levels = levels;
  fit.distortion = distortion;
  lloydFitGathered(fit);
  return m;
}

void kvq::lloydFitGathered(const LloydFitGatheredArgs &a) {
  // a.work is not needed here: the reference allocates nothing either.
  float *scratch = a.data;
  const int64_t m = a.m;
  const int bits = a.bits, iters = a.iters;
  float *levels = a.levels;
  double *distortion = a.distortion;
  const int count = 1 << bits;
  if (m == 0) {
    std::fill(levels, levels + count, 0.0f);
    if (distortion)
      std::fill(distortion, distortion + iters + 1, 0.0);
    return;
  }
  std::sort(scratch, scratch + m);
  lloydInitSorted(scratch, m, count, levels);
  if (distortion)
    distortion[0] = meanSquaredError(scratch, m, levels, count);

  double sums[kMaxLevels];
  int64_t counts[kMaxLevels];
  for (int it = 0; it < iters; ++it) {
    std::fill(sums, sums + count, 0.0);
    std::fill(counts, counts + count, int64_t{0});
    for (int64_t i = 0; i < m; ++i) {
      int l = nearestLevel(levels, count, scratch[i]);
      sums[l] += scratch[i];
      ++counts[l];
    }
    for (int l = 0; l < count; ++l)
      if (counts[l]) // an empty level stays where it is
        levels[l] =
            static_cast<float>(sums[l] / static_cast<double>(counts[l]));
    // Means of consecutive cells of sorted data stay sorted; rounding to
    // float cannot reorder them, but keep the invariant explicit.
    std::sort(levels, levels + count);
    if (distortion)
      distortion[it + 1] = meanSquaredError(scratch, m, levels, count);
  }
}

void kvq::lloydInitSorted(const float *scratch, int64_t m, int count,
                          float *levels) {
  // Quantile initialisation, linear interpolation between order statistics
  // (numpy's default "linear" method): position q * (m - 1).
  for (int i = 0; i < count; ++i) {
    double q = (i + 0.5) / count;
    double pos = q * static_cast<double>(m - 1);
    int64_t lo = static_cast<int64_t>(pos);
    int64_t hi = lo + 1 < m ? lo + 1 : lo;
    double frac = pos - static_cast<double>(lo);
    levels[i] = static_cast<float>(
        scratch[lo] + frac * (static_cast<double>(scratch[hi]) - scratch[lo]));
  }
}
