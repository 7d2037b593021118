//===- avx512_util.h - Shared helpers of the AVX-512 kernels ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Sixteen-lane loads, code narrowing and the 16x16 dword transpose used by
// the AVX-512 kernels. Like avx2_util.h, every function carries the target
// attribute, so nothing AVX-512 runs before the cpuid check
// (table_avx2.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_X86_AVX512_UTIL_H
#define KVQ_RUNTIME_X86_AVX512_UTIL_H

#include "kvq/runtime.h"
#include "x86_target.h"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace kvq {
namespace avx512 {

/// Sixteen consecutive elements x[i..i+16) of an fp16 or f32 buffer.
KVQ_AVX512 inline __m512 load16(const void *x, kvq_dtype dtype, int64_t i) {
  if (dtype == KVQ_DTYPE_F16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(
        static_cast<const uint16_t *>(x) + i)));
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

/// pick(std::integral_constant<int, B>{}) for the code width B = bits
/// among Widths, a null kernel for any other width: how the quantizers
/// turn a run-time width into their specialised kernel.
template <int... Widths, class Pick>
auto kernelForBits(int bits, Pick pick)
    -> decltype(pick(std::integral_constant<int, 2>{})) {
  decltype(pick(std::integral_constant<int, 2>{})) kernel = nullptr;
  ((bits == Widths ? (kernel = pick(std::integral_constant<int, Widths>{}))
                   : kernel),
   ...);
  return kernel;
}

} // namespace avx512
} // namespace kvq

#endif // KVQ_RUNTIME_X86_AVX512_UTIL_H
