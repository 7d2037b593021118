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

#include "flags.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cwctype>
#include <locale.h>
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
  if (byteLevel_) {
    // Byte-level BPE: each pre-token's bytes merged on their own.
    std::vector<int32_t> out;
    if (bos && bos_ >= 0)
      out.push_back(bos_);
    for (const std::string &chunk : preTokenize(text, digitRun_)) {
      std::vector<int32_t> sym;
      for (unsigned char c : chunk)
        sym.push_back(byteIds_[c]);
      for (int32_t id : mergeSymbols(std::move(sym)))
        out.push_back(id);
    }
    return out;
  }
  std::vector<int32_t> sym;
  if (!text.empty()) {
    int32_t space = lookup(" ");
    if (space < 0 && !byteIds_.empty() && byteIds_[' '] >= 0)
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
        if (!byteIds_.empty())
          sym.push_back(byteIds_[c] >= 0 ? byteIds_[c] : unk_);
        else
          sym.push_back(c + 3 < vocabSize() ? c + 3 : kUnk);
    }
    chr.clear();
  }

  std::vector<int32_t> out;
  if (bos && bos_ >= 0)
    out.push_back(bos_);
  for (int32_t id : mergeSymbols(std::move(sym)))
    out.push_back(id);
  return out;
}

std::vector<int32_t> Tokenizer::mergeSymbols(std::vector<int32_t> sym) const {
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
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i])
    out.push_back(sym[i]);
  return out;
}

std::string Tokenizer::decode(int32_t previous, int32_t token) const {
  std::string p = piece(token);
  if (!byteLevel_ && previous == bos_ && !p.empty() && p[0] == ' ')
    p.erase(0, 1);
  if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && isHex(p[3]) &&
      isHex(p[4]) && p[5] == '>')
    return std::string(1,
                       static_cast<char>(hexValue(p[3]) * 16 + hexValue(p[4])));
  return p;
}

namespace {

/// Unicode classes of the byte-level pattern, from C.UTF-8's tables.
struct Classes {
  locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(nullptr));
  bool letter(uint32_t c) const {
    if (c < 0x80)
      return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    return loc && iswalpha_l(wint_t(c), loc);
  }
  bool number(uint32_t c) const { return c >= '0' && c <= '9'; }
  bool space(uint32_t c) const {
    if (c < 0x80)
      return c == ' ' || (c >= '\t' && c <= '\r');
    return loc && iswspace_l(wint_t(c), loc);
  }
  bool other(uint32_t c) const { return !letter(c) && !number(c) && !space(c); }
};

const Classes &classes() {
  static const Classes c;
  return c;
}

/// Code points of UTF-8 text with their byte offsets (a byte that starts
/// no valid sequence is a code point of its own, U+FFFD's class).
void decodeUtf8(const std::string &s, std::vector<uint32_t> &cps,
                std::vector<size_t> &at) {
  for (size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80         ? 1
                 : (b >> 5) == 6  ? 2
                 : (b >> 4) == 14 ? 3
                 : (b >> 3) == 30 ? 4
                                  : 0;
    uint32_t cp = len == 1   ? b
                  : len == 2 ? b & 0x1F
                  : len == 3 ? b & 0x0F
                             : b & 0x07;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = cp << 6 | (c & 0x3F);
    }
    if (!ok) {
      len = 1;
      cp = 0xFFFD;
    }
    cps.push_back(cp);
    at.push_back(i);
    i += len;
  }
  at.push_back(s.size());
}

/// GPT-2's map of the 256 bytes to printable characters (UTF-8).
const std::vector<std::string> &byteChars() {
  static const std::vector<std::string> map = [] {
    std::vector<std::string> m(256);
    uint32_t extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool kept = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                  (b >= 0xAE && b <= 0xFF);
      uint32_t cp = kept ? b : extra++;
      std::string u;
      if (cp < 0x80) {
        u += char(cp);
      } else {
        u += char(0xC0 | (cp >> 6));
        u += char(0x80 | (cp & 0x3F));
      }
      m[b] = u;
    }
    return m;
  }();
  return map;
}

