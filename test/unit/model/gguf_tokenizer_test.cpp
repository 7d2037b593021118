//===- gguf_tokenizer_test.cpp - GGUF's embedded vocabulary ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Metadata-only GGUF files written by this test's own writer: a
// SentencePiece ("llama") and a byte-level ("gpt2") vocabulary, the ids
// expected worked out by hand, and malformed tokenizer metadata refused
// with one line naming the key.
//
//===----------------------------------------------------------------------===//
#include "gguf_bytes.h"
#include "tools/model/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>

using namespace kvq::model;

namespace {

enum : uint32_t { U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9 };

using kvq::test::put;
using kvq::test::putString;

/// One metadata entry, already encoded after its key.
struct Kv {
  std::string key, value;
};
Kv str(const std::string &k, const std::string &v) {
  std::string b;
  put<uint32_t>(b, STRING);
  putString(b, v);
  return {k, b};
}
Kv u32(const std::string &k, uint32_t v) {
  std::string b;
  put<uint32_t>(b, U32);
  put<uint32_t>(b, v);
  return {k, b};
}
Kv boolean(const std::string &k, bool v) {
  std::string b;
  put<uint32_t>(b, BOOL);
  put<uint8_t>(b, v);
  return {k, b};
}
Kv strings(const std::string &k, const std::vector<std::string> &v) {
  std::string b;
  put<uint32_t>(b, ARRAY);
  put<uint32_t>(b, STRING);
  put<uint64_t>(b, v.size());
  for (const std::string &s : v)
    putString(b, s);
  return {k, b};
}
Kv floats(const std::string &k, const std::vector<float> &v) {
  std::string b;
  put<uint32_t>(b, ARRAY);
  put<uint32_t>(b, F32);
  put<uint64_t>(b, v.size());
  for (float f : v)
    put<float>(b, f);
  return {k, b};
}
Kv ints(const std::string &k, const std::vector<int32_t> &v) {
  std::string b;
  put<uint32_t>(b, ARRAY);
  put<uint32_t>(b, I32);
  put<uint64_t>(b, v.size());
  for (int32_t x : v)
    put<int32_t>(b, x);
  return {k, b};
}

std::string writeGguf(const std::string &name, const std::vector<Kv> &kvs) {
  std::string b = "GGUF";
  put<uint32_t>(b, 3);
  put<uint64_t>(b, 0); // no tensors: only the metadata is read
  put<uint64_t>(b, kvs.size() + 1);
  putString(b, "general.architecture");
  put<uint32_t>(b, STRING);
  putString(b, "llama");
  for (const Kv &kv : kvs) {
    putString(b, kv.key);
    b += kv.value;
  }
  std::string path = std::string(KVQ_MODEL_TEST_TMP) + "/" + name + ".gguf";
  std::ofstream(path, std::ios::binary) << b;
  return path;
}

const char *kMeta = "\xE2\x96\x81"; // U+2581

/// <unk> <s> </s>, the 256 byte tokens, then ▁ h i ▁h ▁hi.
std::vector<Kv> spmKeys() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  for (auto [piece, score] : {std::pair<std::string, float>{kMeta, -1},
                              {"h", -2},
                              {"i", -3},
                              {std::string(kMeta) + "h", -4},
                              {std::string(kMeta) + "hi", -5}}) {
    tokens.push_back(piece);
    scores.push_back(score);
    types.push_back(1);
  }
  return {str("tokenizer.ggml.model", "llama"),
          strings("tokenizer.ggml.tokens", tokens),
          floats("tokenizer.ggml.scores", scores),
          ints("tokenizer.ggml.token_type", types),
          u32("tokenizer.ggml.bos_token_id", 1),
          u32("tokenizer.ggml.eos_token_id", 2),
          u32("tokenizer.ggml.unknown_token_id", 0)};
}

std::optional<Tokenizer> open(const std::string &path, bool *present,
                              std::string *error, int32_t vocab = 0) {
  return openGgufTokenizer(path, vocab, present, error);
}

} // namespace

