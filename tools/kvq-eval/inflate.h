//===- inflate.h - DEFLATE decoder for np.savez_compressed -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A raw DEFLATE (RFC 1951) decoder for the members of .npz archives written
// by np.savez_compressed (zip method 8), written from the RFC for kvq-eval
// so that the tool needs no zlib (the arm64 cross build has none). Input is
// untrusted: every read is bounds-checked, every code set is validated
// (over-subscribed or empty literal codes, lengths or distances out of
// range, back-references before the start), and the output never grows
// past a limit the caller gives (the size the zip directory promises).
// Huffman codes are decoded bit by bit with the canonical-code counts
// (RFC 1951 section 3.2.2): simple, and fast enough for a dump read once.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_INFLATE_H
#define KVQ_TOOLS_KVQ_EVAL_INFLATE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvq::tio {

namespace inflate_detail {

constexpr int kMaxBits = 15;

/// Reads bits least-significant first, as DEFLATE packs them.
struct BitReader {
  const uint8_t *p;
  size_t n, pos = 0;
  uint32_t buf = 0;
  int have = 0;
  bool overrun = false;

  /// `count` (0..16) bits; past the end sets `overrun` and returns 0.
  uint32_t bits(int count) {
    while (have < count) {
      if (pos == n) {
        overrun = true;
        return 0;
      }
      buf |= static_cast<uint32_t>(p[pos++]) << have;
      have += 8;
    }
    const uint32_t v = buf & ((1u << count) - 1);
    buf >>= count;
    have -= count;
    return v;
  }
  void alignToByte() {
    buf = 0;
    have = 0;
  }
};

/// A canonical Huffman code: how many codes of each length, and the
/// symbols ordered by (length, symbol value).
struct Code {
  uint16_t count[kMaxBits + 1] = {};
  std::vector<uint16_t> symbol;

  /// Build from code lengths (0 = unused). False when over-subscribed.
  bool build(const uint8_t *lengths, int n) {
    for (int i = 0; i <= kMaxBits; ++i)
      count[i] = 0;
    for (int s = 0; s < n; ++s)
      ++count[lengths[s]];
    int left = 1; // codes still available at the current length
    for (int len = 1; len <= kMaxBits; ++len) {
      left = 2 * left - count[len];
      if (left < 0)
        return false;
    }
    int offset[kMaxBits + 2] = {};
    for (int len = 1; len <= kMaxBits; ++len)
      offset[len + 1] = offset[len] + count[len];
    symbol.assign(static_cast<size_t>(offset[kMaxBits + 1]), 0);
    for (int s = 0; s < n; ++s)
      if (lengths[s])
        symbol[static_cast<size_t>(offset[lengths[s]]++)] =
            static_cast<uint16_t>(s);
    count[0] = 0;
    return true;
  }

  /// Next symbol, or -1 for a bit pattern that is no code (or overrun).
  int decode(BitReader &br) const {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      code |= static_cast<int>(br.bits(1));
      if (br.overrun)
        return -1;
      const int c = count[len];
      if (code - first < c)
        return symbol[static_cast<size_t>(index + code - first)];
      index += c;
      first = (first + c) << 1;
      code <<= 1;
    }
    return -1;
  }
};

} // namespace inflate_detail

