//===- rope_avx512_nibble.cpp - Pre-RoPE KIVI keys by tables --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::ropeNibbleTiles (contract in kernels.h; the canonical score
// in runtime/cpu/rope_keys.h). The portable tile loop decodes both
// channels of a pair (a mask or shift, a conversion, a product and a sum
// each) and forms the pair's A and B with two products and two FMAs, per
// 16 tokens. With 2-bit codes a pair's two codes are 4 bits, so A and B
// over all 16 code pairs are two 16-entry tables, each one zmm register:
// built once per pair and query vector with the same operations (so the
// same bits), then looked up with `vpermps` for every tile of the call.
// 4-bit codes take three tables per pair (pairTables4): the products of
// channel a's levels with q_a and q_b, and channel b's levels.
// Tokens sit in the lanes in row order, as the angles do.
//
//===----------------------------------------------------------------------===//
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <cassert>
#include <cstring>
#include <immintrin.h>

using namespace kvq;

namespace {

/// Nibble n of the tile's 16 rows (8 bytes, row t in bits 4t..4t+3), one
/// row per lane in row order (only the low four bits are meaningful, which
/// is all vpermps reads).
KVQ_AVX512 inline __m512i rowNibbles(const uint8_t *word) {
  const __m512i half =
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i shift = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8,
                                          12, 16, 20, 24, 28);
  uint64_t w;
  std::memcpy(&w, word, 8);
  return _mm512_srlv_epi32(
      _mm512_permutexvar_epi32(half, _mm512_castsi128_si512(_mm_cvtsi64_si128(
                                         static_cast<long long>(w)))),
      shift);
}

/// Channel c's keys for the codes in `codes`: code * scale + zero, a
/// product, then a sum, as loadRow decodes them.
KVQ_AVX512 inline __m512 decodeKeys(__m512 codes, const float *scale,
                                    const float *zero, int64_t c) {
  return _mm512_add_ps(_mm512_mul_ps(codes, _mm512_set1_ps(scale[c])),
                       _mm512_set1_ps(zero[c]));
}

/// The tables of pair i against one query vector: entry e = x | y << 2
/// for channel a's code x and channel b's code y, with k = code * scale +
/// zero (a product, then a sum), A = fma(q_b, k_b, q_a * k_a) and
/// B = fma(-q_a, k_b, q_b * k_a): the canonical operations.
struct PairTables {
  __m512 A, B;
};

KVQ_AVX512 inline PairTables pairTables(const float *qa, const float *qb,
                                        const float *qn, int64_t i,
                                        const float *scale, const float *zero,
                                        int64_t ca, int64_t cb) {
  const __m512 x =
      _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
  const __m512 y =
      _mm512_setr_ps(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512 ka = decodeKeys(x, scale, zero, ca);
  const __m512 kb = decodeKeys(y, scale, zero, cb);
  const __m512 qbv = _mm512_set1_ps(qb[i]);
  return {_mm512_fmadd_ps(qbv, kb, _mm512_mul_ps(_mm512_set1_ps(qa[i]), ka)),
          _mm512_fmadd_ps(_mm512_set1_ps(qn[i]), kb, _mm512_mul_ps(qbv, ka))};
}

/// The canonical steps of pair i on chain acc for one tile: S = fma(c, A,
/// S), then S = fma(s, B, S), A and B looked up at each row's index.
KVQ_AVX512 inline __m512 pairStep(const PairTables &t, __m512i index,
                                  const float *cos, const float *sin,
                                  __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_loadu_ps(cos), _mm512_permutexvar_ps(index, t.A),
                        acc);
  return _mm512_fmadd_ps(_mm512_loadu_ps(sin),
                         _mm512_permutexvar_ps(index, t.B), acc);
}

/// 4-bit codes: a pair's two codes are 8 bits, too many for one table, so
/// three tables of 16 (one register each) hold the canonical operations'
/// operands: Pa[x] = q_a * k_a(x), Qa[x] = q_b * k_a(x) and Kb[y] = k_b(y)
/// (k = code * scale + zero, a product, then a sum); then A = fma(q_b,
/// Kb[y], Pa[x]) and B = fma(-q_a, Kb[y], Qa[x]), as canonical.
struct PairTables4 {
  __m512 Pa, Qa, Kb, qb, qn;
};

