//===- Logits.cpp - kvq-run: what a step's logits are checked for ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Logits.h"

#include <algorithm>
#include <cmath>

namespace kvq::run {

std::optional<std::string> nonFiniteLogits(const float *logits, int32_t vocab,
                                           int64_t pos) {
  for (int32_t i = 0; i < vocab; ++i)
    if (!std::isfinite(logits[i]))
      return "the logits at position " + std::to_string(pos) +
             " are not finite (logit " + std::to_string(i) +
             "): the weights overflow f32 arithmetic";
  return std::nullopt;
}

double nll(const float *logits, int32_t vocab, int32_t target) {
  double mx = logits[0];
  for (int32_t i = 1; i < vocab; ++i)
    mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - mx);
  return std::log(sum) + mx - double(logits[target]);
}

int32_t logSoftmax(const float *logits, int32_t vocab,
                   std::vector<double> &out) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best])
      best = i;
  const double mx = logits[best];
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  out.resize(size_t(vocab));
  for (int32_t i = 0; i < vocab; ++i)
    out[size_t(i)] = double(logits[i]) - lse;
  return best;
}

} // namespace kvq::run
