//===- reference_model_test.cpp - float64 reference on stories260K --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The greedy text is the model publisher's statement about stories260K.
// Derived checkpoints (separate classifier, K/V heads duplicated into MHA)
// must give the same logits, which checks the layouts the real file does not
// use.
//
//===----------------------------------------------------------------------===//
#include "model_test_util.h"
#include "reference_model.h"
#include "tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using kvq::model::Tokenizer;
using namespace kvqtest;

namespace {

ReferenceModel
loadStories(const std::string &path = modelPath("stories260K.bin")) {
  std::string err;
  std::optional<ReferenceModel> m = ReferenceModel::load(path, &err);
  EXPECT_TRUE(m.has_value()) << err;
  if (!m)
    std::abort();
  return *m;
}

int argmax(const std::vector<double> &v) {
  return int(std::max_element(v.begin(), v.end()) - v.begin());
}

/// Logits of a fixed token sequence, positions 0.. in order.
std::vector<std::vector<double>> run(ReferenceModel &m,
                                     const std::vector<int> &tokens) {
  m.reset();
  std::vector<std::vector<double>> out;
  for (size_t pos = 0; pos < tokens.size(); ++pos)
    out.push_back(m.forward(tokens[pos], int(pos)));
  return out;
}

const std::vector<int> kPrompt = {1,   403, 407, 261, 378, 432, 383,
                                  286, 261, 376, 263, 290, 310, 426};

} // namespace

TEST(ReferenceModel, ReadsTheStories260KConfig) {
  ReferenceModel m = loadStories();
  const ReferenceConfig &c = m.config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hiddenDim, 172);
  EXPECT_EQ(c.nLayers, 5);
  EXPECT_EQ(c.nHeads, 8);
  EXPECT_EQ(c.nKvHeads, 4);
  EXPECT_EQ(c.vocabSize, 512);
  EXPECT_EQ(c.seqLen, 512);
  EXPECT_EQ(c.headDim, 8);
  EXPECT_TRUE(c.sharedClassifier);
}

TEST(ReferenceModel, GreedyFromBosTellsThePublishedStory) {
  ReferenceModel m = loadStories();
  std::string err;
  std::optional<Tokenizer> tok =
      Tokenizer::load(modelPath("tok512.bin"), m.config().vocabSize, &err);
  ASSERT_TRUE(tok) << err;
  std::string text;
  int token = Tokenizer::kBos;
  for (int pos = 0; pos < 40; ++pos) {
    std::vector<double> logits = m.forward(token, pos);
    ASSERT_EQ(logits.size(), 512u);
    int next = argmax(logits);
    text += tok->decode(token, next);
    token = next;
  }
  const std::string published = "Once upon a time, there was a little girl "
                                "named Lily. She loved to play outside in the "
                                "park.";
  EXPECT_EQ(text.substr(0, published.size()), published) << text;
}

TEST(ReferenceModel, CachesPostRopeKeysAndValues) {
  ReferenceModel m = loadStories();
  EXPECT_TRUE(m.key(0, 0).empty()); // Nothing run yet.
  std::vector<std::vector<double>> a = run(m, kPrompt);
  int n = int(kPrompt.size());
  EXPECT_EQ(m.cachedPositions(), n);
  const size_t kvDim = 4 * 8;
  for (int l = 0; l < 5; ++l)
    for (int p = 0; p < n; ++p) {
      ASSERT_EQ(m.key(l, p).size(), kvDim);
      ASSERT_EQ(m.value(l, p).size(), kvDim);
    }
  EXPECT_TRUE(m.key(5, 0).empty());
  EXPECT_TRUE(m.value(0, n).empty());

  // In layer 0 a key depends only on the token and its position, so the
  // second ' a' (261, at 3 and 8) must be the first rotated by 5 positions:
  // pair (2i, 2i+1) of each head by 5 * 10000^(-2i/8). Values do not rotate.
  ASSERT_EQ(kPrompt[3], 261);
  ASSERT_EQ(kPrompt[8], 261);
  std::vector<double> k3 = m.key(0, 3), k8 = m.key(0, 8);
  for (size_t head = 0; head < 4; ++head)
    for (int i = 0; i < 4; ++i) {
      double angle = 5 * std::pow(10000.0, -2.0 * i / 8);
      double a = k3[head * 8 + 2 * i], b = k3[head * 8 + 2 * i + 1];
      EXPECT_NEAR(k8[head * 8 + 2 * i],
                  a * std::cos(angle) - b * std::sin(angle), 1e-12);
      EXPECT_NEAR(k8[head * 8 + 2 * i + 1],
                  a * std::sin(angle) + b * std::cos(angle), 1e-12);
    }
  EXPECT_EQ(m.value(0, 3), m.value(0, 8));
  EXPECT_NE(m.value(1, 3), m.value(1, 8)); // Context matters from layer 1.

  // Same tokens, same numbers, after reset.
  std::vector<std::vector<double>> b = run(m, kPrompt);
  EXPECT_EQ(a, b);
}

