//===- eval_text_test.cpp - models/stories260K/eval.txt is reproducible ---===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Regenerates the first story with the sampler make_eval_text uses and
// compares it with line 1 of the committed file.
//
//===----------------------------------------------------------------------===//
#include "model_test_util.h"
#include "story_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using kvq::model::Tokenizer;
using namespace kvqtest;

namespace {

std::vector<std::string> evalLines() {
  std::ifstream in(modelPath("eval.txt"), std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

} // namespace

TEST(XorShift64Star, MatchesTheRecurrence) {
  // Worked by hand from the definition for seed 1: x = 1 -> 1 ^ (1 << 25) =
  // 0x2000001 -> ^ (x >> 27) unchanged; output x * 0x2545F4914F6CDD1D.
  XorShift64Star rng(1);
  EXPECT_EQ(rng.next(), 0x2000001ULL * 0x2545F4914F6CDD1DULL);
  XorShift64Star a(7), b(7);
  for (int i = 0; i < 100; ++i) {
    double u = a.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, double(b.next() >> 40) / 16777216.0);
  }
}

TEST(SampleToken, InverseCdf) {
  // softmax of log(1), log(2), log(1) = 0.25, 0.5, 0.25.
  std::vector<double> l = {0.0, std::log(2.0), 0.0};
  EXPECT_EQ(sampleToken(l, 1.0, 0.0), 0);
  EXPECT_EQ(sampleToken(l, 1.0, 0.24), 0);
  EXPECT_EQ(sampleToken(l, 1.0, 0.26), 1);
  EXPECT_EQ(sampleToken(l, 1.0, 0.74), 1);
  EXPECT_EQ(sampleToken(l, 1.0, 0.76), 2);
  EXPECT_EQ(sampleToken(l, 1.0, 0.9999999), 2);
}

TEST(OneLine, JoinsAndTrims) {
  EXPECT_EQ(oneLine("\n Hi.\nBye.\r\n "), "Hi. Bye.");
  EXPECT_EQ(oneLine(" \n "), "");
}

TEST(EvalText, TwelveOneLineStories) {
  std::vector<std::string> lines = evalLines();
  ASSERT_EQ(lines.size(), 12u);
  std::string err;
  std::optional<Tokenizer> tok =
      Tokenizer::load(modelPath("tok512.bin"), 512, &err);
  ASSERT_TRUE(tok) << err;
  for (const std::string &line : lines) {
    EXPECT_EQ(oneLine(line), line); // Trimmed, no newline inside.
    // make_eval_text kept only stories of at least 200 sampled tokens.
    EXPECT_GE(tok->encode(line, false).size(), 200u) << line;
  }
}

TEST(EvalText, FirstStoryIsRegeneratedExactly) {
  std::vector<std::string> lines = evalLines();
  ASSERT_FALSE(lines.empty());
  std::string err;
  std::optional<ReferenceModel> m =
      ReferenceModel::load(modelPath("stories260K.bin"), &err);
  ASSERT_TRUE(m) << err;
  std::optional<Tokenizer> tok =
      Tokenizer::load(modelPath("tok512.bin"), 512, &err);
  ASSERT_TRUE(tok) << err;
  Story s = sampleStory(*m, *tok, 1, kEvalTemperature, kEvalMaxTokens);
  EXPECT_GT(s.tokens.size(), 150u);
  EXPECT_EQ(oneLine(s.text), lines[0]);
}
