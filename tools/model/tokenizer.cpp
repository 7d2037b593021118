//===- tokenizer.cpp - llama2.c tokenizer ---------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Loading checks every length against the bytes left, so a malformed file
// yields a message, never an out-of-bounds read. Encoding merges through a
// priority queue over a linked list of symbols: the same merge order as
// llama2.c's rescan of all pairs (highest score, leftmost on ties), in
// O(n log n) instead of O(n^2).
//
//===----------------------------------------------------------------------===//
#include "tokenizer.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <queue>

namespace kvq::model {

namespace {

/// Reads the whole file; false with a message when it cannot be read (a
/// directory opens but fails to read).
bool readFile(const std::string &path, std::vector<unsigned char> &bytes,
              std::string &err) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    bytes.insert(bytes.end(), buf, buf + n);
  bool failed = std::ferror(f);
  int savedErrno = errno;
  std::fclose(f);
  if (failed) {
    err = "cannot read '" + path + "': " + std::strerror(savedErrno);
    return false;
  }
  return true;
}

/// Little-endian reads with bounds checks.
struct Reader {
  const std::vector<unsigned char> &bytes;
  size_t pos = 0;
  size_t left() const { return bytes.size() - pos; }
  bool u32(uint32_t &v) {
    if (left() < 4)
      return false;
    v = 0;
    for (int i = 3; i >= 0; --i)
      v = (v << 8) | bytes[pos + i];
    pos += 4;
    return true;
  }
};

bool isHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') ||
         (c >= 'a' && c <= 'f');
}

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  return (c | 0x20) - 'a' + 10;
}

// llama2.c starts its best score at -1e10 and compares strictly, so a pair
// scoring no more than that never merges; kept for identical ids.
constexpr float kMinMergeScore = -1e10f;

} // namespace

std::optional<Tokenizer> Tokenizer::load(const std::string &path,
                                         int32_t expectedVocab,
                                         std::string *error) {
  std::string localErr;
  std::string &err = error ? *error : localErr;
  std::vector<unsigned char> bytes;
  if (!readFile(path, bytes, err))
    return std::nullopt;
  auto fail = [&](const std::string &msg) {
    err = "tokenizer '" + path + "': " + msg;
    return std::nullopt;
  };

  Reader r{bytes};
  uint32_t raw;
  if (!r.u32(raw))
    return fail("file too short for the max_token_length header");
  int32_t maxLen = static_cast<int32_t>(raw);
  if (maxLen <= 0)
    return fail("bad max_token_length " + std::to_string(maxLen));

  Tokenizer t;
  while (r.left() > 0) {
    std::string at = "token " + std::to_string(t.pieces.size());
    uint32_t scoreBits, lenBits;
    if (!r.u32(scoreBits) || !r.u32(lenBits))
      return fail("truncated at " + at);
    int32_t len = static_cast<int32_t>(lenBits);
    if (len < 0 || len > maxLen)
      return fail("bad length " + std::to_string(len) + " of " + at +
                  " (max_token_length " + std::to_string(maxLen) + ")");
    if (r.left() < static_cast<size_t>(len))
      return fail("truncated in the bytes of " + at);
    float score;
    std::memcpy(&score, &scoreBits, sizeof(score));
    t.pieces.emplace_back(reinterpret_cast<const char *>(&bytes[r.pos]), len);
    t.scores.push_back(score);
    r.pos += len;
    if (t.pieces.size() > INT32_MAX / 2)
      return fail("too many tokens");
  }
  if (t.pieces.empty())
    return fail("no tokens");
  // encode() emits kBos and falls back to kUnk: both must be ids.
  if (t.vocabSize() <= kEos)
    return fail("holds " + std::to_string(t.vocabSize()) +
                " tokens; llama2.c's first three are <unk>, <s> and </s>");
  if (expectedVocab > 0 && t.vocabSize() != expectedVocab)
    return fail("holds " + std::to_string(t.vocabSize()) +
                " tokens, the model expects " + std::to_string(expectedVocab));
  // The lowest id wins for a duplicated piece, so lookups are deterministic.
  for (int32_t id = 0; id < t.vocabSize(); ++id)
    t.ids.emplace(t.pieces[id], id);
  return t;
}