KVQ_AVX512 inline PairTables4 pairTables4(const float *qa, const float *qb,
                                          const float *qn, int64_t i,
                                          const float *scale, const float *zero,
                                          int64_t ca, int64_t cb) {
  const __m512 x =
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 ka = decodeKeys(x, scale, zero, ca);
  const __m512 qbv = _mm512_set1_ps(qb[i]);
  return {_mm512_mul_ps(_mm512_set1_ps(qa[i]), ka), _mm512_mul_ps(qbv, ka),
          decodeKeys(x, scale, zero, cb), qbv, _mm512_set1_ps(qn[i])};
}

/// pairStep for 4-bit codes: channel a's codes at ix, channel b's at iy.
KVQ_AVX512 inline __m512 pairStep4(const PairTables4 &t, __m512i ix, __m512i iy,
                                   const float *cos, const float *sin,
                                   __m512 acc) {
  const __m512 kb = _mm512_permutexvar_ps(iy, t.Kb);
  const __m512 A = _mm512_fmadd_ps(t.qb, kb, _mm512_permutexvar_ps(ix, t.Pa));
  const __m512 B = _mm512_fmadd_ps(t.qn, kb, _mm512_permutexvar_ps(ix, t.Qa));
  acc = _mm512_fmadd_ps(_mm512_loadu_ps(cos), A, acc);
  return _mm512_fmadd_ps(_mm512_loadu_ps(sin), B, acc);
}

/// The canonical tree over the chains of 16 tokens, S[l] holding chain l
/// of every token: T_l = S_l + S_{l+8}, U_l = T_l + T_{l+4}, then
/// (U_0 + U_2) + (U_1 + U_3), lane by lane.
KVQ_AVX512 inline __m512 canonicalTree16(const __m512 (&S)[16]) {
  __m512 T[8], U[4];
  for (int l = 0; l < 8; ++l)
    T[l] = _mm512_add_ps(S[l], S[l + 8]);
  for (int l = 0; l < 4; ++l)
    U[l] = _mm512_add_ps(T[l], T[l + 4]);
  return _mm512_add_ps(_mm512_add_ps(U[0], U[2]), _mm512_add_ps(U[1], U[3]));
}

