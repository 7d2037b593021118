//===- tokenizer.h - llama2.c tokenizer (tok512.bin-style) ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The BPE tokenizer of llama2.c checkpoints: a file of scored pieces with
// SentencePiece-style merging and <0xNN> byte fallback. Encoding gives the
// same ids as llama2.c's encode() (without its optional EOS).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_MODEL_TOKENIZER_H
#define KVQ_TOOLS_MODEL_TOKENIZER_H

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvq::model {

/// A vocabulary as GGUF embeds it (tokenizer.ggml.*), before it is checked.
struct VocabularyTables {
  std::string model; ///< "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;   ///< gpt2: the pre-tokenizer ("llama-bpe", "qwen2", ...)
  std::vector<std::string> tokens;
  std::vector<float> scores;       ///< llama: one per token
  std::vector<int32_t> tokenTypes; ///< empty or one per token
  std::vector<std::string> merges; ///< gpt2: "left right", rank order
  int64_t bos = -1, eos = -1, unk = -1; ///< -1: not given
  int addBos = -1;                      ///< -1: not given
};

class Tokenizer {
public:
  static constexpr int32_t kUnk = 0;
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;

  /// Reads a tok512.bin-style file: int32 max_token_length, then per token
  /// float32 score, int32 byte length, the bytes; at least the three
  /// special tokens (kUnk, kBos, kEos). With expectedVocab > 0 the
  /// file must hold exactly that many tokens. On failure returns std::nullopt
  /// and sets *error (if non-null) to a one-line message.
  static std::optional<Tokenizer>
  load(const std::string &path, int32_t expectedVocab, std::string *error);

  /// Reads a Hugging Face tokenizer.json of a BPE: SentencePiece-style
  /// (Llama 2, Mistral, TinyLlama: "▁" for spaces prepended once, byte
  /// fallback) or byte-level (Llama 3, Qwen2: the text split by their
  /// pattern, GPT-2's byte-to-character map): its vocabulary, added tokens
  /// and ranked merges. BOS is the special token its post_processor puts
  /// first (none if it puts none), EOS the first of "</s>",
  /// "<|end_of_text|>", "<|endoftext|>" it holds. Other tokenizers
  /// (Unigram, WordPiece, other patterns) are refused naming what they
  /// are. The tokenizer may hold fewer ids than the model's modelVocab,
  /// never more.
  static std::optional<Tokenizer>
  loadJson(const std::string &path, int32_t modelVocab, std::string *error);

  /// A GGUF-embedded vocabulary (`source` names it in messages):
  ///  - "llama": SentencePiece pieces with "\u2581" for spaces, merged by
  ///    score as llama2.c merges, <0xNN> byte fallback; control tokens
  ///    (type 3) are not matched in text;
  ///  - "gpt2": byte-level BPE, pieces in GPT-2's byte characters, ranked
  ///    merges, pre-tokenizer "llama-bpe"/"llama3" (Llama 3) or "qwen2".
  /// BOS is bos_token_id unless add_bos_token is false ("gpt2": only when
  /// add_bos_token is true); EOS eos_token_id. Anything else (another
  /// model or pre-tokenizer, arrays of different lengths, ids out of range,
  /// a merge naming an unknown piece) is a one-line error.
  static std::optional<Tokenizer> fromTables(const VocabularyTables &v,
                                             int32_t modelVocab,
                                             const std::string &source,
                                             std::string *error);

  /// The pre-tokens of byte-level BPE (exposed for tests): the text split
  /// as the Llama 3 / Qwen2 pattern splits it, digits in runs of at most
  /// `digitRun`. Letters and spaces beyond ASCII are told apart by the C
  /// library's C.UTF-8 tables (iswalpha, iswspace), close to but not
  /// exactly Unicode's \p{L} and \s; numbers are ASCII digits.
  static std::vector<std::string> preTokenize(const std::string &text,
                                              int digitRun);

  int32_t vocabSize() const { return static_cast<int32_t>(pieces.size()); }
  /// The ids encode() puts first and generation stops at (-1: none).
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }

  /// SentencePiece-style BPE: " " prepended when text is non-empty, UTF-8
  /// characters looked up (byte fallback id = byte + 3 when absent), then the
  /// adjacent pair whose concatenation is the highest-scoring token is merged
  /// (leftmost on ties) until none is a token; a tokenizer.json merges the
  /// adjacent pair of lowest merge rank instead. bos puts bos() first.
  std::vector<int32_t> encode(const std::string &text, bool bos) const;

  /// The text of `token` following `previous`: the leading space is stripped
  /// after bos(), <0xNN> becomes the raw byte. Out-of-range ids decode to "".
  std::string decode(int32_t previous, int32_t token) const;

  /// The piece as stored in the file ("" for out-of-range ids).
  const std::string &piece(int32_t id) const;

  float score(int32_t id) const;

private:
  Tokenizer() = default;
  /// The BPE merges of a run of symbols (lowest rank or highest score
  /// first, leftmost on ties).
  std::vector<int32_t> mergeSymbols(std::vector<int32_t> sym) const;
  /// The id of the piece exactly equal to s, or -1.
  int32_t lookup(const std::string &s) const;

  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::unordered_map<std::string, int32_t> ids;
  int32_t bos_ = kBos, eos_ = kEos, unk_ = kUnk;
  /// tokenizer.json: merges by (left id << 32 | right id) -> (rank, merged
  /// id), applied lowest rank first instead of by score; the byte-fallback
  /// ids <0xNN> (-1 where absent).
  bool ranked_ = false;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::vector<int32_t> byteIds_;
  /// Byte-level BPE (GPT-2's byte-to-character map; pieces held as their
  /// bytes): the text is split by the pre-tokenizer's pattern first, digits
  /// in runs of at most digitRun_ (Llama 3: 3,
  /// Qwen2: 1).
  bool byteLevel_ = false;
  int digitRun_ = 3;
};

} // namespace kvq::model

#endif // KVQ_TOOLS_MODEL_TOKENIZER_H
