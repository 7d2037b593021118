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
  EXPECT_NE(error.find("a byte-level pre_tokenizer other than Split"),
            std::string::npos)
      << error;
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

// Byte-level BPE ------------------------------------------------------------

const char *kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char *kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// GPT-2's printable character of byte b, as UTF-8 (written out here from
/// its definition, independently of the tokenizer's table).
std::string gpt2Char(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
        (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) ||
            (x >= 174 && x <= 255)))
        ++n;
    cp = 256 + n;
  }
  if (cp < 0x80)
    return std::string(1, char(cp));
  return std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
}

// Merged ids, after the 256 byte ids (id = byte).
enum : int32_t {
  kHe = 256,
  kLl,
  kLlo,
  kHello,
  kGw,
  kOr,
  kGwor,
  kLd,
  kGworld,
  k12,
  k123,
  kNl2,
  kBegin,
  kEnd
};

std::string byteLevelJson(const char *pattern) {
  std::string vocab;
  for (int b = 0; b < 256; ++b)
    vocab +=
        (b ? ", " : "") + jsonString(gpt2Char(b)) + ": " + std::to_string(b);
  const std::string G = gpt2Char(' '), C = gpt2Char('\n');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"H", "e"},        {"l", "l"}, {"ll", "o"},     {"He", "llo"},
      {G, "w"},          {"o", "r"}, {G + "w", "or"}, {"l", "d"},
      {G + "wor", "ld"}, {"1", "2"}, {"12", "3"},     {C, C}};
  std::string list;
  int id = 256;
  for (const auto &[a, b] : merges) {
    vocab += ", " + jsonString(a + b) + ": " + std::to_string(id++);
    list += (list.empty() ? "" : ", ") + jsonString(a + " " + b);
  }
  std::string escaped;
  for (const char *p = pattern; *p; ++p)
    escaped += *p == '\\' ? std::string("\\\\") : std::string(1, *p);
  return "{\"added_tokens\": [{\"id\": 268, \"content\": "
         "\"<|begin_of_text|>\", \"special\": true}, {\"id\": 269, "
         "\"content\": \"<|end_of_text|>\", \"special\": true}],\n"
         "\"normalizer\": null,\n"
         "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
         "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" +
         escaped +
         "\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": "
         "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": "
         "true, \"use_regex\": false}]},\n"
         "\"post_processor\": {\"type\": \"Sequence\", \"processors\": ["
         "{\"type\": \"ByteLevel\"}, {\"type\": \"TemplateProcessing\", "
         "\"single\": [{\"SpecialToken\": {\"id\": \"<|begin_of_text|>\", "
         "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": "
         "0}}]}]},\n"
         "\"model\": {\"type\": \"BPE\", \"unk_token\": null, "
         "\"byte_fallback\": false, \"vocab\": {" +
         vocab + "}, \"merges\": [" + list + "]}}\n";
}

const std::string kText = "Hello world's 12345\n\n  x";

TEST(TokenizerJson, PreTokenizesAsTheLlama3AndQwen2Patterns) {
  EXPECT_EQ(Tokenizer::preTokenize(kText, 3),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45",
                                      "\n\n", " ", " x"}));
  EXPECT_EQ(Tokenizer::preTokenize(kText, 1),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2",
                                      "3", "4", "5", "\n\n", " ", " x"}));
  // Contractions in any case, punctuation runs with their line ends, a
  // space run giving its last character to the word after it (a tab
  // counts as the optional non-letter before a word), a letter after
  // punctuation, non-ASCII letters, trailing spaces.
  EXPECT_EQ(
      Tokenizer::preTokenize("I'LL go!!\n  \tok.x \xC3\xA9t\xC3\xA9  ", 3),
      (std::vector<std::string>{"I", "'LL", " go", "!!\n", "  ", "\tok", ".x",
                                " \xC3\xA9t\xC3\xA9", "  "}));
}

TEST(TokenizerJson, ByteLevelMergesWithinPreTokens) {
  std::string error;
  auto t = load("bytelevel3", byteLevelJson(kLlama3), &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bos(), kBegin);
  EXPECT_EQ(t->eos(), kEnd);
  EXPECT_EQ(t->encode(kText, true),
            (std::vector<int32_t>{kBegin, kHello, kGworld, '\'', 's', ' ', k123,
                                  '4', '5', kNl2, ' ', ' ', 'x'}));
  // Bytes are pieces of their own: é is two.
  EXPECT_EQ(t->encode("\xC3\xA9", false), (std::vector<int32_t>{0xC3, 0xA9}));
  // Decoding gives the bytes back, the space after BOS kept.
  EXPECT_EQ(t->decode(kBegin, kGworld), " world");
  EXPECT_EQ(t->decode(kGworld, kNl2), "\n\n");
  // Qwen2's single digits: "12" and "123" cannot form across pre-tokens.
  t = load("bytelevel1", byteLevelJson(kQwen2), &error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->encode("12345", false),
            (std::vector<int32_t>{'1', '2', '3', '4', '5'}));
}

TEST(TokenizerJson, ByteLevelRefusals) {
  std::string error;
  std::string other = byteLevelJson(kLlama3);
  other.replace(other.find("{1,3}"), 5, "+");
  EXPECT_FALSE(load("pattern", other, &error));
  EXPECT_NE(error.find("pre-tokenizer pattern"), std::string::npos) << error;
  std::string lacking = byteLevelJson(kLlama3);
  lacking.replace(lacking.find("\"x\": 120"), 8, "\"xx\": 120");
  EXPECT_FALSE(load("lacking", lacking, &error));
  EXPECT_NE(error.find("lacks byte 120"), std::string::npos) << error;
}

} // namespace