/// One query vector over TILES tiles. Chains l0 .. l0 + 3 at a time (four
/// independent FMA chains per tile in flight); pair i goes to chain
/// i mod 16.
template <int TILES>
KVQ_AVX512 void scoreTiles(const RopeNibbleTiles &a, const float *qa,
                           int64_t j) {
  const int64_t P = a.d / 2, stride = a.rows / 2;
  const float *qb = qa + P, *qn = qb + P;
  const uint8_t *words = a.codes + a.row0 / 2 + a.nib0 * stride;
  // Nibble n of tile u: words + n * stride + u * 8 (16 rows = 8 bytes).
  __m512 S[TILES][16];
  for (int64_t l0 = 0; l0 < 16; l0 += 4) {
    __m512 acc[TILES][4];
    for (int u = 0; u < TILES; ++u)
      for (int c = 0; c < 4; ++c)
        acc[u][c] = _mm512_setzero_ps();
    for (int64_t i = l0; i < P; i += 16) {
      if (a.bits == 4) {
        // Pair p: channels (2p, 2p + 1) or (p, p + P), each its own nibble.
        for (int c = 0; c < 4 && i + c < P; ++c) {
          const int64_t p = i + c;
          const int64_t ca = a.interleaved ? 2 * p : p;
          const int64_t cb = a.interleaved ? 2 * p + 1 : p + P;
          const PairTables4 t =
              pairTables4(qa, qb, qn, p, a.scale, a.zero, ca, cb);
          for (int u = 0; u < TILES; ++u)
            acc[u][c] = pairStep4(t, rowNibbles(words + ca * stride + u * 8),
                                  rowNibbles(words + cb * stride + u * 8),
                                  a.cos + (u * P + p) * 16,
                                  a.sin + (u * P + p) * 16, acc[u][c]);
        }
      } else if (a.interleaved) {
        // Pair p: channels 2p, 2p + 1, whose codes are nibble p itself.
        for (int c = 0; c < 4 && i + c < P; ++c) {
          const int64_t p = i + c;
          const PairTables t =
              pairTables(qa, qb, qn, p, a.scale, a.zero, 2 * p, 2 * p + 1);
          for (int u = 0; u < TILES; ++u)
            acc[u][c] = pairStep(t, rowNibbles(words + p * stride + u * 8),
                                 a.cos + (u * P + p) * 16,
                                 a.sin + (u * P + p) * 16, acc[u][c]);
        }
      } else {
        // Pairs p, p + 1 (p even): channels p, p + 1 in nibble p / 2 and
        // p + P, p + P + 1 in nibble (p + P) / 2 (P is even).
        for (int c = 0; c < 4 && i + c < P; c += 2) {
          const int64_t p = i + c;
          const PairTables t0 =
              pairTables(qa, qb, qn, p, a.scale, a.zero, p, p + P);
          const PairTables t1 =
              pairTables(qa, qb, qn, p + 1, a.scale, a.zero, p + 1, p + P + 1);
          const __m512i three = _mm512_set1_epi32(3),
                        twelve = _mm512_set1_epi32(12);
          for (int u = 0; u < TILES; ++u) {
            const __m512i na = rowNibbles(words + (p / 2) * stride + u * 8);
            const __m512i nb =
                rowNibbles(words + ((p + P) / 2) * stride + u * 8);
            // Index of pair p: (na & 3) | (nb & 3) << 2; of pair p + 1:
            // (na >> 2 & 3) | (nb & 12).
            const __m512i i0 = _mm512_or_si512(
                _mm512_and_si512(na, three),
                _mm512_and_si512(_mm512_slli_epi32(nb, 2), twelve));
            const __m512i i1 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi32(na, 2), three),
                _mm512_and_si512(nb, twelve));
            acc[u][c] = pairStep(t0, i0, a.cos + (u * P + p) * 16,
                                 a.sin + (u * P + p) * 16, acc[u][c]);
            acc[u][c + 1] =
                pairStep(t1, i1, a.cos + (u * P + p + 1) * 16,
                         a.sin + (u * P + p + 1) * 16, acc[u][c + 1]);
          }
        }
      }
    }
    for (int u = 0; u < TILES; ++u)
      for (int c = 0; c < 4; ++c)
        S[u][l0 + c] = acc[u][c];
  }
  alignas(64) float scores[16];
  for (int u = 0; u < TILES; ++u) {
    _mm512_store_ps(scores, canonicalTree16(S[u]));
    for (int64_t t = 0; t < 16; ++t)
      a.out[(u * 16 + t) * a.outStride + j] = scores[t];
  }
}

static_assert(kRopeNibbleMaxTiles == 4, "one case per tile count");

KVQ_AVX512 void ropeNibbleTilesAvx512(const RopeNibbleTiles &a) {
  assert(a.tiles >= 1 && a.tiles <= kRopeNibbleMaxTiles && a.d % 4 == 0 &&
         (a.bits == 2 || a.bits == 4));
  for (int64_t j = 0; j < a.nq; ++j) {
    const float *q = a.q + j * a.qStride;
    switch (a.tiles) {
    case 1:
      scoreTiles<1>(a, q, j);
      break;
    case 2:
      scoreTiles<2>(a, q, j);
      break;
    case 3:
      scoreTiles<3>(a, q, j);
      break;
    default:
      scoreTiles<4>(a, q, j);
      break;
    }
  }
}

} // namespace

void kvq::x86::fillRopeNibbleAvx512(const AttendShape &s, AttendOps &ops) {
  if ((s.keyBits == 2 || s.keyBits == 4) && s.d % 4 == 0)
    ops.ropeNibbleTiles = ropeNibbleTilesAvx512;
}