/// A vocabulary string of a byte-level BPE as its bytes; false when a
/// character is not one of the map's.
bool bytesFromChars(const std::string &s, std::string &out) {
  static const std::unordered_map<std::string, char> back = [] {
    std::unordered_map<std::string, char> b;
    for (int i = 0; i < 256; ++i)
      b[byteChars()[size_t(i)]] = char(i);
    return b;
  }();
  out.clear();
  for (size_t i = 0; i < s.size();) {
    size_t len = (static_cast<unsigned char>(s[i]) & 0xE0) == 0xC0 ? 2 : 1;
    auto it = back.find(s.substr(i, len));
    if (it == back.end())
      return false;
    out += it->second;
    i += len;
  }
  return true;
}

/// The pre-tokenizer patterns kvq implements, and their digit runs.
const char *kLlama3Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char *kQwen2Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

} // namespace

std::vector<std::string> Tokenizer::preTokenize(const std::string &text,
                                                int digitRun) {
  const Classes &k = classes();
  std::vector<uint32_t> cp;
  std::vector<size_t> at;
  decodeUtf8(text, cp, at);
  const size_t n = cp.size();
  auto lower = [&](size_t i) {
    return i < n && cp[i] < 0x80 ? uint32_t(cp[i] | 0x20) : uint32_t(0);
  };
  auto crlf = [&](size_t i) { return cp[i] == '\r' || cp[i] == '\n'; };
  // The pattern's alternatives in order, first match wins (not longest).
  auto match = [&](size_t i) -> size_t {
    const uint32_t c = cp[i];
    if (c == '\'') { // (?i:'s|'t|'re|'ve|'m|'ll|'d)
      uint32_t a = lower(i + 1), b = lower(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return i + 2;
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
          (a == 'l' && b == 'l'))
        return i + 3;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    size_t j = i;
    if (!k.letter(c) && !k.number(c) && !crlf(i) && i + 1 < n &&
        k.letter(cp[i + 1]))
      j = i + 1;
    if (k.letter(cp[j])) {
      while (j < n && k.letter(cp[j]))
        ++j;
      return j;
    }
    if (k.number(c)) { // \p{N}{1,digitRun}
      j = i;
      while (j < n && k.number(cp[j]) && j - i < size_t(digitRun))
        ++j;
      return j;
    }
    // ' '?[^\s\p{L}\p{N}]+[\r\n]*
    j = c == ' ' && i + 1 < n && k.other(cp[i + 1]) ? i + 1 : i;
    if (k.other(cp[j])) {
      while (j < n && k.other(cp[j]))
        ++j;
      while (j < n && crlf(j))
        ++j;
      return j;
    }
    // c is a space: W = the run of spaces from i.
    size_t w = i;
    while (w < n && k.space(cp[w]))
      ++w;
    for (size_t t = w; t-- > i;) // \s*[\r\n]+
      if (crlf(t))
        return t + 1;
    if (w == n || w - i < 2) // \s+(?!\S), else \s+
      return std::max(w, i + 1);
    return w - 1;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < n;) {
    size_t j = match(i);
    out.push_back(text.substr(at[i], at[j] - at[i]));
    i = j;
  }
  return out;
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
  // Byte-level: Split(pattern) then ByteLevel without its own regex.
  int digitRun = 0;
  const json null;
  const json &pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : null;
  if (pre.dump().find("\"ByteLevel\"") != std::string::npos) {
    std::string pattern;
    bool shape =
        pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
        pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2;
    if (shape) {
      const json &split = pre["pretokenizers"][0];
      const json &bl = pre["pretokenizers"][1];
      shape =
          split.value("type", "") == "Split" &&
          split.value("behavior", "") == "Isolated" &&
          !split.value("invert", false) && split.contains("pattern") &&
          split["pattern"].is_object() && split["pattern"].contains("Regex") &&
          split["pattern"]["Regex"].is_string() &&
          bl.value("type", "") == "ByteLevel" &&
          !bl.value("add_prefix_space", false) && !bl.value("use_regex", true);
      if (shape)
        pattern = split["pattern"]["Regex"].get<std::string>();
    }
    if (!shape)
      return fail("a byte-level pre_tokenizer other than Split(pattern, "
                  "Isolated) then ByteLevel is not supported");
    if (pattern == kLlama3Pattern)
      digitRun = 3;
    else if (pattern == kQwen2Pattern)
      digitRun = 1;
    else
      return fail("pre-tokenizer pattern '" + pattern.substr(0, 60) +
                  "...' is not supported (Llama 3's and Qwen2's are)");
    const json &norm = j.contains("normalizer") ? j["normalizer"] : null;
    // NFC is taken as the identity: the text is expected composed.
    if (!norm.is_null() && norm.value("type", "") != "NFC")
      return fail("normalizer '" + norm.value("type", std::string("?")) +
                  "' of a byte-level BPE is not supported");
  } else {
    std::string style = sentencePieceStyle(j);
    if (!style.empty())
      return fail(style + " is not supported (SentencePiece-style or "
                          "byte-level BPE only; kvq-run --tokens takes token "
                          "ids)");
  }
  const bool byteLevel = digitRun > 0;
  // A vocabulary or merge string as the pieces are held: SentencePiece's
  // "▁" as a space, or byte-level characters as their bytes.
  std::string why;
  auto held = [&](const std::string &s, std::string &out) {
    if (!byteLevel) {
      out = spacesFromMeta(s);
      return true;
    }
    if (bytesFromChars(s, out))
      return true;
    why =
        "'" + s.substr(0, 40) + "' is not written in the byte-level characters";
    return false;
  };
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
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    std::string piece;
    if (!held(it.key(), piece))
      return fail("vocabulary entry " + why);
    if (!place(piece, it.value()))
      return std::nullopt;
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json &a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") ||
          !a["content"].is_string() || !a.contains("id"))
        return fail("an added_tokens entry lacks content or id");
      // Added tokens are written as themselves.
      std::string content = a["content"].get<std::string>();
      if (!place(byteLevel ? content : spacesFromMeta(content), a["id"]))
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
  t.byteLevel_ = byteLevel;
  t.digitRun_ = digitRun;
  if (byteLevel) {
    for (int b = 0; b < 256; ++b)
      if ((t.byteIds_[size_t(b)] = t.lookup(std::string(1, char(b)))) < 0)
        return fail("the byte-level vocabulary lacks byte " +
                    std::to_string(b) + " ('" + byteChars()[size_t(b)] + "')");
  } else if (m.value("byte_fallback", false))
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
    if (!held(std::string(left), left) || !held(std::string(right), right))
      return fail("merge " + why);
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
  std::vector<json> processors;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    processors.push_back(j["post_processor"]);
    if (j["post_processor"].value("type", "") == "Sequence" &&
        j["post_processor"].contains("processors") &&
        j["post_processor"]["processors"].is_array())
      for (const json &p : j["post_processor"]["processors"])
        processors.push_back(p);
  }
  for (const json &pp : processors) {
    if (!pp.is_object())
      continue;
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
  t.eos_ = -1;
  for (const char *eos : {"</s>", "<|end_of_text|>", "<|endoftext|>"})
    if (t.eos_ < 0)
      t.eos_ = t.lookup(eos);
  return t;
}

