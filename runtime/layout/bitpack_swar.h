//===- bitpack_swar.h - Word-at-a-time code packing -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Eight codes packed or unpacked in one 64-bit word (SWAR), in the layout of
// bitpack.h. Portable integer code, shared by the AVX2 and NEON kernel
// tables, which differ only in how they compute the codes.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_BITPACK_SWAR_H
#define KVQ_RUNTIME_LAYOUT_BITPACK_SWAR_H

#include <cstdint>
#include <cstring>

namespace kvq {

/// Eight byte codes (each < 2^bits) -> 8*bits bits, LSB first: three
/// shift-or steps halve the number of fields each time.
inline uint64_t compress8(uint64_t w, int bits) {
  if (bits == 8)
    return w;
  const uint64_t b = static_cast<uint64_t>(bits);
  const uint64_t m16 = (uint64_t{1} << (2 * b)) - 1;
  const uint64_t m32 = (uint64_t{1} << (4 * b)) - 1;
  const uint64_t m64 = (uint64_t{1} << (8 * b)) - 1;
  w = (w | (w >> (8 - b))) & (m16 * 0x0001000100010001ull);
  w = (w | (w >> (16 - 2 * b))) & (m32 * 0x0000000100000001ull);
  w = (w | (w >> (32 - 4 * b))) & m64;
  return w;
}

/// Inverse of compress8: 8*bits bits -> eight byte codes.
inline uint64_t expand8(uint64_t w, int bits) {
  if (bits == 8)
    return w;
  const uint64_t b = static_cast<uint64_t>(bits);
  const uint64_t m8 = (uint64_t{1} << b) - 1;
  const uint64_t m16 = (uint64_t{1} << (2 * b)) - 1;
  const uint64_t m32 = (uint64_t{1} << (4 * b)) - 1;
  w = (w | (w << (32 - 4 * b))) & (m32 * 0x0000000100000001ull);
  w = (w | (w << (16 - 2 * b))) & (m16 * 0x0001000100010001ull);
  w = (w | (w << (8 - b))) & (m8 * 0x0101010101010101ull);
  return w;
}

/// The `bits` bytes holding 8 codes that start at a byte boundary (fixed
/// size copies: a variable-length memcpy would be a library call per 8
/// codes).
inline uint64_t loadBytes(const uint8_t *p, int bits) {
  switch (bits) {
  case 2: {
    uint16_t w;
    std::memcpy(&w, p, 2);
    return w;
  }
  case 3: {
    uint16_t w;
    std::memcpy(&w, p, 2);
    return w | (static_cast<uint64_t>(p[2]) << 16);
  }
  case 4: {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  }
  default: {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  }
}

/// Store the low `bits` bytes of w (the inverse of loadBytes).
inline void storeBytes(uint8_t *p, uint64_t w, int bits) {
  switch (bits) {
  case 2: {
    uint16_t v = static_cast<uint16_t>(w);
    std::memcpy(p, &v, 2);
    return;
  }
  case 3: {
    uint16_t v = static_cast<uint16_t>(w);
    std::memcpy(p, &v, 2);
    p[2] = static_cast<uint8_t>(w >> 16);
    return;
  }
  case 4: {
    uint32_t v = static_cast<uint32_t>(w);
    std::memcpy(p, &v, 4);
    return;
  }
  default:
    std::memcpy(p, &w, 8);
  }
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_BITPACK_SWAR_H
