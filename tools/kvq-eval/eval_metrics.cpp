//===- eval_metrics.cpp - kvq-eval's error sums ---------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "eval_metrics.h"

namespace kvq::eval {

Sums sums(const std::vector<float> &got, const std::vector<float> &want,
          int64_t from, int64_t to, int64_t C) {
  Sums s;
  for (int64_t i = from * C; i < to * C; ++i) {
    const double r = want[static_cast<size_t>(i)];
    const double d = static_cast<double>(got[static_cast<size_t>(i)]) - r;
    s.err2 += d * d;
    s.ref2 += r * r;
  }
  s.n = std::max<int64_t>(0, to - from) * C;
  return s;
}

Sums attnSums(const std::vector<double> &approx,
              const std::vector<double> &reference,
              const std::vector<int64_t> &pos, int64_t from, int64_t to,
              int64_t row) {
  Sums s;
  for (size_t p = 0; p < pos.size(); ++p) {
    if (pos[p] < from || pos[p] >= to)
      continue;
    for (int64_t j = 0; j < row; ++j) {
      const size_t i = p * static_cast<size_t>(row) + static_cast<size_t>(j);
      const double d = approx[i] - reference[i];
      s.err2 += d * d;
      s.ref2 += reference[i] * reference[i];
    }
    s.n += row;
  }
  return s;
}

} // namespace kvq::eval
