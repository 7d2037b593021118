//===- bitpack.h - LSB-first packing of b-bit codes -------------*- C++ -*-===//
//
// The packed code layout of runtime.h: element i occupies bits [i*b, i*b+b)
// of an LSB-first bit stream. One layout for every width keeps 3-bit codes
// dense (8 codes in 3 bytes) without a special format.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_COMMON_BITPACK_H
#define KVQ_RUNTIME_COMMON_BITPACK_H

#include <cstdint>

namespace kvq {

/// Bytes holding n codes of `bits` bits.
inline int64_t packedBytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

/// Pack n codes (each < 2^bits) into packedBytes(n, bits) bytes of out.
void packCodesRef(const uint8_t *codes, int64_t n, int bits, uint8_t *out);

/// Unpack n codes from a packed stream.
void unpackCodesRef(const uint8_t *packed, int64_t n, int bits,
                    uint8_t *codes);

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

} // namespace kvq

#endif // KVQ_RUNTIME_COMMON_BITPACK_H
