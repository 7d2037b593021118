//===- eval_metrics.h - kvq-eval's error sums --------------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Squared errors against the reference, summed over a token range (K, V)
// or the query positions in one (attention), and what is derived from them.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_METRICS_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_METRICS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kvq::eval {

/// Sum of squared error and of squared reference, and the element count.
struct Sums {
  double err2 = 0, ref2 = 0;
  int64_t n = 0;
  void add(const Sums &o) {
    err2 += o.err2;
    ref2 += o.ref2;
    n += o.n;
  }
  double mse() const { return n ? err2 / static_cast<double>(n) : NAN; }
  double rel() const {
    return n == 0 ? NAN : ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0;
  }
  double snrDb() const {
    return n == 0 ? NAN : err2 > 0 ? 10 * std::log10(ref2 / err2) : INFINITY;
  }
};

/// Three parts: all tokens, the prefill's and the decoded ones.
struct Parts {
  Sums all, prefill, decode;
  void add(const Parts &o) {
    all.add(o.all);
    prefill.add(o.prefill);
    decode.add(o.decode);
  }
};

/// Sums of got against want over the tokens [from, to) of C floats each.
Sums sums(const std::vector<float> &got, const std::vector<float> &want,
          int64_t from, int64_t to, int64_t C);

/// Attention sums over the selected positions whose index is in [from, to).
Sums attnSums(const std::vector<double> &approx,
              const std::vector<double> &reference,
              const std::vector<int64_t> &pos, int64_t from, int64_t to,
              int64_t row);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_METRICS_H
