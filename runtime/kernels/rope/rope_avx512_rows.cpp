//===- rope_avx512_rows.cpp - Pre-RoPE key rows decoded in registers ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::ropeCodeRows and ropeHalfRows (contracts in kernels.h; the
// canonical score in runtime/cpu/rope_keys.h): the rotated scores of a
// head's key rows, pairs in the lanes (S_l's lane is pair i mod 16), four
// rows at a time and up to two query vectors per pass, so each row is
// decoded once per 16 pairs for both; the four rows' trees end in one
// transpose.
// - 3-bit KIVI codes (row-major): the pre-RoPE key pass used to decode
//   each token's whole row into floats (dequantCodes) and read them back
//   to score them (ropeScoresRows), at 32K tokens over half its time. Here
//   each 16 channels are decoded in a register from their 6 bytes.
// - fp16 rows: the portable ropeScoresHalfRows, generic in head_dim, style
//   and query count, spent most of its time around its four short loops
//   of 16 pairs; here the style is a template parameter and the loop
//   bounds are the kernel's own.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx512_util.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <cassert>
#include <immintrin.h>

using namespace kvq;
using kvq::avx512::codes3x16;
using kvq::avx512::halfs16;

namespace {

/// Channels c .. c + 15 (c % 16 == 0) of a 3-bit row as keys: code *
/// scale + zero, a product then a sum, as loadRow (codes3x16 reads exactly
/// the 16 codes' 6 bytes).
KVQ_AVX512 inline __m512 keys3x16(const uint8_t *row, const float *scale,
                                  const float *zero, int64_t c) {
  return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(codes3x16(row, c)),
                                     _mm512_loadu_ps(scale + c)),
                       _mm512_loadu_ps(zero + c));
}

/// The keys of a row of 3-bit codes, 16 channels at a time.
struct CodeKeys {
  const RopeCodeRows &a;
  KVQ_AVX512 __m512 operator()(int64_t t, int64_t c) const {
    return keys3x16(a.rows[t], a.scale, a.zero, c);
  }
};

/// The keys of an fp16 row, 16 channels at a time (exact conversion).
struct HalfKeys {
  const RopeHalfRows &a;
  KVQ_AVX512 __m512 operator()(int64_t t, int64_t c) const {
    return halfs16(a.rows[t], c);
  }
};

/// Pairs i .. i + 15 of row t: channels a in ka, b in kb.
template <bool INTERLEAVED, class Keys>
KVQ_AVX512 inline void pairKeys(const Keys &keys, int64_t t, int64_t i,
                                int64_t P, __m512 &ka, __m512 &kb) {
  if (!INTERLEAVED) {
    ka = keys(t, i);
    kb = keys(t, P + i);
    return;
  }
  const __m512 lo = keys(t, 2 * i), hi = keys(t, 2 * i + 16);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                         22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                        23, 25, 27, 29, 31);
  ka = _mm512_permutex2var_ps(lo, even, hi);
  kb = _mm512_permutex2var_ps(lo, odd, hi);
}

/// canonicalTree of four rows' S vectors: per row T = S_l + S_{l+8} and
/// U = T_l + T_{l+4}, then a transpose puts U_l of the four rows in one
/// vector per l, and (U_0 + U_2) + (U_1 + U_3): the same additions on the
/// same operands.
KVQ_AVX512 inline __m128 tree4(const __m512 S[4]) {
  __m128 u[4];
  for (int r = 0; r < 4; ++r) {
    const __m256 t = _mm256_add_ps(
        _mm512_castps512_ps256(S[r]),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(S[r]), 1)));
    u[r] = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  }
  _MM_TRANSPOSE4_PS(u[0], u[1], u[2], u[3]);
  return _mm_add_ps(_mm_add_ps(u[0], u[2]), _mm_add_ps(u[1], u[3]));
}

