//===- avx2_util.h - Shared helpers of the AVX2+F16C kernels ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Loads, stores, code (un)packing and horizontal reductions used by the
// x86_64 kernel files. Every function carries the target attribute
// (x86_target.h says why).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_X86_AVX2_UTIL_H
#define KVQ_RUNTIME_KERNELS_X86_AVX2_UTIL_H

#include "bitpack_swar.h"
#include "kvq/runtime.h"
#include "x86_target.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kvq {
namespace avx2 {

/// Eight consecutive elements x[i..i+8) of an fp16 or f32 buffer as floats.
KVQ_AVX2 inline __m256 load8(const void *x, kvq_dtype dtype, int64_t i) {
  if (dtype == KVQ_DTYPE_F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(
        static_cast<const uint16_t *>(x) + i)));
  return _mm256_loadu_ps(static_cast<const float *>(x) + i);
}

/// Store eight floats as elements out[i..i+8) (fp16: round to nearest even,
/// what floatToHalf does).
KVQ_AVX2 inline void store8(void *out, kvq_dtype dtype, int64_t i, __m256 v) {
  if (dtype == KVQ_DTYPE_F16)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(static_cast<uint16_t *>(out) + i),
        _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else
    _mm256_storeu_ps(static_cast<float *>(out) + i, v);
}

KVQ_AVX2 inline float hmin(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

KVQ_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

KVQ_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Eight int32 lanes (each < 256) -> eight bytes in lane order.
KVQ_AVX2 inline uint64_t narrow8(__m256i v) {
  __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(v),
                                 _mm256_extracti128_si256(v, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(w16, w16)));
}

/// Eight byte codes -> eight int32 lanes.
KVQ_AVX2 inline __m256i widen8(uint64_t bytes) {
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)));
}

/// Write 8 codes (int32 lanes) for elements [e, e+8): packed (e*bits is a
/// byte boundary) or one byte per code.
KVQ_AVX2 inline void writeCodes8(uint8_t *codes, int layout, int64_t e,
                                 int bits, __m256i v) {
  uint64_t bytes = narrow8(v);
  if (layout == KVQ_CODES_UNPACKED) {
    std::memcpy(codes + e, &bytes, 8);
    return;
  }
  storeBytes(codes + e * bits / 8, compress8(bytes, bits), bits);
}

/// Four vectors of eight int32 codes -> 32 bytes in element order, each
/// clamped to [0, maxc8]: signed saturation to int16 then unsigned
/// saturation to bytes sends negative lanes to 0 (and anything >= 255 to
/// 255), vpminub applies the code range; vpermd undoes the per-lane
/// interleave of the two pack steps.
KVQ_AVX2 inline __m256i narrow32(__m256i a, __m256i b, __m256i c, __m256i d,
                                 __m256i maxc8) {
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_min_epu8(_mm256_permutevar8x32_epi32(
                             bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
                         maxc8);
}

/// Write 32 byte codes (each < 2^bits) for elements [e, e+32), packed
/// LSB first (e*bits is a byte boundary) or one byte per code. 2 and 4 bits
/// pack in vector registers: vpmaddubsw merges byte pairs into words
/// (c0 + c1 << b), vpmaddwd merges word pairs (2-bit), so every packed byte
/// ends up alone in a word or dword and one shuffle/pack gathers them.
KVQ_AVX2 inline void writeCodes32(uint8_t *codes, int layout, int64_t e,
                                  int bits, __m256i bytes) {
  if (layout == KVQ_CODES_UNPACKED || bits == 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes + e), bytes);
    return;
  }
  uint8_t *p = codes + e * bits / 8;
  if (bits == 2) {
    const __m256i w = _mm256_madd_epi16(
        _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x0401)),
        _mm256_set1_epi32(0x00100001));
    // The low byte of each dword: four per 128-bit lane.
    const __m256i g = _mm256_shuffle_epi8(
        w, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                            -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                            -1, -1, -1, -1));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(p),
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(g),
                                        _mm256_extracti128_si256(g, 1)));
    return;
  }
  if (bits == 4) {
    const __m256i w = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(p),
                     _mm_packus_epi16(_mm256_castsi256_si128(w),
                                      _mm256_extracti128_si256(w, 1)));
    return;
  }
  if (bits == 3) {
    // Byte pairs (c0 + c1 << 3), word pairs (12 bits per dword), dword
    // pairs (24 bits, eight codes, per qword); then the three low bytes of
    // each qword, six per 128-bit lane, twelve bytes stored exactly.
    const __m256i d = _mm256_madd_epi16(
        _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x0801)),
        _mm256_set1_epi32(0x00400001));
    const __m256i q =
        _mm256_or_si256(_mm256_and_si256(d, _mm256_set1_epi64x(0xfff)),
                        _mm256_srli_epi64(d, 20));
    const __m256i g = _mm256_shuffle_epi8(
        q, _mm256_setr_epi8(0, 1, 2, 8, 9, 10, -1, -1, -1, -1, -1, -1, -1, -1,
                            -1, -1, 0, 1, 2, 8, 9, 10, -1, -1, -1, -1, -1, -1,
                            -1, -1, -1, -1));
    const __m128i r =
        _mm_or_si128(_mm256_castsi256_si128(g),
                     _mm_slli_si128(_mm256_extracti128_si256(g, 1), 6));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(p), r);
    const uint32_t tail = static_cast<uint32_t>(_mm_extract_epi32(r, 2));
    std::memcpy(p + 8, &tail, 4);
    return;
  }
  // Other widths: eight codes at a time through the scalar shift-or packing.
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), bytes);
  for (int i = 0; i < 4; ++i)
    storeBytes(p + bits * i, compress8(lanes[i], bits), bits);
}

