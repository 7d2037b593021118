//===- convert_avx2.cpp - F16C conversion of f32 K/V input ----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_cache_update converts f32 input to fp16 before anything else; the
// branch-free integer reference (floatToHalfN) runs at a fraction of the
// copy rate, the F16C instruction at about the copy rate. Its rounding is
// given in the instruction (nearest even, as the reference; MXCSR.RC is not
// read), fp16 subnormals are produced exactly, and the only difference from
// the reference is a NaN's payload, which is made the reference's quiet NaN
// of the same sign before converting.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <immintrin.h>

namespace {

KVQ_AVX2 void floatToHalfNAvx2(const float *src, int64_t n, uint16_t *dst) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  // 0x7fc00000 converts to 0x7e00, floatToHalf's NaN.
  const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    x = _mm256_blendv_ps(x, _mm256_or_ps(_mm256_and_ps(x, sign), quiet), nan);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT |
                                            _MM_FROUND_NO_EXC));
  }
  kvq::floatToHalfN(src + i, n - i, dst + i);
}

} // namespace

void kvq::x86::fillConvertAvx2(KernelTable &t) {
  t.floatToHalfN = floatToHalfNAvx2;
}