/// Decode the raw DEFLATE stream in[0, n) into `out`. The output may not
/// exceed `maxOut` bytes: past it the stream is an error, unless
/// `prefixOnly`, where decoding stops successfully at maxOut bytes (to read
/// a header without inflating the whole member). False with a one-line
/// reason on any malformed input.
inline bool inflate(const uint8_t *in, size_t n, size_t maxOut, bool prefixOnly,
                    std::vector<uint8_t> &out, std::string &err) {
  using namespace inflate_detail;
  static const uint16_t lengthBase[29] = {
      3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static const uint8_t lengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                          1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                          4, 4, 4, 4, 5, 5, 5, 5, 0};
  static const uint16_t distBase[30] = {
      1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
      33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
      1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  static const uint8_t distExtra[30] = {0, 0, 0,  0,  1,  1,  2,  2,  3,  3,
                                        4, 4, 5,  5,  6,  6,  7,  7,  8,  8,
                                        9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
  // Order in which the code-length code lengths are sent (section 3.2.7).
  static const uint8_t clOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                      11, 4,  12, 3, 13, 2, 14, 1, 15};
  out.clear();
  BitReader br{in, n};
  auto truncated = [&]() {
    err = "deflate stream is truncated";
    return false;
  };
  auto full = [&]() { return out.size() >= maxOut; };
  auto tooLong = [&]() {
    err = "deflate stream inflates past the " + std::to_string(maxOut) +
          " bytes the archive promises";
    return false;
  };
  Code lit, dist;
  bool last = false;
  while (!last) {
    last = br.bits(1) != 0;
    const uint32_t type = br.bits(2);
    if (br.overrun)
      return truncated();
    if (type == 0) { // stored
      br.alignToByte();
      if (n - br.pos < 4)
        return truncated();
      const uint32_t len = in[br.pos] | (in[br.pos + 1] << 8),
                     nlen = in[br.pos + 2] | (in[br.pos + 3] << 8);
      br.pos += 4;
      if ((len ^ 0xffffu) != nlen) {
        err = "deflate stored block has a bad length check";
        return false;
      }
      if (n - br.pos < len)
        return truncated();
      for (uint32_t i = 0; i < len; ++i) {
        if (full())
          return prefixOnly ? true : tooLong();
        out.push_back(in[br.pos + i]);
      }
      br.pos += len;
      continue;
    }
    if (type == 3) {
      err = "deflate block type 3 is reserved";
      return false;
    }
    uint8_t lengths[288 + 32] = {};
    int nlit = 288, ndist = 30;
    if (type == 1) { // fixed codes (section 3.2.6)
      for (int s = 0; s < 288; ++s)
        lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
      for (int s = 0; s < 30; ++s)
        lengths[288 + s] = 5;
    } else { // dynamic codes (section 3.2.7)
      nlit = static_cast<int>(br.bits(5)) + 257;
      ndist = static_cast<int>(br.bits(5)) + 1;
      const int nclen = static_cast<int>(br.bits(4)) + 4;
      if (br.overrun)
        return truncated();
      if (nlit > 286 || ndist > 30) {
        err = "deflate dynamic block declares " + std::to_string(nlit) +
              " literal/length and " + std::to_string(ndist) +
              " distance codes (at most 286 and 30)";
        return false;
      }
      uint8_t clLengths[19] = {};
      for (int i = 0; i < nclen; ++i)
        clLengths[clOrder[i]] = static_cast<uint8_t>(br.bits(3));
      if (br.overrun)
        return truncated();
      Code cl;
      if (!cl.build(clLengths, 19) || cl.symbol.empty()) {
        err = "deflate code-length code is invalid";
        return false;
      }
      uint8_t seq[286 + 30] = {};
      for (int i = 0; i < nlit + ndist;) {
        const int sym = cl.decode(br);
        if (sym < 0)
          return br.overrun ? truncated()
                            : (err = "bad deflate code length", false);
        if (sym < 16) {
          seq[i++] = static_cast<uint8_t>(sym);
          continue;
        }
        uint8_t value = 0;
        int repeat;
        if (sym == 16) {
          if (i == 0) {
            err = "deflate repeat code with no previous length";
            return false;
          }
          value = seq[i - 1];
          repeat = 3 + static_cast<int>(br.bits(2));
        } else if (sym == 17) {
          repeat = 3 + static_cast<int>(br.bits(3));
        } else {
          repeat = 11 + static_cast<int>(br.bits(7));
        }
        if (br.overrun)
          return truncated();
        if (repeat > nlit + ndist - i) {
          err = "deflate code lengths overrun their count";
          return false;
        }
        while (repeat--)
          seq[i++] = value;
      }
      if (seq[256] == 0) {
        err = "deflate block has no end-of-block code";
        return false;
      }
      for (int s = 0; s < nlit; ++s)
        lengths[s] = seq[s];
      for (int s = 0; s < ndist; ++s)
        lengths[288 + s] = seq[nlit + s];
    }
    if (!lit.build(lengths, nlit) || !dist.build(lengths + 288, ndist)) {
      err = "deflate block has an over-subscribed code";
      return false;
    }
    while (true) {
      const int sym = lit.decode(br);
      if (sym < 0)
        return br.overrun ? truncated()
                          : (err = "bad deflate literal/length code", false);
      if (sym < 256) {
        if (full())
          return prefixOnly ? true : tooLong();
        out.push_back(static_cast<uint8_t>(sym));
        continue;
      }
      if (sym == 256)
        break;
      if (sym > 285) {
        err = "deflate length code " + std::to_string(sym) + " is invalid";
        return false;
      }
      const int li = sym - 257;
      const size_t len = lengthBase[li] + br.bits(lengthExtra[li]);
      const int ds = dist.decode(br);
      if (ds < 0)
        return br.overrun ? truncated()
                          : (err = "bad deflate distance code", false);
      if (ds > 29) {
        err = "deflate distance code " + std::to_string(ds) + " is invalid";
        return false;
      }
      const size_t d = distBase[ds] + br.bits(distExtra[ds]);
      if (br.overrun)
        return truncated();
      if (d > out.size()) {
        err = "deflate back-reference reaches before the start of the data";
        return false;
      }
      for (size_t i = 0; i < len; ++i) {
        if (full())
          return prefixOnly ? true : tooLong();
        const uint8_t byte = out[out.size() - d];
        out.push_back(byte);
      }
    }
  }
  return true;
}

} // namespace kvq::tio

#endif // KVQ_TOOLS_KVQ_EVAL_INFLATE_H
