//===- avx512_util.h - Shared helpers of the AVX-512 kernels ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Sixteen-lane loads, code narrowing, the 16x16 dword transpose, the codes
// of a 16-channel block and the accumulator tiles used by the AVX-512
// kernels. Like avx2_util.h, every function carries the target
// attribute, so nothing AVX-512 runs before the cpuid check
// (table_x86.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_X86_AVX512_UTIL_H
#define KVQ_RUNTIME_KERNELS_X86_AVX512_UTIL_H

#include "kvq/runtime.h"
#include "x86_kernels.h"
#include "x86_target.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kvq {
namespace avx512 {

/// Channels c .. c+15 of an fp16 row as floats (exact).
KVQ_AVX512 inline __m512 halfs16(const uint16_t *row, int64_t c) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + c)));
}

/// Sixteen consecutive elements x[i..i+16) of an fp16 or f32 buffer.
KVQ_AVX512 inline __m512 load16(const void *x, kvq_dtype dtype, int64_t i) {
  if (dtype == KVQ_DTYPE_F16)
    return halfs16(static_cast<const uint16_t *>(x), i);
  return _mm512_loadu_ps(static_cast<const float *>(x) + i);
}

/// Two vectors of sixteen int32 codes (each < 256) -> 32 bytes in order.
KVQ_AVX512 inline __m256i narrow16x2(__m512i a, __m512i b) {
  return _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm512_cvtepi32_epi8(a)), _mm512_cvtepi32_epi8(b),
      1);
}

/// Transposes 16 rows of 16 dwords in registers: r[w] becomes dword w of
/// rows 0..15 (unpacks within 128-bit lanes, then lane shuffles).
KVQ_AVX512 inline void transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + m], 128-bit lane k: dword 4k + m of rows 4g .. 4g + 3.
  for (int g = 0; g < 4; ++g) {
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i a = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88);
    const __m512i b = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xdd);
    const __m512i c = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
    const __m512i e = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xdd);
    r[m] = _mm512_shuffle_i32x4(a, c, 0x88);
    r[8 + m] = _mm512_shuffle_i32x4(a, c, 0xdd);
    r[4 + m] = _mm512_shuffle_i32x4(b, e, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(b, e, 0xdd);
  }
}

/// The codes of 16 channels c .. c + 15 of a packed row (c % 16 == 0, 2-4
/// bits) in "block order": lane 2k holds channel k and lane 2k + 1 channel
/// 8 + k. The codes of channels 0-7 and 8-15 sit in the two 32-bit halves
/// of one broadcast word (exactly the block's 2 * BITS bytes are read), so
/// one shift per lane extracts them. The bits above each code are left
/// in: enough for `vpermps`, which reads four index bits, over a table of
/// period 2^BITS.
template <int BITS>
KVQ_AVX512 inline __m512i blockIndex(const uint8_t *row, int64_t c) {
  static_assert(BITS >= 2 && BITS <= 4, "2- to 4-bit codes");
  uint64_t w = 0;
  std::memcpy(&w, row + c * BITS / 8, 2 * BITS); // 16 codes, 2 * BITS bytes
  constexpr int half = 8 * BITS;                 // bits of 8 codes
  const uint64_t lo = w & ((uint64_t{1} << half) - 1);
  const uint64_t hi = (w >> half) & ((uint64_t{1} << half) - 1);
  const __m512i shift = _mm512_setr_epi32(
      0, 0, BITS, BITS, 2 * BITS, 2 * BITS, 3 * BITS, 3 * BITS, 4 * BITS,
      4 * BITS, 5 * BITS, 5 * BITS, 6 * BITS, 6 * BITS, 7 * BITS, 7 * BITS);
  return _mm512_srlv_epi32(
      _mm512_set1_epi64(static_cast<int64_t>(lo | (hi << 32))), shift);
}

