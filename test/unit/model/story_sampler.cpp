//===- story_sampler.cpp - seeded sampling from the reference model -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "story_sampler.h"

#include <algorithm>
#include <cmath>

namespace kvqtest {

uint64_t XorShift64Star::next() {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1DULL;
}

int sampleToken(const std::vector<double> &logits, double temperature,
                double u) {
  double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i)
    sum += p[i] = std::exp((logits[i] - mx) / temperature);
  double cdf = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    cdf += p[i] / sum;
    if (u < cdf)
      return int(i);
  }
  return int(p.size()) - 1;
}

Story sampleStory(ReferenceModel &model, const kvq::model::Tokenizer &tok,
                  uint64_t seed, double temperature, int maxTokens) {
  using kvq::model::Tokenizer;
  XorShift64Star rng(seed);
  model.reset();
  Story s;
  int token = Tokenizer::kBos;
  for (int pos = 0; int(s.tokens.size()) < maxTokens; ++pos) {
    std::vector<double> logits = model.forward(token, pos);
    if (logits.empty())
      break; // Context full.
    int next = sampleToken(logits, temperature, rng.uniform());
    if (next == Tokenizer::kBos || next == Tokenizer::kEos)
      break;
    s.text += tok.decode(token, next);
    s.tokens.push_back(next);
    token = next;
  }
  return s;
}

std::string oneLine(const std::string &text) {
  std::string s = text;
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  const char *ws = " \t\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos)
    return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

} // namespace kvqtest
