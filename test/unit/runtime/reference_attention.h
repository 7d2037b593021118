//===- reference_attention.h ------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Causal attention in float64, written independently of the runtime.
//
// What kvq_cache_attend must agree with when it runs over the K/V that
// kvq_cache_fetch returns: the attend == attention-over-fetch property test
// and the call-sequence fuzzer both compare against this one function.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_RUNTIME_REFERENCE_ATTENTION_H
#define KVQ_TEST_UNIT_RUNTIME_REFERENCE_ATTENTION_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kvqtest {

/// Causal attention in float64 over fetched K/V ([tokens][heads][d]).
inline std::vector<double> attention64(const std::vector<float> &K,
                                       const std::vector<float> &V,
                                       int64_t length, int heads, int d,
                                       const std::vector<float> &q,
                                       int64_t nQueries, int qHeads) {
  std::vector<double> out(static_cast<size_t>(nQueries * qHeads * d), 0.0);
  const int group = qHeads / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t i = 0; i < nQueries; ++i) {
    const int64_t last = length - nQueries + i;
    for (int h = 0; h < qHeads; ++h) {
      const int kvh = h / group;
      const float *qv = q.data() + (i * qHeads + h) * d;
      std::vector<double> s(static_cast<size_t>(last + 1));
      double m = -INFINITY;
      for (int64_t t = 0; t <= last; ++t) {
        double dot = 0.0;
        for (int c = 0; c < d; ++c)
          dot += static_cast<double>(qv[c]) *
                 K[static_cast<size_t>((t * heads + kvh) * d + c)];
        s[static_cast<size_t>(t)] = dot * scale;
        m = std::max(m, dot * scale);
      }
      double sum = 0.0;
      for (double &e : s)
        sum += (e = std::exp(e - m));
      double *o = out.data() + (i * qHeads + h) * d;
      for (int64_t t = 0; t <= last; ++t)
        for (int c = 0; c < d; ++c)
          o[c] += s[static_cast<size_t>(t)] / sum *
                  V[static_cast<size_t>((t * heads + kvh) * d + c)];
    }
  }
  return out;
}

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_RUNTIME_REFERENCE_ATTENTION_H
