//===- tokenizer_test.cpp - llama2.c tokenizer on tok512.bin --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Expected ids were worked out by hand from the piece table of tok512.bin
// (ids and scores quoted next to each), not produced by the tokenizer.
//
//===----------------------------------------------------------------------===//
#include "model_test_util.h"
#include "tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

using kvq::model::Tokenizer;
using namespace kvqtest;

namespace {

Tokenizer loadTok512() {
  std::string err;
  std::optional<Tokenizer> t =
      Tokenizer::load(modelPath("tok512.bin"), 512, &err);
  EXPECT_TRUE(t.has_value()) << err;
  if (!t)
    std::abort();
  return *t;
}

/// decode() of every id after the first, each following its predecessor.
std::string decodeAll(const Tokenizer &t, const std::vector<int32_t> &ids) {
  std::string s;
  for (size_t i = 1; i < ids.size(); ++i)
    s += t.decode(ids[i - 1], ids[i]);
  return s;
}

} // namespace

TEST(Tokenizer, LoadsTok512) {
  Tokenizer t = loadTok512();
  EXPECT_EQ(t.vocabSize(), 512);
  EXPECT_EQ(t.piece(0), "<unk>");
  // llama2.c's export wraps BOS and EOS in newlines.
  EXPECT_EQ(t.piece(1), "\n<s>\n");
  EXPECT_EQ(t.piece(2), "\n</s>\n");
  EXPECT_EQ(t.piece(3), "<0x00>");
  EXPECT_EQ(t.piece(258), "<0xFF>");
  EXPECT_EQ(t.piece(403), " Once");
  EXPECT_EQ(t.piece(511), "\xE2\x80\x8A"); // U+200A hair space.
  EXPECT_EQ(t.piece(512), "");
  EXPECT_EQ(t.piece(-1), "");
  EXPECT_FLOAT_EQ(t.score(260), -1.0f);

  // Without an expected size the file decides.
  std::string err;
  std::optional<Tokenizer> any =
      Tokenizer::load(modelPath("tok512.bin"), 0, &err);
  ASSERT_TRUE(any) << err;
  EXPECT_EQ(any->vocabSize(), 512);
}

TEST(Tokenizer, DecodesByteFallbackToRawBytes) {
  Tokenizer t = loadTok512();
  EXPECT_EQ(t.decode(0, 3 + 0x41), "A");
  EXPECT_EQ(t.decode(0, 3 + 0x0A), "\n");
  EXPECT_EQ(t.decode(0, 3 + 0x00), std::string(1, '\0'));
  EXPECT_EQ(t.decode(0, 3 + 0xFF), "\xFF");
  EXPECT_EQ(t.decode(Tokenizer::kBos, 3 + 0x20), " "); // A byte, not a piece.
}

TEST(Tokenizer, DecodeStripsLeadingSpaceOnlyAfterBos) {
  Tokenizer t = loadTok512();
  EXPECT_EQ(t.decode(Tokenizer::kBos, 403), "Once");
  EXPECT_EQ(t.decode(407, 403), " Once");
  EXPECT_EQ(t.decode(Tokenizer::kBos, 410), ""); // " " itself.
  EXPECT_EQ(t.decode(Tokenizer::kBos, 260), "he");
  EXPECT_EQ(t.decode(5, 9999), "");
}

TEST(Tokenizer, EncodesHandCheckedStrings) {
  Tokenizer t = loadTok512();
  // " Once upon a time": ' t'(259, score 0) and ' a'(261, -2) merge first;
  // 'im'(288) + 'e' -> 'ime'(369); ' t' + 'ime' -> ' time'(378, -119);
  // ' O'+'n' ... -> ' Once'(403, -144); ' u'+'p'.. -> ' upon'(407, -148).
  std::vector<int32_t> once = t.encode("Once upon a time", true);
  EXPECT_EQ(once, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(decodeAll(t, once), "Once upon a time");
  EXPECT_EQ(t.encode("Once upon a time", false),
            (std::vector<int32_t>{403, 407, 261, 378}));

  // " Lily": 'il'(290, -31), then ' L'(307, -48), 'ily'(310, -51), and
  // ' L' + 'ily' = ' Lily'(317).
  EXPECT_EQ(t.encode("Lily", false), (std::vector<int32_t>{317}));

  // " hello": 'he'(260, -1), ' he'(281, -22), 'll'(306, -47); no ' hell',
  // 'llo' or ' hello' token, so 'o'(414) stays alone.
  EXPECT_EQ(t.encode("hello", false), (std::vector<int32_t>{281, 306, 414}));

  // A newline has no piece: byte fallback <0x0A> = 13 between ' a' and 'b'.
  EXPECT_EQ(t.encode("a\nb", false), (std::vector<int32_t>{261, 13, 430}));

  // "ï" (C3 AF) and "✓" (E2 9C 93) have no piece: bytes + 3. ' n'(297) and
  // 've'(360) merge; ' na' is not a token.
  EXPECT_EQ(t.encode("naïve ✓", false),
            (std::vector<int32_t>{297, 412, 0xC3 + 3, 0xAF + 3, 360, 410,
                                  0xE2 + 3, 0x9C + 3, 0x93 + 3}));

  // Equal scores break to the left: " xooo" has 'oo'(347) twice,
  // overlapping; ' x', 'xo' and 'ooo' are not tokens.
  EXPECT_EQ(t.encode("xooo", false),
            (std::vector<int32_t>{410, 444, 347, 414}));

  // "é" (485) is a piece of its own: looked up as one character.
  EXPECT_EQ(t.encode("é", false), (std::vector<int32_t>{410, 485}));

  // llama2.c prepends the space only to non-empty text.
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(t.encode("", false).empty());
}

TEST(Tokenizer, RoundTripsText) {
  Tokenizer t = loadTok512();
  const char *texts[] = {
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park with her friend Tim!",
      "\"Can I have it?\" asked Ben. Mom said: 'No, it is 5 o'clock.'",
      "naïve ✓",
      "Zoë's café — 100% {weird} ~chars~\ttab\nnewline \x01 end",
      "  two leading spaces and trailing  ",
      "日本語",
  };
  for (const char *text : texts) {
    std::vector<int32_t> ids = t.encode(text, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], Tokenizer::kBos);
    for (int32_t id : ids)
      EXPECT_TRUE(id >= 0 && id < t.vocabSize());
    EXPECT_EQ(decodeAll(t, ids), text);
  }
}