TEST(GgufTokenizer, SentencePieceVocabulary) {
  bool present = false;
  std::string error;
  auto t = open(writeGguf("spm", spmKeys()), &present, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_TRUE(present);
  const int32_t space = 259, h = 260, i = 261, spaceH = 262, spaceHi = 263;
  (void)h;
  (void)i;
  (void)spaceH;
  EXPECT_EQ(t->vocabSize(), 264);
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  // "hi": ▁ h i -> ▁h i -> ▁hi, after BOS.
  EXPECT_EQ(t->encode("hi", true), (std::vector<int32_t>{1, spaceHi}));
  // "hé": é is not a token: its bytes C3 A9 fall back to <0xC3> <0xA9>.
  EXPECT_EQ(t->encode("h\xC3\xA9", false),
            (std::vector<int32_t>{spaceH, 3 + 0xC3, 3 + 0xA9}));
  // A control token's text is not the control token.
  std::vector<int32_t> s = t->encode("<s>", false);
  EXPECT_EQ(s.front(), space);
  EXPECT_EQ(std::count(s.begin(), s.end(), 1), 0);
  EXPECT_EQ(t->decode(1, spaceHi), "hi");
  EXPECT_EQ(t->decode(spaceHi, spaceHi), " hi");
  EXPECT_EQ(t->decode(spaceHi, 3 + 'x'), "x");
}

TEST(GgufTokenizer, ByteLevelVocabulary) {
  // GPT-2's byte characters: printable bytes as themselves, the others
  // (space: 'Ġ', U+0120) shifted past 255.
  std::vector<std::string> tokens;
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    uint32_t cp = self ? uint32_t(b) : uint32_t(256 + shifted++);
    std::string u;
    if (cp < 0x80)
      u = std::string(1, char(cp));
    else
      u = {char(0xC0 | cp >> 6), char(0x80 | (cp & 0x3F))};
    tokens.push_back(u);
  }
  const std::string G = "\xC4\xA0"; // 'Ġ', the space
  ASSERT_EQ(tokens[' '], G);
  tokens.push_back("hi");      // 256
  tokens.push_back(G + "hi");  // 257
  tokens.push_back("<|end|>"); // 258, control
  std::vector<int32_t> types(256 + 2, 1);
  types.push_back(3);
  std::vector<Kv> kvs = {str("tokenizer.ggml.model", "gpt2"),
                         str("tokenizer.ggml.pre", "qwen2"),
                         strings("tokenizer.ggml.tokens", tokens),
                         ints("tokenizer.ggml.token_type", types),
                         strings("tokenizer.ggml.merges", {"h i", G + " hi"}),
                         u32("tokenizer.ggml.bos_token_id", 258),
                         u32("tokenizer.ggml.eos_token_id", 258)};
  bool present = false;
  std::string error;
  auto t = open(writeGguf("bpe", kvs), &present, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bos(), -1); // add_bos_token not set: none for gpt2
  EXPECT_EQ(t->eos(), 258);
  // Pre-tokens "hi", " hi", " h", "1", "2" (qwen2: digits one by one).
  EXPECT_EQ(t->encode("hi hi h12", true),
            (std::vector<int32_t>{256, 257, ' ', 'h', '1', '2'}));
  EXPECT_EQ(t->decode(256, 257), " hi");
  kvs.push_back(boolean("tokenizer.ggml.add_bos_token", true));
  t = open(writeGguf("bpe_bos", kvs), &present, &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->encode("hi", true), (std::vector<int32_t>{258, 256}));
}

TEST(GgufTokenizer, AbsentIsNotAnError) {
  bool present = true;
  std::string error;
  EXPECT_FALSE(open(writeGguf("none", {}), &present, &error));
  EXPECT_FALSE(present);
  EXPECT_EQ(error, "");
}

TEST(GgufTokenizer, MalformedMetadataIsOneLine) {
  struct Case {
    const char *name;
    std::function<void(std::vector<Kv> &)> edit;
    const char *message;
  };
  auto set = [](std::vector<Kv> &kvs, Kv kv) {
    for (Kv &x : kvs)
      if (x.key == kv.key) {
        x = kv;
        return;
      }
    kvs.push_back(kv);
  };
  const std::vector<Case> cases = {
      {"model", [&](auto &k) { set(k, str("tokenizer.ggml.model", "bert")); },
       "tokenizer.ggml.model 'bert' is not supported"},
      {"scores_length",
       [&](auto &k) { set(k, floats("tokenizer.ggml.scores", {0, 1})); },
       "tokenizer.ggml.scores holds 2 values for 264 tokens"},
      {"types_length",
       [&](auto &k) { set(k, ints("tokenizer.ggml.token_type", {1})); },
       "tokenizer.ggml.token_type holds 1 values"},
      {"tokens_type",
       [&](auto &k) { set(k, floats("tokenizer.ggml.tokens", {0})); },
       "tokenizer.ggml.tokens is not an array of strings"},
      {"scores_type",
       [&](auto &k) { set(k, strings("tokenizer.ggml.scores", {"a"})); },
       "tokenizer.ggml.scores is not an array of f32"},
      {"bos_range",
       [&](auto &k) { set(k, u32("tokenizer.ggml.bos_token_id", 264)); },
       "tokenizer.ggml.bos_token_id 264 is not a token id"},
      {"eos_type",
       [&](auto &k) { set(k, str("tokenizer.ggml.eos_token_id", "2")); },
       "tokenizer.ggml.eos_token_id is not a token id"},
      {"add_bos_type",
       [&](auto &k) { set(k, u32("tokenizer.ggml.add_bos_token", 1)); },
       "tokenizer.ggml.add_bos_token is not a bool"},
      {"no_tokens",
       [&](auto &k) { set(k, strings("tokenizer.ggml.tokens", {})); },
       "tokenizer.ggml.tokens is missing or empty"},
      {"gpt2_pre",
       [&](auto &k) {
         set(k, str("tokenizer.ggml.model", "gpt2"));
         set(k, str("tokenizer.ggml.pre", "falcon"));
       },
       "tokenizer.ggml.pre 'falcon' is not supported"},
      {"gpt2_bytes",
       [&](auto &k) {
         set(k, str("tokenizer.ggml.model", "gpt2"));
         set(k, str("tokenizer.ggml.pre", "llama-bpe"));
       },
       "is not written in the byte-level characters"},
      {"truncated_array",
       [&](auto &k) {
         Kv kv = strings("tokenizer.ggml.merges", {"a b"});
         kv.value.resize(kv.value.size() - 2);
         k.push_back(kv);
       },
       "metadata entry"},
  };
  for (const Case &c : cases) {
    std::vector<Kv> kvs = spmKeys();
    c.edit(kvs);
    bool present = false;
    std::string error;
    auto t = open(writeGguf(std::string("bad_") + c.name, kvs), &present,
                  &error);
    EXPECT_FALSE(t) << c.name;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.name;
  }
  // More tokens than the model's vocabulary.
  bool present = false;
  std::string error;
  EXPECT_FALSE(open(writeGguf("spm_vocab", spmKeys()), &present, &error, 100));
  EXPECT_NE(error.find("more than the model's 100"), std::string::npos)
      << error;
}
