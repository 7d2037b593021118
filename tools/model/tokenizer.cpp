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
    sym.push_back(space >= 0 ? space : kUnk);
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
  if (bos)
    out.push_back(kBos);
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i])
    out.push_back(sym[i]);
  return out;
}

std::string Tokenizer::decode(int32_t previous, int32_t token) const {
  std::string p = piece(token);
  if (previous == kBos && !p.empty() && p[0] == ' ')
    p.erase(0, 1);
  if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && isHex(p[3]) &&
      isHex(p[4]) && p[5] == '>')
    return std::string(1,
                       static_cast<char>(hexValue(p[3]) * 16 + hexValue(p[4])));
  return p;
}

} // namespace kvq::model