int32_t Tokenizer::lookup(const std::string &s) const {
  auto it = ids.find(s);
  return it == ids.end() ? -1 : it->second;
}

const std::string &Tokenizer::piece(int32_t id) const {
  static const std::string empty;
  return id >= 0 && id < vocabSize() ? pieces[id] : empty;
}

float Tokenizer::score(int32_t id) const {
  return id >= 0 && id < vocabSize() ? scores[id] : 0.0f;
}

std::vector<int32_t> Tokenizer::encode(const std::string &text,
                                       bool bos) const {
  // Initial symbols: " " (llama2.c's dummy prefix, only for non-empty text),
  // then one per UTF-8 character (a lead byte and at most 3 continuation
  // bytes), or one per byte where the character is not a token.
  std::vector<int32_t> sym;
  if (!text.empty()) {
    int32_t space = lookup(" ");
    if (space < 0 && ranked_ && byteIds_[' '] >= 0)
      space = byteIds_[' '];
    sym.push_back(space >= 0 ? space : unk_);
  }
  std::string chr;
  for (size_t i = 0; i < text.size(); ++i) {
    chr.push_back(text[i]);
    bool nextContinues =
        i + 1 < text.size() &&
        (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (nextContinues && chr.size() < 4)
      continue;
    int32_t id = lookup(chr);
    if (id >= 0) {
      sym.push_back(id);
    } else {
      // Without the 256 byte tokens (never in llama2.c files) fall back to
      // <unk> rather than emit an out-of-range id.
      for (unsigned char c : chr)
        if (ranked_)
          sym.push_back(byteIds_[c] >= 0 ? byteIds_[c] : unk_);
        else
          sym.push_back(c + 3 < vocabSize() ? c + 3 : kUnk);
    }
    chr.clear();
  }

  // Symbols form a linked list; a merge keeps the left index, so list order
  // is index order and "leftmost" is "smallest left index".
  int32_t n = static_cast<int32_t>(sym.size());
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Pair {
    float score;
    int32_t left, right, leftTok, rightTok, merged;
  };
  auto worse = [](const Pair &a, const Pair &b) {
    if (a.score != b.score)
      return a.score < b.score;
    return a.left > b.left;
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0)
      return;
    if (ranked_) {
      auto it = merges_.find(uint64_t(uint32_t(sym[left])) << 32 |
                             uint32_t(sym[right]));
      if (it != merges_.end())
        queue.push({-float(it->second.first), left, right, sym[left],
                    sym[right], it->second.second});
      return;
    }
    int32_t merged = lookup(piece(sym[left]) + piece(sym[right]));
    if (merged < 0 || !(scores[merged] > kMinMergeScore))
      return;
    queue.push({scores[merged], left, right, sym[left], sym[right], merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    push(i, i + 1);
  while (!queue.empty()) {
    Pair p = queue.top();
    queue.pop();
    // Stale when either side merged since the pair was queued.
    if (next[p.left] != p.right || sym[p.left] != p.leftTok ||
        sym[p.right] != p.rightTok)
      continue;
    sym[p.left] = p.merged;
    next[p.left] = next[p.right];
    if (next[p.right] >= 0)
      prev[next[p.right]] = p.left;
    next[p.right] = -2; // Dead: matches no queued pair's `right`.
    push(prev[p.left], p.left);
    push(p.left, next[p.left]);
  }

  std::vector<int32_t> out;
  if (bos && bos_ >= 0)
    out.push_back(bos_);
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i])
    out.push_back(sym[i]);
  return out;
}

std::string Tokenizer::decode(int32_t previous, int32_t token) const {
  std::string p = piece(token);
  if (previous == bos_ && !p.empty() && p[0] == ' ')
    p.erase(0, 1);
  if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && isHex(p[3]) &&
      isHex(p[4]) && p[5] == '>')
    return std::string(1,
                       static_cast<char>(hexValue(p[3]) * 16 + hexValue(p[4])));
  return p;
}

namespace {

/// SentencePiece's space, U+2581.
const std::string kMetaSpace = "\xE2\x96\x81";

std::string spacesFromMeta(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, kMetaSpace) == 0) {
      out += ' ';
      i += 3;
    } else {
      out += s[i++];
    }
  }
  return out;
}