TEST(Tokenizer, MergesLeaveNoMergeablePair) {
  // The BPE fixpoint: no adjacent pair of the output concatenates to a piece
  // (with a score above llama2.c's -1e10 floor).
  Tokenizer t = loadTok512();
  std::string text = "The little dog was very happy. They played with a big "
                     "red ball all day, and then they went home to sleep.";
  std::vector<int32_t> ids = t.encode(text, false);
  std::vector<std::string> all;
  for (int32_t id = 0; id < t.vocabSize(); ++id)
    all.push_back(t.piece(id));
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    std::string joined = t.piece(ids[i]) + t.piece(ids[i + 1]);
    EXPECT_EQ(std::find(all.begin(), all.end(), joined), all.end())
        << "'" << joined << "' is a token";
  }
  EXPECT_LT(ids.size(), text.size() / 2);
}

//===----------------------------------------------------------------------===//
// Malformed files: nullopt with a message, never a crash.
//===----------------------------------------------------------------------===//

namespace {

void expectRefused(const std::string &path, int32_t expectedVocab,
                   const std::string &what) {
  std::string err;
  std::optional<Tokenizer> t = Tokenizer::load(path, expectedVocab, &err);
  EXPECT_FALSE(t.has_value()) << what;
  EXPECT_FALSE(err.empty()) << what;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

/// max_token_length 7, tokens "u" and "s", then "ab" with the given
/// length field.
std::vector<char> oneToken(int32_t length) {
  std::vector<char> b;
  appendRaw<int32_t>(b, 7);
  for (char c : {'u', 's'}) {
    appendRaw<float>(b, 0.0f);
    appendRaw<int32_t>(b, 1);
    b.push_back(c);
  }
  appendRaw<float>(b, -1.0f);
  appendRaw<int32_t>(b, length);
  b.push_back('a');
  b.push_back('b');
  return b;
}

} // namespace

TEST(TokenizerMalformed, MissingEmptyAndDirectory) {
  expectRefused(std::string(KVQ_MODEL_TEST_TMP) + "/no-such-file.bin", 0,
                "missing");
  expectRefused(writeScratch("tok-empty.bin", {}), 0, "empty");
  expectRefused(KVQ_MODEL_TEST_TMP, 0, "directory");
}

TEST(TokenizerMalformed, BadLengths) {
  std::string ok = writeScratch("tok-ok.bin", oneToken(2));
  std::string err;
  std::optional<Tokenizer> t = Tokenizer::load(ok, 0, &err);
  ASSERT_TRUE(t) << err; // The builder itself makes a valid file.
  EXPECT_EQ(t->piece(2), "ab");

  expectRefused(writeScratch("tok-neg.bin", oneToken(-1)), 0, "negative");
  expectRefused(writeScratch("tok-huge.bin", oneToken(0x7FFFFFFF)), 0, "huge");
  expectRefused(writeScratch("tok-over.bin", oneToken(3)), 0, "past the end");
  expectRefused(writeScratch("tok-long.bin", oneToken(8)), 0,
                "longer than max_token_length");
  std::vector<char> badMax = oneToken(2);
  badMax[0] = badMax[1] = badMax[2] = badMax[3] = char(0xFF); // -1
  expectRefused(writeScratch("tok-badmax.bin", badMax), 0, "max length -1");
  std::vector<char> header(4, 0);
  header[0] = 7;
  expectRefused(writeScratch("tok-header.bin", header), 0, "no tokens");
}

// encode() puts <s> (id 1) first and falls back to <unk> (id 0): a file
// without the three special ids would give ids outside its vocabulary.
TEST(TokenizerMalformed, FewerThanTheThreeSpecialTokens) {
  std::vector<char> b = oneToken(2);
  // Cut after "u" (one token) and after "s" (two).
  for (size_t tokens : {size_t{1}, size_t{2}}) {
    std::vector<char> cut(b.begin(), b.begin() + 4 + 9 * tokens);
    std::string err;
    EXPECT_FALSE(Tokenizer::load(writeScratch("tok-few.bin", cut), 0, &err));
    EXPECT_NE(err.find("holds " + std::to_string(tokens) +
                       " tokens; llama2.c's first three are <unk>, <s> and "
                       "</s>"),
              std::string::npos)
        << err;
  }
}

TEST(TokenizerMalformed, EveryTruncationOfTok512) {
  std::vector<char> bytes = readBytes(modelPath("tok512.bin"));
  ASSERT_EQ(bytes.size(), 6227u);
  // Cut at entry boundaries too: those parse but hold fewer than 512.
  for (size_t n = 0; n < bytes.size(); n += (n < 64 ? 1 : 13)) {
    std::vector<char> cut(bytes.begin(), bytes.begin() + n);
    expectRefused(writeScratch("tok-cut.bin", cut), 512,
                  "cut at " + std::to_string(n));
  }
  expectRefused(modelPath("tok512.bin"), 1000, "vocab mismatch");
}