/// Rows t .. t + M - 1 against query vectors j0 .. j0 + NJ - 1: M x NJ
/// independent chains, each row decoded once per 16 pairs for all NJ.
template <int M, int NJ, bool INTERLEAVED, class Keys>
KVQ_AVX512 void scoreRows(const RopeRowsScore &a, const Keys &keys, int64_t t,
                          int64_t j0) {
  const int64_t P = a.d / 2;
  __m512 S[NJ][4];
  for (int jj = 0; jj < NJ; ++jj)
    for (int u = 0; u < 4; ++u)
      S[jj][u] = _mm512_setzero_ps();
  for (int64_t i = 0; i < P; i += 16) {
    __m512 ka[M], kb[M];
    for (int u = 0; u < M; ++u)
      pairKeys<INTERLEAVED>(keys, t + u, i, P, ka[u], kb[u]);
    for (int jj = 0; jj < NJ; ++jj) {
      const float *q = a.q + (j0 + jj) * a.qStride + i;
      const __m512 qa = _mm512_loadu_ps(q), qb = _mm512_loadu_ps(q + P),
                   qn = _mm512_loadu_ps(q + 2 * P);
      for (int u = 0; u < M; ++u) {
        const float *c = a.cos + (t + u) * P + i, *s = a.sin + (t + u) * P + i;
        const __m512 A = _mm512_fmadd_ps(qb, kb[u], _mm512_mul_ps(qa, ka[u]));
        const __m512 B = _mm512_fmadd_ps(qn, kb[u], _mm512_mul_ps(qb, ka[u]));
        S[jj][u] =
            _mm512_fmadd_ps(_mm512_loadu_ps(s), B,
                            _mm512_fmadd_ps(_mm512_loadu_ps(c), A, S[jj][u]));
      }
    }
  }
  for (int jj = 0; jj < NJ; ++jj) {
    alignas(16) float v[4];
    _mm_store_ps(v, tree4(S[jj]));
    for (int u = 0; u < M; ++u)
      a.out[(t + u) * a.outStride + j0 + jj] = v[u];
  }
}

/// Rows t .. t + M - 1 against every query vector, two at a time.
template <int M, bool INTERLEAVED, class Keys>
KVQ_AVX512 void scoreRowsAllQueries(const RopeRowsScore &a, const Keys &keys,
                                    int64_t t) {
  int64_t j = 0;
  for (; j + 2 <= a.nq; j += 2)
    scoreRows<M, 2, INTERLEAVED>(a, keys, t, j);
  if (j < a.nq)
    scoreRows<M, 1, INTERLEAVED>(a, keys, t, j);
}

/// All n rows, four at a time.
template <bool INTERLEAVED, class Keys>
KVQ_AVX512 void scoreAllRows(const RopeRowsScore &a, const Keys &keys) {
  int64_t t = 0;
  for (; t + 4 <= a.n; t += 4)
    scoreRowsAllQueries<4, INTERLEAVED>(a, keys, t);
  switch (a.n - t) {
  case 3:
    scoreRowsAllQueries<3, INTERLEAVED>(a, keys, t);
    break;
  case 2:
    scoreRowsAllQueries<2, INTERLEAVED>(a, keys, t);
    break;
  case 1:
    scoreRowsAllQueries<1, INTERLEAVED>(a, keys, t);
    break;
  default:
    break;
  }
}

template <class Keys>
KVQ_AVX512 void scoreAllRows(const RopeRowsScore &a, const Keys &keys) {
  if (a.interleaved)
    scoreAllRows<true>(a, keys);
  else
    scoreAllRows<false>(a, keys);
}

KVQ_AVX512 void ropeCodeRowsAvx512(const RopeCodeRows &a) {
  assert(a.bits == 3 && a.d % 32 == 0 && a.n >= 1 && a.n <= 16);
  scoreAllRows(a, CodeKeys{a});
}

KVQ_AVX512 void ropeHalfRowsAvx512(const RopeHalfRows &a) {
  assert(a.d % 32 == 0 && a.n >= 1 && a.n <= 16);
  scoreAllRows(a, HalfKeys{a});
}

} // namespace

void kvq::x86::fillRopeRowsAvx512(const AttendShape &s, AttendOps &ops) {
  if (s.keyBits == 3 && s.d % 32 == 0)
    ops.ropeCodeRows = ropeCodeRowsAvx512;
  if (s.d % 32 == 0)
    ops.ropeHalfRows = ropeHalfRowsAvx512;
}