std::optional<Tokenizer> Tokenizer::fromTables(const VocabularyTables &v,
                                               int32_t modelVocab,
                                               const std::string &source,
                                               std::string *error) {
  std::string localErr;
  std::string &err = error ? *error : localErr;
  auto fail = [&](const std::string &msg) {
    err = source + ": tokenizer.ggml." + msg;
    return std::nullopt;
  };
  const bool spm = v.model == "llama";
  if (!spm && v.model != "gpt2")
    return fail("model '" + v.model.substr(0, 40) +
                "' is not supported (llama, gpt2)");
  const size_t n = v.tokens.size();
  if (n == 0)
    return fail("tokens is missing or empty");
  if (n > (1u << 24))
    return fail("tokens holds " + std::to_string(n) + " tokens: too many");
  if (modelVocab > 0 && int64_t(n) > modelVocab)
    return fail("tokens holds " + std::to_string(n) +
                " tokens, more than the model's " + std::to_string(modelVocab));
  if (spm && v.scores.size() != n)
    return fail("scores holds " + std::to_string(v.scores.size()) +
                " values for " + std::to_string(n) + " tokens");
  if (!v.tokenTypes.empty() && v.tokenTypes.size() != n)
    return fail("token_type holds " + std::to_string(v.tokenTypes.size()) +
                " values for " + std::to_string(n) + " tokens");
  for (const auto &[name, id] : {std::pair<const char *, int64_t>{"bos", v.bos},
                                 {"eos", v.eos},
                                 {"unknown", v.unk}})
    if (id != -1 && (id < 0 || id >= int64_t(n)))
      return fail(std::string(name) + "_token_id " + std::to_string(id) +
                  " is not a token id (" + std::to_string(n) + " tokens)");
  for (float sc : v.scores)
    if (!std::isfinite(sc))
      return fail("scores holds a value that is not finite");
  auto type = [&](size_t i) { return v.tokenTypes.empty() ? 1 : v.tokenTypes[i]; };
  constexpr int kControl = 3, kUserDefined = 4;

  Tokenizer t;
  t.pieces.resize(n);
  t.scores.assign(n, 0.0f);
  t.byteLevel_ = !spm;
  t.ranked_ = !spm;
  int digitRun = 0;
  if (!spm) {
    if (v.pre == "llama-bpe" || v.pre == "llama3")
      digitRun = 3;
    else if (v.pre == "qwen2")
      digitRun = 1;
    else
      return fail("pre '" + v.pre.substr(0, 40) +
                  "' is not supported for gpt2 (llama-bpe, llama3, qwen2)");
  }
  t.digitRun_ = digitRun > 0 ? digitRun : 3;
  for (size_t i = 0; i < n; ++i) {
    const std::string &tok = v.tokens[i];
    if (spm) {
      t.pieces[i] = spacesFromMeta(tok);
      t.scores[i] = v.scores[i];
    } else if (type(i) == kControl || type(i) == kUserDefined) {
      t.pieces[i] = tok; // special tokens are written as themselves
    } else if (!bytesFromChars(tok, t.pieces[i])) {
      return fail("tokens[" + std::to_string(i) + "] '" +
                  kvq::cli::printable(tok, 40) +
                  "' is not written in the byte-level characters");
    }
  }
  // Control tokens are never matched in text; the lowest id wins.
  for (size_t i = 0; i < n; ++i)
    if (type(i) != kControl)
      t.ids.emplace(t.pieces[i], int32_t(i));
  t.byteIds_.assign(256, -1);
  t.unk_ = int32_t(v.unk);
  if (spm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      t.byteIds_[size_t(b)] = t.lookup(name);
    }
    if (t.unk_ < 0)
      for (int b = 0; b < 256; ++b)
        if (t.byteIds_[size_t(b)] < 0)
          return fail("unknown_token_id is missing and the vocabulary lacks "
                      "byte-fallback tokens (<0x00> .. <0xFF>)");
  } else {
    for (int b = 0; b < 256; ++b)
      if ((t.byteIds_[size_t(b)] = t.lookup(std::string(1, char(b)))) < 0)
        return fail("tokens lacks byte " + std::to_string(b) + " ('" +
                    byteChars()[size_t(b)] + "')");
    int32_t rank = 0;
    for (const std::string &text : v.merges) {
      size_t sp = text.find(' ');
      std::string left, right;
      if (sp == std::string::npos ||
          text.find(' ', sp + 1) != std::string::npos ||
          !bytesFromChars(text.substr(0, sp), left) ||
          !bytesFromChars(text.substr(sp + 1), right))
        return fail("merges[" + std::to_string(rank) + "] '" +
                    kvq::cli::printable(text, 40) +
                    "' is not 'left right' in byte-level characters");
      int32_t a = t.lookup(left), b = t.lookup(right),
              c = t.lookup(left + right);
      if (a < 0 || b < 0 || c < 0)
        return fail("merges[" + std::to_string(rank) + "] '" +
                    kvq::cli::printable(text, 40) +
                    "' names a piece not in the vocabulary");
      t.merges_.emplace(uint64_t(uint32_t(a)) << 32 | uint32_t(b),
                        std::make_pair(rank, c));
      ++rank;
    }
    if (v.merges.empty())
      return fail("merges is missing or empty (gpt2)");
  }
  const bool addBos = v.addBos < 0 ? spm : v.addBos > 0;
  t.bos_ = addBos ? int32_t(v.bos) : -1;
  t.eos_ = int32_t(v.eos);
  return t;
}

} // namespace kvq::model
