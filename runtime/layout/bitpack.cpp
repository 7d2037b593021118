//===- bitpack.cpp - LSB-first packing of b-bit codes ---------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Scalar reference packers; widths 2, 4 and 8 take byte-aligned fast paths,
// 3 goes through a 32-bit accumulator.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "bitpack_swar.h"

#include <cstring>

void kvq::packCodesRef(const uint8_t *codes, int64_t n, int bits,
                       uint8_t *out) {
  if (n <= 0) // an empty vector's data() may be null, even for memcpy
    return;
  if (bits == 8) {
    std::memcpy(out, codes, static_cast<size_t>(n));
    return;
  }
  uint32_t mask = (1u << bits) - 1u;
  uint32_t acc = 0;
  int filled = 0;
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc |= (codes[i] & mask) << filled;
    filled += bits;
    while (filled >= 8) {
      out[o++] = static_cast<uint8_t>(acc & 0xffu);
      acc >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0)
    out[o] = static_cast<uint8_t>(acc & 0xffu); // unused high bits are 0
}

void kvq::unpackCodesRef(const uint8_t *packed, int64_t n, int bits,
                         uint8_t *codes) {
  if (n <= 0)
    return;
  if (bits == 8) {
    std::memcpy(codes, packed, static_cast<size_t>(n));
    return;
  }
  uint32_t mask = (1u << bits) - 1u;
  uint32_t acc = 0;
  int filled = 0;
  int64_t in = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (filled < bits) {
      acc |= static_cast<uint32_t>(packed[in++]) << filled;
      filled += 8;
    }
    codes[i] = static_cast<uint8_t>(acc & mask);
    acc >>= bits;
    filled -= bits;
  }
}

/// Eight codes per word; the tail goes through the reference.
void kvq::packCodesSwar(const uint8_t *codes, int64_t n, int bits,
                        uint8_t *out) {
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    uint64_t w;
    std::memcpy(&w, codes + i, 8);
    storeBytes(out + i * bits / 8, compress8(w, bits), bits);
  }
  if (n8 < n)
    packCodesRef(codes + n8, n - n8, bits, out + n8 * bits / 8);
}

void kvq::unpackCodesSwar(const uint8_t *packed, int64_t n, int bits,
                          uint8_t *codes) {
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    uint64_t w = expand8(loadBytes(packed + i * bits / 8, bits), bits);
    std::memcpy(codes + i, &w, 8);
  }
  if (n8 < n)
    unpackCodesRef(packed + n8 * bits / 8, n - n8, bits, codes + n8);
}

void kvq::packNibbleMajor(const uint8_t *codes, int64_t rows, int64_t cols,
                          int bits, uint8_t *out) {
  const int64_t perNibble = 4 / bits, nibbles = cols / perNibble;
  if (rows % 2 == 0) {
    // Nibble k = i * rows + r: with rows even, rows r and r + 1 (r even)
    // of a nibble column share byte k / 2, so each byte is written once,
    // whole, from two contiguous rows of codes (no clearing, no
    // read-modify-write; a KIVI key group is packed on every append that
    // completes one).
    for (int64_t r = 0; r < rows; r += 2) {
      const uint8_t *c0 = codes + r * cols, *c1 = c0 + cols;
      uint8_t *o = out + r / 2;
      const int64_t step = rows / 2;
      if (perNibble == 2)
        for (int64_t i = 0; i < nibbles; ++i)
          o[i * step] = static_cast<uint8_t>(
              c0[2 * i] | c0[2 * i + 1] << 2 |
              (c1[2 * i] | c1[2 * i + 1] << 2) << 4);
      else
        for (int64_t i = 0; i < nibbles; ++i)
          o[i * step] = static_cast<uint8_t>(c0[i] | c1[i] << 4);
    }
    return;
  }
  std::memset(out, 0, static_cast<size_t>(packedBytes(rows * cols, bits)));
  for (int64_t i = 0; i < nibbles; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t *c = codes + r * cols + i * perNibble;
      unsigned x = c[0];
      if (perNibble == 2)
        x |= static_cast<unsigned>(c[1]) << 2;
      const int64_t k = i * rows + r;
      out[k >> 1] |= static_cast<uint8_t>(x << ((k & 1) * 4));
    }
}

void kvq::unpackNibbleMajorRow(const uint8_t *packed, int64_t rows, int64_t row,
                               int64_t cols, int bits, uint8_t *codes) {
  const int64_t nibbles = cols * bits / 4;
  const unsigned mask = (1u << bits) - 1u;
  for (int64_t i = 0, k = row; i < nibbles; ++i, k += rows) {
    const unsigned x = nibbleAt(packed, k);
    if (bits == 4) {
      codes[i] = static_cast<uint8_t>(x);
    } else { // two 2-bit codes: channels 2i (bits 0-1) and 2i + 1
      codes[2 * i] = static_cast<uint8_t>(x & mask);
      codes[2 * i + 1] = static_cast<uint8_t>(x >> 2);
    }
  }
}

void kvq::unpackNibbleMajor(const uint8_t *packed, int64_t rows, int64_t cols,
                            int bits, uint8_t *codes) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      codes[r * cols + c] = nibbleMajorCodeAt(packed, rows, r, c, bits);
}
