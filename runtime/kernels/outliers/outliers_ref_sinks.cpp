//===- outliers_ref_sinks.cpp - Key norms and top-k sink positions --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The KIVI-Sink proxy for attention sinks: the per-token key L2 norm (mean
// over KV heads), and a top-k over positions with ties to the earlier one.
//
//===----------------------------------------------------------------------===//
#include "topk_impl.h"

#include <cmath>

float kvq::keyNormRow(const float *row, int heads, int headDim) {
  double total = 0.0;
  for (int h = 0; h < heads; ++h) {
    double sq = 0.0;
    for (int d = 0; d < headDim; ++d) {
      double v = row[static_cast<int64_t>(h) * headDim + d];
      sq += v * v;
    }
    total += std::sqrt(sq);
  }
  return static_cast<float>(total / heads);
}

void kvq::topkIndicesRef(const TopkIndicesArgs &a) {
  const float *values = a.values;
  int64_t *indices = a.indices;
  // Values are non-negative, so ranking |v| ranks v; the mark callback sees
  // positions in ascending order, which is the output order.
  int64_t out = 0;
  topkAbsGeneric([&](int64_t i) { return values[i]; },
                 [](int64_t) { return false; },
                 [&](int64_t i, bool m) {
                   if (m)
                     indices[out++] = i;
                 },
                 a.n, a.k);
}