/// Whether the normalizer and pre-tokenizer are SentencePiece's: spaces
/// become "▁" and one "▁" is prepended, the text is not split otherwise.
/// Else a one-line description of what they are.
std::string sentencePieceStyle(const nlohmann::json &j) {
  auto type = [](const nlohmann::json &v) {
    return v.is_object() && v.contains("type") && v["type"].is_string()
               ? v["type"].get<std::string>()
               : std::string();
  };
  const nlohmann::json null;
  const nlohmann::json &norm =
      j.contains("normalizer") ? j["normalizer"] : null;
  const nlohmann::json &pre =
      j.contains("pre_tokenizer") ? j["pre_tokenizer"] : null;
  if (type(pre) == "ByteLevel" ||
      (type(pre) == "Sequence" &&
       pre.dump().find("\"ByteLevel\"") != std::string::npos))
    return "a byte-level BPE (as Llama 3's and Qwen2's)";
  bool prepend = false, replace = false;
  if (type(norm) == "Sequence" && norm.contains("normalizers") &&
      norm["normalizers"].is_array()) {
    for (const nlohmann::json &n : norm["normalizers"]) {
      if (type(n) == "Prepend" && n.value("prepend", "") == kMetaSpace)
        prepend = true;
      else if (type(n) == "Replace" && n.contains("pattern") &&
               n["pattern"].is_object() &&
               n["pattern"].value("String", "") == " " &&
               n.value("content", "") == kMetaSpace)
        replace = true;
      else
        return "normalizer '" + type(n) + "'";
    }
  } else if (!norm.is_null()) {
    return "normalizer '" + type(norm) + "'";
  }
  if (type(pre) == "Metaspace" && pre.value("replacement", "") == kMetaSpace &&
      pre.value("prepend_scheme", "always") != "never" &&
      !pre.value("split", false) && !prepend && !replace)
    return "";
  if (!pre.is_null())
    return "pre_tokenizer '" + type(pre) + "'";
  if (prepend && replace)
    return "";
  return "a normalizer without SentencePiece's \"▁\" for spaces";
}

} // namespace

