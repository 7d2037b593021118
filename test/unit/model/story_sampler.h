//===- story_sampler.h - Seeded sampling from the reference -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The logic behind models/stories260K/eval.txt, shared by make_eval_text
// (which writes it) and eval_text_test.cpp (which regenerates story 1), so
// the file stays reproducible: xorshift64* uniforms, inverse-CDF sampling
// over softmax(logits / temperature) in double.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_MODEL_STORY_SAMPLER_H
#define KVQ_TEST_UNIT_MODEL_STORY_SAMPLER_H

#include "reference_model.h"
#include "tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvqtest {

/// How models/stories260K/eval.txt is sampled (see models/README.md).
constexpr double kEvalTemperature = 1.0;
constexpr int kEvalMaxTokens = 400;

/// xorshift64* (Vigna 2016): x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
/// output x * 0x2545F4914F6CDD1D. The state starts at the seed (nonzero).
class XorShift64Star {
public:
  explicit XorShift64Star(uint64_t seed) : state(seed) {}
  uint64_t next();
  /// Uniform in [0, 1): the top 24 bits of next() divided by 2^24.
  double uniform() { return double(next() >> 40) / double(1 << 24); }

private:
  uint64_t state;
};

/// The first index whose cumulative softmax(logits / temperature)
/// probability exceeds u (u in [0, 1)); the last index if rounding leaves
/// the total below u.
int sampleToken(const std::vector<double> &logits, double temperature,
                double u);

struct Story {
  std::vector<int> tokens; // Sampled tokens, without the starting BOS.
  std::string text;        // Their decoded text.
};

/// From BOS at position 0, samples one token per step (one uniform per
/// step) until BOS or EOS is drawn (not kept) or maxTokens were kept.
Story sampleStory(ReferenceModel &model, const kvq::model::Tokenizer &tok,
                  uint64_t seed, double temperature, int maxTokens);

/// Newlines (\n, \r) become spaces; leading and trailing whitespace goes.
std::string oneLine(const std::string &text);

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_MODEL_STORY_SAMPLER_H
