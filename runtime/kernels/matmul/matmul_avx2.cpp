//===- matmul_avx2.cpp - kvq_matmul on AVX2 + FMA + F16C ------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// matmul_body.h on 8-lane vectors: four registers hold a dot product's 32
// partial sums, so a tile of 3 weight rows (12 accumulators) leaves room
// for the operands in the 16 registers (decode). Prefill from 32 input
// rows takes its partial-sum vectors one pass at a time, in tiles of 3
// input rows x 4 weight rows (12 accumulators again): about 1.6-1.8x the
// 1 x 3 tile's speed on the Zen 5 CI guest (KVQ_KERNELS=avx2).
//
//===----------------------------------------------------------------------===//
#include "matmul.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <immintrin.h>

namespace {
struct Avx2 {
  using T = __m256;
  static constexpr int W = 8;
  static constexpr int kDecodeRows = 3, kTileM = 1, kTileN = 3;
  static constexpr int kPassM = 3, kPassN = 4;
  KVQ_AVX2 static T zero() { return _mm256_setzero_ps(); }
  KVQ_AVX2 static T loadF32(const float *p) { return _mm256_loadu_ps(p); }
  KVQ_AVX2 static T loadF16(const uint16_t *p) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  KVQ_AVX2 static T loadBf16(const uint16_t *p) {
    const __m256i wide = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  KVQ_AVX2 static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  KVQ_AVX2 static T add(T a, T b) { return _mm256_add_ps(a, b); }
  /// Lanes l + l + 4, then + 2, + 1.
  KVQ_AVX2 static float hsum(T v) {
    const __m128 q =
        _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
};
} // namespace

#define KVQ_MATMUL_TARGET KVQ_AVX2
#include "matmul_body.h"

KVQ_AVX2 void kvq::x86::matmulAvx2(const MatmulArgs &a, int64_t j0,
                                   int64_t j1) {
  matmul_body::kernel<Avx2>(a, j0, j1);
}