std::optional<Tokenizer> Tokenizer::loadJson(const std::string &path,
                                             int32_t modelVocab,
                                             std::string *error) {
  std::string localErr;
  std::string &err = error ? *error : localErr;
  std::vector<unsigned char> bytes;
  if (!readFile(path, bytes, err))
    return std::nullopt;
  auto fail = [&](const std::string &msg) {
    err = "tokenizer '" + path + "': " + msg;
    return std::nullopt;
  };
  using nlohmann::json;
  json j = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail("not a JSON object");
  if (!j.contains("model") || !j["model"].is_object())
    return fail("no 'model' object");
  const json &m = j["model"];
  std::string type = m.value("type", std::string("BPE"));
  if (!m.contains("type") && !m.contains("merges"))
    type = "(untyped, without merges)";
  if (type != "BPE")
    return fail("model type '" + type +
                "' is not supported (SentencePiece-style BPE only)");
  std::string style = sentencePieceStyle(j);
  if (!style.empty())
    return fail(style + " is not supported (SentencePiece-style BPE only; "
                        "kvq-run --tokens takes token ids)");
  if (!m.contains("vocab") || !m["vocab"].is_object())
    return fail("model.vocab is not an object");

  // Ids: the vocabulary and the added tokens, dense from 0.
  std::vector<std::string> pieces;
  std::vector<bool> set;
  auto place = [&](const std::string &piece, const json &id) -> bool {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (1u << 24)) {
      fail("token '" + piece.substr(0, 40) + "' has id " + id.dump() +
           ", not an integer in [0, 2^24)");
      return false;
    }
    size_t i = size_t(id.get<uint64_t>());
    if (i >= pieces.size()) {
      pieces.resize(i + 1);
      set.resize(i + 1, false);
    }
    if (set[i] && pieces[i] != piece) {
      fail("id " + std::to_string(i) + " is both '" + pieces[i].substr(0, 40) +
           "' and '" + piece.substr(0, 40) + "'");
      return false;
    }
    pieces[i] = piece;
    set[i] = true;
    return true;
  };
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it)
    if (!place(spacesFromMeta(it.key()), it.value()))
      return std::nullopt;
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json &a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") ||
          !a["content"].is_string() || !a.contains("id"))
        return fail("an added_tokens entry lacks content or id");
      if (!place(spacesFromMeta(a["content"].get<std::string>()), a["id"]))
        return std::nullopt;
    }
  for (size_t i = 0; i < set.size(); ++i)
    if (!set[i])
      return fail("no token has id " + std::to_string(i));
  if (pieces.empty())
    return fail("no tokens");
  if (modelVocab > 0 && int64_t(pieces.size()) > modelVocab)
    return fail("holds " + std::to_string(pieces.size()) +
                " tokens, more than the model's " + std::to_string(modelVocab));

  Tokenizer t;
  t.ranked_ = true;
  t.pieces = pieces;
  t.scores.assign(pieces.size(), 0.0f);
  for (int32_t id = 0; id < t.vocabSize(); ++id)
    t.ids.emplace(t.pieces[id], id);
  t.unk_ = -1;
  if (m.contains("unk_token") && m["unk_token"].is_string())
    t.unk_ = t.lookup(spacesFromMeta(m["unk_token"].get<std::string>()));
  t.byteIds_.assign(256, -1);
  if (m.value("byte_fallback", false))
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      t.byteIds_[size_t(b)] = t.lookup(name);
    }
  if (t.unk_ < 0) {
    // Every character must then have a token: bytes fall back.
    for (int b = 0; b < 256; ++b)
      if (t.byteIds_[size_t(b)] < 0)
        return fail("neither an unk_token nor the byte-fallback token of "
                    "every byte (<0x00> .. <0xFF>)");
  }

  // Merges: "left right" (older files) or ["left", "right"].
  if (!m.contains("merges") || !m["merges"].is_array())
    return fail("model.merges is not an array");
  int32_t rank = 0;
  for (const json &mg : m["merges"]) {
    std::string left, right;
    if (mg.is_string()) {
      std::string text = mg.get<std::string>();
      size_t sp = text.find(' ');
      if (sp == std::string::npos ||
          text.find(' ', sp + 1) != std::string::npos)
        return fail("merge '" + text.substr(0, 40) + "' is not 'left right'");
      left = text.substr(0, sp);
      right = text.substr(sp + 1);
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() &&
               mg[1].is_string()) {
      left = mg[0].get<std::string>();
      right = mg[1].get<std::string>();
    } else {
      return fail("merge " + mg.dump().substr(0, 40) +
                  " is neither 'left right' nor [left, right]");
    }
    left = spacesFromMeta(left);
    right = spacesFromMeta(right);
    int32_t a = t.lookup(left), b = t.lookup(right), c = t.lookup(left + right);
    if (a < 0 || b < 0 || c < 0)
      return fail("merge '" + left + "' + '" + right + "' (rank " +
                  std::to_string(rank) +
                  ") names a piece not in the vocabulary");
    // A repeated pair keeps its first (lowest) rank.
    t.merges_.emplace(uint64_t(uint32_t(a)) << 32 | uint32_t(b),
                      std::make_pair(rank, c));
    ++rank;
  }

  // BOS: the special token the post-processor puts before the text.
  t.bos_ = -1;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const json &pp = j["post_processor"];
    if (pp.value("type", "") == "TemplateProcessing" && pp.contains("single") &&
        pp["single"].is_array() && !pp["single"].empty() &&
        pp["single"][0].is_object() &&
        pp["single"][0].contains("SpecialToken")) {
      const json &st = pp["single"][0]["SpecialToken"];
      if (st.is_object() && st.contains("id") && st["id"].is_string()) {
        t.bos_ = t.lookup(st["id"].get<std::string>());
        if (t.bos_ < 0)
          return fail("post_processor puts '" +
                      st["id"].get<std::string>().substr(0, 40) +
                      "' first, which is not a token");
      }
    }
  }
  t.eos_ = t.lookup("</s>");
  return t;
}

} // namespace kvq::model