/// blockIndex with the bits above each code cleared: the codes themselves.
template <int BITS>
KVQ_AVX512 inline __m512i blockCodes(const uint8_t *row, int64_t c) {
  return _mm512_and_si512(blockIndex<BITS>(row, c),
                          _mm512_set1_epi32((1 << BITS) - 1));
}

/// The 16 codes of channels c .. c + 15 (c % 16 == 0) of a row of 3-bit
/// codes, in channel order: codes 0-7 and 8-15 are the four bytes from
/// c * 3 / 8 and the four from two bytes later, broadcast into the two
/// halves of one register, shifted per lane and masked (exactly the 6
/// bytes of the 16 codes are read).
KVQ_AVX512 inline __m512i codes3x16(const uint8_t *row, int64_t c) {
  const uint8_t *p = row + c / 8 * 3;
  uint32_t w0, w1;
  std::memcpy(&w0, p, 4);
  std::memcpy(&w1, p + 2, 4);
  const __m512i words =
      _mm512_mask_set1_epi32(_mm512_set1_epi32(static_cast<int32_t>(w0)),
                             0xFF00, static_cast<int32_t>(w1));
  const __m512i shift = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 8, 11, 14,
                                          17, 20, 23, 26, 29);
  return _mm512_and_si512(_mm512_srlv_epi32(words, shift),
                          _mm512_set1_epi32(7));
}

/// NJ query vectors x W channels of the accumulator plane in registers,
/// lanes in channel order, for the weighted-sum tiles whose rows come so
/// (codes3x16, halfs16).
template <int NJ, int W = 64> struct AccTile512InOrder {
  static constexpr int B = W / 16;
  __m512 a[NJ][B];
  KVQ_AVX512 void load(const float *acc, int64_t j0, int64_t c0, int64_t d) {
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        a[jj][b] = _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b);
  }
  KVQ_AVX512 void store(float *acc, int64_t j0, int64_t c0, int64_t d) const {
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b, a[jj][b]);
  }
};

/// NJ query vectors x W channels of the accumulator plane in registers,
/// lanes in block order (permuted on load and store, once per tile), for
/// the weighted-sum tiles that decode codes with blockIndex.
template <int NJ, int W = 64> struct AccTile512 {
  static constexpr int B = W / 16;
  __m512 a[NJ][B];
  KVQ_AVX512 void load(const float *acc, int64_t j0, int64_t c0, int64_t d) {
    const __m512i channelOfLane =
        _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        a[jj][b] = _mm512_permutexvar_ps(
            channelOfLane, _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b));
  }
  KVQ_AVX512 void store(float *acc, int64_t j0, int64_t c0, int64_t d) const {
    const __m512i laneOfChannel =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b,
                         _mm512_permutexvar_ps(laneOfChannel, a[jj][b]));
  }
};

/// acc[j0+jj][c0 .. c0+W) += ws[r*wsStride + (j0+jj)*groups + c/G] *
/// code_r[c] over the rows in order (axpyCodesRows: one FMA per element
/// and row); G is a multiple of 16, so one weight covers a register.
/// Codes::at(row, c) gives channels c .. c+15 as floats in the lane order
/// of the accumulator tile Acc (AccTile512 or AccTile512InOrder).
template <class Codes, template <int, int> class Acc> struct GroupRowsTile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *ws;
  int64_t wsStride, groups;
  int shift; ///< log2 G
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    constexpr int B = W / 16;
    Acc<NJ, W> t;
    t.load(acc, j0, c0, d);
    auto &a = t.a;
    for (int64_t r = 0; r < n; ++r) {
      const float *w = ws + r * wsStride + j0 * groups;
      for (int b = 0; b < B; ++b) {
        const int64_t c = c0 + 16 * b;
        const __m512 v = Codes::at(rows[r], c);
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][b] = _mm512_fmadd_ps(
              _mm512_set1_ps(w[jj * groups + (c >> shift)]), v, a[jj][b]);
      }
    }
    t.store(acc, j0, c0, d);
  }
};

using x86::kernelForBits; // x86_kernels.h

} // namespace avx512
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_X86_AVX512_UTIL_H
