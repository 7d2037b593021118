//===- tokenizer_json_test.cpp - Hugging Face tokenizer.json (BPE) --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A hand-written SentencePiece-style tokenizer.json whose encodings are
// worked out by hand below. (stories260K's tokenizer converted by
// scripts/llama2c_to_hf.py is checked end to end by kvq-run-hf-stories260K.)
//
//===----------------------------------------------------------------------===//
#include "tools/model/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>

using kvq::model::Tokenizer;

namespace {

// Ids: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then these.
enum : int32_t { kMeta = 259, kA, kB, kC, kAB, kBC, kABC };

std::string tokenizerJson(const std::string &merges,
                          const std::string &extra = "",
                          const std::string &type = "BPE") {
  std::string vocab = "\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2";
  for (int b = 0; b < 256; ++b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ", \"<0x%02X>\": %d", b, 3 + b);
    vocab += buf;
  }
  vocab += ", \"\u2581\": 259, \"a\": 260, \"b\": 261, \"c\": 262, "
           "\"ab\": 263, \"bc\": 264, \"abc\": 265";
  return "{\"version\": \"1.0\", " + extra +
         "\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", "
         "\"special\": true}, {\"id\": 2, \"content\": \"</s>\", \"special\": "
         "true}],\n"
         "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": ["
         "{\"type\": \"Prepend\", \"prepend\": \"\u2581\"}, {\"type\": "
         "\"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": "
         "\"\u2581\"}]},\n"
         "\"pre_tokenizer\": null,\n"
         "\"model\": {\"type\": \"" +
         type +
         "\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, "
         "\"vocab\": {" +
         vocab + "}, \"merges\": [" + merges + "]}}\n";
}

const char *kBosProcessor =
    "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
    "[{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": "
    "{\"id\": \"A\", \"type_id\": 0}}]}, ";

std::optional<Tokenizer> load(const std::string &name, const std::string &text,
                              std::string *error, int32_t modelVocab = 0) {
  std::string path = std::string(KVQ_MODEL_TEST_TMP) + "/" + name + ".json";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return Tokenizer::loadJson(path, modelVocab, error);
}

TEST(TokenizerJson, MergesByRankNotPosition) {
  std::string error;
  // "b c" outranks "a b": in "▁abc" b+c merges first, so "ab c" never can.
  auto t =
      load("rank", tokenizerJson("\"b c\", \"a b\", \"ab c\"", kBosProcessor),
           &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->vocabSize(), 266);
  EXPECT_EQ(t->encode("abc", true), (std::vector<int32_t>{1, kMeta, kA, kBC}));
  // With "a b" first the chain goes on to "abc" (the [a, b] form of
  // merges, as newer files write them).
  t = load("rank2",
           tokenizerJson("[\"a\", \"b\"], [\"b\", \"c\"], [\"ab\", \"c\"]"),
           &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->encode("abc", false), (std::vector<int32_t>{kMeta, kABC}));
  EXPECT_EQ(t->encode("abcab", false),
            (std::vector<int32_t>{kMeta, kABC, kAB}));
}

TEST(TokenizerJson, SpacesBytesAndBos) {
  std::string error;
  auto t = load("bytes", tokenizerJson("\"a b\"", kBosProcessor), &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  // Spaces are "▁"; é (C3 A9) and a tab fall back to their bytes.
  EXPECT_EQ(t->encode("ab b\té", true),
            (std::vector<int32_t>{1, kMeta, kAB, kMeta, kB, 3 + 0x09, 3 + 0xC3,
                                  3 + 0xA9}));
  EXPECT_EQ(t->encode("", true), (std::vector<int32_t>{1}));
  // Decoding: "▁" is a space, stripped right after BOS; bytes are raw.
  EXPECT_EQ(t->decode(1, kMeta), "");
  EXPECT_EQ(t->decode(kAB, kMeta), " ");
  EXPECT_EQ(t->decode(kMeta, 3 + 0xC3) + t->decode(3 + 0xC3, 3 + 0xA9),
            "\xC3\xA9");
  // Without a post-processor nothing is put first.
  t = load("nobos", tokenizerJson("\"a b\""), &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bos(), -1);
  EXPECT_EQ(t->encode("b", true), (std::vector<int32_t>{kMeta, kB}));
}

TEST(TokenizerJson, RefusalsNameWhatTheyRefuse) {
  std::string error;
  EXPECT_FALSE(load("unigram", tokenizerJson("", "", "Unigram"), &error));
  EXPECT_NE(error.find("model type 'Unigram' is not supported"),
            std::string::npos)
      << error;
  std::string byteLevel = tokenizerJson("");
  byteLevel.replace(byteLevel.find("\"pre_tokenizer\": null"), 21,
                    "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}");
  EXPECT_FALSE(load("bytelevel", byteLevel, &error));
  EXPECT_NE(error.find("byte-level BPE"), std::string::npos) << error;
  EXPECT_FALSE(load("badmerge", tokenizerJson("\"a x\""), &error));
  EXPECT_NE(error.find("merge 'a' + 'x' (rank 0) names a piece not in the "
                       "vocabulary"),
            std::string::npos)
      << error;
  EXPECT_FALSE(load("toobig", tokenizerJson(""), &error, 100));
  EXPECT_NE(error.find("holds 266 tokens, more than the model's 100"),
            std::string::npos)
      << error;
  EXPECT_FALSE(load("notjson", "{\"model\": ", &error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
}

} // namespace
