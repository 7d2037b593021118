//===- avx512_util.h - Shared helpers of the AVX-512 quantizers -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Sixteen-lane loads and code narrowing used by the AVX-512 quantize
// kernels. Like avx2_util.h, every function carries the target attribute,
// so nothing AVX-512 runs before the cpuid check (table_avx2.cpp).
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
