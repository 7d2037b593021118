//===- outliers_ref_grid.cpp - Reference whole-matrix outlier kernels -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The scalar outlier split, screening and key norms behind the stateless C
// entry points, on a validated grid: the oracle every SIMD table is
// differentially tested against.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "kernels.h"
#include "topk_impl.h"

#include <cmath>
#include <limits>

using namespace kvq;

void kvq::outlierSplitRef(const OutlierSplitArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const float fraction = a.fraction;
  const uint8_t *exclude = a.exclude;
  uint8_t *mask = a.mask;
  float *threshold = a.threshold;
  const int64_t stride = g.stride();
  for (int64_t v = 0; v < g.vectors(); ++v) {
    int64_t base = g.base(v);
    auto at = [&](int64_t i) { return base + i * stride; };
    int64_t eligible = 0;
    for (int64_t i = 0; i < g.group; ++i)
      eligible += !(exclude && exclude[at(i)]);
    int64_t k = outlierCount(fraction, eligible);
    uint32_t t = topkAbsGeneric(
        [&](int64_t i) { return loadElement(x, dtype, at(i)); },
        [&](int64_t i) { return exclude && exclude[at(i)]; },
        [&](int64_t i, bool m) { mask[at(i)] = m ? 1 : 0; }, g.group, k);
    if (threshold)
      threshold[v] =
          k > 0 ? bitsToFloat(t) : std::numeric_limits<float>::infinity();
  }
}

void kvq::outlierScreenRef(const OutlierScreenArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const int64_t rows = a.rows, cols = a.cols;
  const float *threshold = a.threshold;
  uint8_t *mask = a.mask;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = std::fabs(loadElement(x, dtype, r * cols + c));
      mask[r * cols + c] = v >= threshold[c] ? 1 : 0;
    }
}

void kvq::keyNormRef(const KeyNormArgs &a) {
  const void *keys = a.keys;
  const kvq_dtype dtype = a.dtype;
  const int64_t tokens = a.tokens, headDim = a.headDim;
  const int heads = a.heads;
  float *norms = a.norms;
  const int64_t channels = int64_t{heads} * headDim;
  for (int64_t t = 0; t < tokens; ++t) {
    double total = 0.0;
    for (int h = 0; h < heads; ++h) {
      double sq = 0.0;
      for (int64_t d = 0; d < headDim; ++d) {
        double v = loadElement(keys, dtype, t * channels + h * headDim + d);
        sq += v * v;
      }
      total += std::sqrt(sq);
    }
    norms[t] = static_cast<float>(total / heads);
  }
}
