//===- bitpack.h - LSB-first packing of b-bit codes -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The packed code layout of runtime.h: element i occupies bits [i*b, i*b+b)
// of an LSB-first bit stream. One layout for every width keeps 3-bit codes
// dense (8 codes in 3 bytes) without a special format.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_BITPACK_H
#define KVQ_RUNTIME_LAYOUT_BITPACK_H

#include <cstdint>

namespace kvq {

/// Bytes holding n codes of `bits` bits.
/// ceil(n * bits / 8) for n >= 0 and bits in [1, 8], without forming
/// n * bits (which overflows for n near INT64_MAX): with n = 8q + r it is
/// q * bits + ceil(r * bits / 8).
inline int64_t packedBytes(int64_t n, int bits) {
  return (n / 8) * bits + ((n % 8) * bits + 7) / 8;
}

/// Pack n codes (each < 2^bits) into packedBytes(n, bits) bytes of out.
void packCodesRef(const uint8_t *codes, int64_t n, int bits, uint8_t *out);

/// Unpack n codes from a packed stream.
void unpackCodesRef(const uint8_t *packed, int64_t n, int bits, uint8_t *codes);

/// Word-at-a-time versions of packCodesRef / unpackCodesRef (same bytes),
/// used by the SIMD kernel tables.
void packCodesSwar(const uint8_t *codes, int64_t n, int bits, uint8_t *out);
void unpackCodesSwar(const uint8_t *packed, int64_t n, int bits,
                     uint8_t *codes);

/// Code i of a packed stream (random access, used by row decoding).
inline uint8_t packedCodeAt(const uint8_t *packed, int64_t i, int bits) {
  int64_t bit = i * bits;
  int64_t byte = bit >> 3;
  int offset = static_cast<int>(bit & 7);
  uint32_t word = packed[byte];
  if (offset + bits > 8)
    word |= static_cast<uint32_t>(packed[byte + 1]) << 8;
  return static_cast<uint8_t>((word >> offset) & ((1u << bits) - 1u));
}

//===----------------------------------------------------------------------===//
// Nibble-major layout (KIVI key groups of 2- and 4-bit codes)
//===----------------------------------------------------------------------===//
//
// A block of `rows` rows of `cols` codes, each row read as cols*bits/4
// nibbles (4-bit: one code; 2-bit: codes 2i and 2i+1 as bits 0-1 and 2-3).
// Nibble i of row r is nibble i*rows + r of an LSB-first nibble stream, so
// the rows' nibble i sit side by side: one 32-bit word holds nibble i of
// eight consecutive rows, which is what the attention kernels need to put
// rows in vector lanes (AttendOps::dotNibbleRows). Same size as the
// row-major stream: packedBytes(rows * cols, bits).

/// Widths stored nibble-major: 2 and 4, when a row is whole nibbles.
inline bool nibbleMajorFits(int64_t cols, int bits) {
  return (bits == 2 || bits == 4) && (cols * bits) % 4 == 0;
}

/// Nibble k of an LSB-first nibble stream.
inline unsigned nibbleAt(const uint8_t *p, int64_t k) {
  return (p[k >> 1] >> ((k & 1) * 4)) & 0xfu;
}

/// Write rows x cols codes (row-major, one byte each, < 2^bits) nibble-major
/// into packedBytes(rows * cols, bits) bytes of out.
void packNibbleMajor(const uint8_t *codes, int64_t rows, int64_t cols, int bits,
                     uint8_t *out);

/// The inverse of packNibbleMajor: rows x cols codes, row-major, one byte
/// each.
void unpackNibbleMajor(const uint8_t *packed, int64_t rows, int64_t cols,
                       int bits, uint8_t *codes);

/// Row `row` of a nibble-major block of `rows` rows: its cols codes, one
/// byte each, as nibbleMajorCodeAt gives them column by column, in one
/// walk down the row's nibbles (the pre-RoPE key pass decodes the rows of
/// a tile that holds a sink so).
void unpackNibbleMajorRow(const uint8_t *packed, int64_t rows, int64_t row,
                          int64_t cols, int bits, uint8_t *codes);

/// Code (row, col) of a nibble-major block of `rows` rows.
inline uint8_t nibbleMajorCodeAt(const uint8_t *packed, int64_t rows,
                                 int64_t row, int64_t col, int bits) {
  const int64_t perNibble = 4 / bits;
  const unsigned x = nibbleAt(packed, (col / perNibble) * rows + row);
  return static_cast<uint8_t>((x >> ((col % perNibble) * bits)) &
                              ((1u << bits) - 1u));
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_BITPACK_H
