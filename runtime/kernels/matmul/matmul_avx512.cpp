//===- matmul_avx512.cpp - kvq_matmul on AVX-512F -------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// matmul_body.h on 16-lane vectors: two registers hold a dot product's 32
// partial sums. Decode tiles are 4 weight rows (8 accumulators, each
// weight element loaded once); prefill tiles 4 input rows x 3 weight rows
// (24 accumulators, 29 of the 32 registers with the operands).
//
//===----------------------------------------------------------------------===//
#include "matmul.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <immintrin.h>

namespace {
struct Avx512 {
  using T = __m512;
  static constexpr int W = 16;
  static constexpr int kDecodeRows = 4, kTileM = 4, kTileN = 3;
  static constexpr int kPassM = 0, kPassN = 0;
  KVQ_AVX512 static T zero() { return _mm512_setzero_ps(); }
  KVQ_AVX512 static T loadF32(const float *p) { return _mm512_loadu_ps(p); }
  KVQ_AVX512 static T loadF16(const uint16_t *p) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  KVQ_AVX512 static T loadBf16(const uint16_t *p) {
    const __m512i wide = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  KVQ_AVX512 static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  KVQ_AVX512 static T add(T a, T b) { return _mm512_add_ps(a, b); }
  /// Lanes l + l + 8, then + 4, + 2, + 1.
  KVQ_AVX512 static float hsum(T v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi =
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 h = _mm256_add_ps(lo, hi);
    const __m128 q =
        _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
};
} // namespace

#define KVQ_MATMUL_TARGET KVQ_AVX512
#include "matmul_body.h"

KVQ_AVX512 void kvq::x86::matmulAvx512(const MatmulArgs &a, int64_t j0,
                                       int64_t j1) {
  matmul_body::kernel<Avx512>(a, j0, j1);
}