TEST(ReferenceModel, RefusesBadCalls) {
  ReferenceModel m = loadStories();
  EXPECT_TRUE(m.forward(1, 1).empty());   // Skips position 0.
  EXPECT_TRUE(m.forward(512, 0).empty()); // Token out of range.
  EXPECT_TRUE(m.forward(-1, 0).empty());
  EXPECT_EQ(m.forward(1, 0).size(), 512u);
  EXPECT_TRUE(m.forward(1, 512).empty());
}

//===----------------------------------------------------------------------===//
// Derived checkpoints: other llama2.c layouts, same function.
//===----------------------------------------------------------------------===//

namespace {} // namespace

TEST(ReferenceModel, SeparateClassifierIsRead) {
  // Negative vocab_size and the embedding appended as the classifier.
  std::vector<char> b =
      withSeparateClassifier(readBytes(modelPath("stories260K.bin")));
  ReferenceModel sep = loadStories(writeScratch("ckpt-separate.bin", b));
  EXPECT_FALSE(sep.config().sharedClassifier);
  EXPECT_EQ(sep.config().vocabSize, 512);
  ReferenceModel shared = loadStories();
  EXPECT_EQ(run(sep, kPrompt), run(shared, kPrompt));

  // A classifier that differs changes the logits, so it is really used.
  b[b.size() - 1] ^= 0x40;
  ReferenceModel changed = loadStories(writeScratch("ckpt-separate2.bin", b));
  EXPECT_NE(run(changed, kPrompt), run(shared, kPrompt));
}

TEST(ReferenceModel, GqaEqualsMhaWithDuplicatedKvHeads) {
  // wk and wv rows of KV head kh copied for query heads 2kh and 2kh+1.
  std::vector<char> mha = asMultiHead(readBytes(modelPath("stories260K.bin")));
  ReferenceModel m = loadStories(writeScratch("ckpt-mha.bin", mha));
  EXPECT_EQ(m.config().nKvHeads, 8);
  ReferenceModel gqa = loadStories();
  EXPECT_EQ(run(m, kPrompt), run(gqa, kPrompt));
}

TEST(ReferenceModel, RefusesMalformedCheckpoints) {
  std::vector<char> b = readBytes(modelPath("stories260K.bin"));
  ASSERT_EQ(b.size(), 1056540u);
  auto refused = [](const std::string &path, const std::string &what) {
    std::string err;
    EXPECT_FALSE(ReferenceModel::load(path, &err).has_value()) << what;
    EXPECT_FALSE(err.empty()) << what;
  };
  refused(std::string(KVQ_MODEL_TEST_TMP) + "/no-such.bin", "missing");
  refused(KVQ_MODEL_TEST_TMP, "directory");
  refused(writeScratch("ckpt-empty.bin", {}), "empty");
  refused(writeScratch("ckpt-header.bin", {b.begin(), b.begin() + 28}),
          "header only");
  refused(writeScratch("ckpt-short.bin", {b.begin(), b.end() - 1}),
          "one byte short");
  std::vector<char> longer = b;
  longer.push_back(0);
  refused(writeScratch("ckpt-long.bin", longer), "one byte extra");
  auto withField = [&](int field, int32_t v) {
    std::vector<char> c = b;
    std::memcpy(c.data() + 4 * field, &v, 4);
    return c;
  };
  refused(writeScratch("ckpt-heads0.bin", withField(3, 0)), "n_heads 0");
  refused(writeScratch("ckpt-heads3.bin", withField(3, 3)), "dim % heads");
  refused(writeScratch("ckpt-kv3.bin", withField(4, 3)), "heads % kv_heads");
  refused(writeScratch("ckpt-neglayers.bin", withField(2, -5)), "layers < 0");
  refused(writeScratch("ckpt-huge.bin", withField(1, 0x7FFFFFFF)), "huge");
  refused(writeScratch("ckpt-negvocab.bin", withField(5, -512)),
          "separate classifier missing");
}
