//===- Sampling.cpp - kvq-run: the next token of generation ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvq::run {

int32_t sample(const float *logits, int32_t vocab, const Sampling &s,
               uint64_t &rng) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best])
      best = i;
  if (s.temperature <= 0.0f)
    return best;
  // xorshift64*, top 24 bits -> [0, 1); inverse CDF of softmax(l / T).
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  double u = double((rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0;
  const double temperature = s.temperature;
  if (s.topK == 0 && s.topP >= 1) {
    double sum = 0;
    std::vector<double> p(vocab);
    for (int32_t i = 0; i < vocab; ++i)
      sum += p[i] = std::exp(double(logits[i] - logits[best]) / temperature);
    double acc = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      acc += p[i] / sum;
      if (u < acc)
        return i;
    }
    return vocab - 1;
  }
  // The candidates, most likely first (a tie: the lower id first), cut to
  // top-k, then to the shortest prefix whose probability reaches top-p.
  const int64_t k =
      s.topK > 0 ? std::min<int64_t>(s.topK, vocab) : int64_t(vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i)
    ids[size_t(i)] = i;
  std::partial_sort(
      ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  ids.resize(size_t(k));
  std::vector<double> p(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    sum += p[i] = std::exp(double(logits[ids[i]] - logits[best]) / temperature);
  size_t keep = ids.size();
  if (s.topP < 1) {
    double acc = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      acc += p[i] / sum;
      if (acc >= s.topP) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i)
    kept += p[i];
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i] / kept;
    if (u < acc)
      return ids[i];
  }
  return ids[keep - 1];
}

} // namespace kvq::run