/// Sixteen 3-bit codes from the six bytes at p, which start on a byte
/// boundary: codes 0-7 are bits 0-23 of the word at p, codes 8-15 bits
/// 8-31 of the word at p + 2, so exactly those six bytes are read. Lane i
/// of lo holds code i, of hi code 8 + i, in its low three bits (the bits
/// above hold the following codes: mask them, or let vpermps ignore them).
KVQ_AVX2 inline void codes3x16(const uint8_t *p, __m256i &lo, __m256i &hi) {
  uint32_t w0, w1;
  std::memcpy(&w0, p, 4);
  std::memcpy(&w1, p + 2, 4);
  lo = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(w0)),
                         _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21));
  hi = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(w1)),
                         _mm256_setr_epi32(8, 11, 14, 17, 20, 23, 26, 29));
}

/// Read 8 codes of elements [e, e+8) as int32 lanes.
KVQ_AVX2 inline __m256i readCodes8(const uint8_t *codes, int layout, int64_t e,
                                   int bits) {
  if (layout == KVQ_CODES_UNPACKED) {
    uint64_t bytes;
    std::memcpy(&bytes, codes + e, 8);
    return widen8(bytes);
  }
  return widen8(expand8(loadBytes(codes + e * bits / 8, bits), bits));
}

/// A tile of accumulators (acc_tiles.h) in registers: a[jj][i] holds
/// acc[(j0 + jj) * d + c0 + 8 * i ..] for NJ queries and W channels.
template <int NJ, int W> struct AccTile {
  __m256 a[NJ][W / 8];

  KVQ_AVX2 void load(const float *acc, int64_t j0, int64_t c0, int64_t d) {
    for (int jj = 0; jj < NJ; ++jj)
      for (int i = 0; i < W / 8; ++i)
        a[jj][i] = _mm256_loadu_ps(acc + (j0 + jj) * d + c0 + 8 * i);
  }
  KVQ_AVX2 void store(float *acc, int64_t j0, int64_t c0, int64_t d) const {
    for (int jj = 0; jj < NJ; ++jj)
      for (int i = 0; i < W / 8; ++i)
        _mm256_storeu_ps(acc + (j0 + jj) * d + c0 + 8 * i, a[jj][i]);
  }
};

} // namespace avx2
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_X86_AVX2_UTIL_H
