//===- attend_x86_nibble.cpp - Key dots over nibble-major code blocks -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::dotNibbleRows for x86_64 (contract and canonical order in
// kernels.h). Rows sit in vector lanes: one 32-bit word of a nibble-major
// block holds nibble i of eight consecutive rows, so after one shift per
// lane each lane's low four bits index a 16-entry table of that nibble's
// terms (2-bit: two channels' codes; 4-bit: one channel's code). That is
// one shift, one table lookup and one addition per 16 (2-bit) codes, where
// decoding codes to floats took a shift, a permute and an FMA per 8.
//
// - AVX-512F: 16 rows per zmm, `vpermps` reads a whole 16-entry table;
//   query vectors go in pairs where there are several (GQA), each
//   nibble's words decoded once for both.
// - AVX2: 8 rows per ymm; no 16-entry permute, so the lanes compute the
//   terms with nibbleTerm's operations (termAvx2), as many vector uops per
//   code as the row-major float kernel.
// The tables are computed with the operations of nibbleTerm and summed in
// the canonical order, so both give the reference's bits.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include "nibble_tiles.h"

#include <algorithm>
#include <cassert>

using namespace kvq;

namespace {

//===----------------------------------------------------------------------===//
// AVX2: tiles of 8 rows
//===----------------------------------------------------------------------===//

/// Terms of nibble i for the 8 rows of a 32-bit word (lane t = row t).
/// AVX2 has no 16-entry float permute, so each lane computes nibbleTerm's
/// operations on the decoded codes (same bits as the tables):
/// - 2-bit: q[2i] * (x & 3) comes from a 4-entry product table by
///   `vpermilps` (which reads the low two bits of the shifted word), x >> 2
///   from {0,1,2,3} by a second one, then one FMA;
/// - 4-bit: x masked and converted, then one multiply.
template <int BITS>
KVQ_AVX2 inline __m256 termAvx2(const uint8_t *word, const float *q,
                                int64_t i) {
  uint32_t w;
  std::memcpy(&w, word, 4);
  const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(w));
  const __m256i lowShift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256 codes = _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3);
  if constexpr (BITS == 2) {
    const __m256 products =
        _mm256_mul_ps(_mm256_set1_ps(q[2 * i]), codes); // q[2i] * {0..3}
    const __m256 lo =
        _mm256_permutevar_ps(products, _mm256_srlv_epi32(x, lowShift));
    const __m256i hiShift = _mm256_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30);
    const __m256 hi =
        _mm256_permutevar_ps(codes, _mm256_srlv_epi32(x, hiShift));
    return _mm256_fmadd_ps(_mm256_set1_ps(q[2 * i + 1]), hi, lo);
  } else {
    const __m256i nib =
        _mm256_and_si256(_mm256_srlv_epi32(x, lowShift), _mm256_set1_epi32(15));
    return _mm256_mul_ps(_mm256_set1_ps(q[i]), _mm256_cvtepi32_ps(nib));
  }
}

/// Canonical sums of two tiles at once (eight addition chains in flight).
template <int BITS>
KVQ_AVX2 void twoTilesAvx2(TileWords a, TileWords b, const float *q, int64_t P,
                           __m256 &ra, __m256 &rb) {
  __m256 A[4], B[4];
  for (int u = 0; u < 4; ++u)
    A[u] = B[u] = _mm256_setzero_ps();
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      A[u] = _mm256_add_ps(
          A[u], termAvx2<BITS>(a.base + (i + u) * a.stride, q, i + u));
      B[u] = _mm256_add_ps(
          B[u], termAvx2<BITS>(b.base + (i + u) * b.stride, q, i + u));
    }
  ra = _mm256_add_ps(_mm256_add_ps(A[0], A[1]), _mm256_add_ps(A[2], A[3]));
  rb = _mm256_add_ps(_mm256_add_ps(B[0], B[1]), _mm256_add_ps(B[2], B[3]));
}

/// walkTilePairs' sums for AVX2: two tiles of 8 rows, one query vector.
struct TwoTilesAvx2 {
  int bits;
  int64_t P;
  KVQ_AVX2 void operator()(TileWords a, TileWords b, const float *q, float *va,
                           float *vb) const {
    __m256 sa, sb;
    if (bits == 2)
      twoTilesAvx2<2>(a, b, q, P, sa, sb);
    else
      twoTilesAvx2<4>(a, b, q, P, sa, sb);
    _mm256_storeu_ps(va, sa);
    _mm256_storeu_ps(vb, sb);
  }
};

/// Codes of nibble i for the 8 rows of a word, decoded once for two query
/// vectors (GQA): 2-bit x & 3 and x >> 2 as floats, or 4-bit x.
template <int BITS>
KVQ_AVX2 inline void decodeAvx2(const uint8_t *word, __m256 &lo, __m256 &hi) {
  uint32_t w;
  std::memcpy(&w, word, 4);
  const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(w));
  const __m256i lowShift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  if constexpr (BITS == 2) {
    const __m256 codes = _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3);
    const __m256i hiShift = _mm256_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30);
    lo = _mm256_permutevar_ps(codes, _mm256_srlv_epi32(x, lowShift));
    hi = _mm256_permutevar_ps(codes, _mm256_srlv_epi32(x, hiShift));
  } else {
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(x, lowShift),
                                             _mm256_set1_epi32(15)));
    hi = lo;
  }
}

/// Canonical sums of one tile for query vectors q0 and q1 = q0 + d: the
/// decode is shared, each query's term is nibbleTerm's operations.
template <int BITS>
KVQ_AVX2 void oneTileTwoQueriesAvx2(TileWords t, const float *q0, int64_t d,
                                    int64_t P, __m256 &r0, __m256 &r1) {
  const float *q1 = q0 + d;
  __m256 A[4], B[4];
  for (int u = 0; u < 4; ++u)
    A[u] = B[u] = _mm256_setzero_ps();
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      const int64_t k = i + u;
      __m256 lo, hi;
      decodeAvx2<BITS>(t.base + k * t.stride, lo, hi);
      if constexpr (BITS == 2) {
        A[u] = _mm256_add_ps(
            A[u],
            _mm256_fmadd_ps(_mm256_set1_ps(q0[2 * k + 1]), hi,
                            _mm256_mul_ps(_mm256_set1_ps(q0[2 * k]), lo)));
        B[u] = _mm256_add_ps(
            B[u],
            _mm256_fmadd_ps(_mm256_set1_ps(q1[2 * k + 1]), hi,
                            _mm256_mul_ps(_mm256_set1_ps(q1[2 * k]), lo)));
      } else {
        A[u] = _mm256_add_ps(A[u], _mm256_mul_ps(_mm256_set1_ps(q0[k]), lo));
        B[u] = _mm256_add_ps(B[u], _mm256_mul_ps(_mm256_set1_ps(q1[k]), lo));
      }
    }
  r0 = _mm256_add_ps(_mm256_add_ps(A[0], A[1]), _mm256_add_ps(A[2], A[3]));
  r1 = _mm256_add_ps(_mm256_add_ps(B[0], B[1]), _mm256_add_ps(B[2], B[3]));
}

/// oneTileTwoQueriesAvx2 for four query vectors q0 + j * d (four or more
/// query heads per KV head): each nibble's word is decoded once for all
/// four. Their 16 chains would not fit in the 16 registers, so chains 0 and
/// 1 of each vector run first (nibbles 0 and 1 mod 4), then chains 2 and 3:
/// the same chains summed the same way, (A0 + A1) + (A2 + A3).
template <int BITS>
KVQ_AVX2 void oneTileFourQueriesAvx2(TileWords t, const float *q0, int64_t d,
                                     int64_t P, __m256 (&r)[4]) {
  __m256 first[4];
  for (int phase = 0; phase < 2; ++phase) {
    __m256 A[4][2];
    for (int j = 0; j < 4; ++j)
      A[j][0] = A[j][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < P; i += 4)
      for (int u = 0; u < 2; ++u) {
        const int64_t k = i + 2 * phase + u;
        __m256 lo, hi;
        decodeAvx2<BITS>(t.base + k * t.stride, lo, hi);
        for (int j = 0; j < 4; ++j) {
          const float *q = q0 + j * d;
          if constexpr (BITS == 2)
            A[j][u] = _mm256_add_ps(
                A[j][u],
                _mm256_fmadd_ps(_mm256_set1_ps(q[2 * k + 1]), hi,
                                _mm256_mul_ps(_mm256_set1_ps(q[2 * k]), lo)));
          else
            A[j][u] =
                _mm256_add_ps(A[j][u], _mm256_mul_ps(_mm256_set1_ps(q[k]), lo));
        }
      }
    for (int j = 0; j < 4; ++j) {
      const __m256 s = _mm256_add_ps(A[j][0], A[j][1]);
      r[j] = phase == 0 ? s : _mm256_add_ps(first[j], s);
      first[j] = s;
    }
  }
}

KVQ_AVX2 void dotNibbleRowsAvx2(const NibbleRowsDot &a) {
  const uint8_t *codes = a.codes;
  const int64_t n = a.n, r0 = a.r0, m = a.m, nib0 = a.nib0;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  assert(nibbleTiles(bits, d));
  const int64_t P = d * bits / 4;
  uint64_t buf[kMaxTileNibbles];
  alignas(32) float va[8], vb[8];
  int64_t j = 0;
  // Query vectors in fours, then in pairs (GQA): one tile at a time, the
  // decode shared.
  for (; j + 4 <= nq; j += 4)
    for (int64_t r = 0; r < m; r += 8) {
      const int64_t rows = std::min<int64_t>(8, m - r);
      const TileWords t = tileWords(codes, n, nib0, P, r0 + r, rows, 8, buf);
      __m256 s[4];
      if (bits == 2)
        oneTileFourQueriesAvx2<2>(t, q + j * d, d, P, s);
      else
        oneTileFourQueriesAvx2<4>(t, q + j * d, d, P, s);
      for (int jj = 0; jj < 4; ++jj) {
        _mm256_store_ps(va, s[jj]);
        storeTileRows(va, rows, out + r * outStride + j + jj, outStride);
      }
    }
  for (; j + 2 <= nq; j += 2)
    for (int64_t r = 0; r < m; r += 8) {
      const int64_t rows = std::min<int64_t>(8, m - r);
      const TileWords t = tileWords(codes, n, nib0, P, r0 + r, rows, 8, buf);
      __m256 s0, s1;
      if (bits == 2)
        oneTileTwoQueriesAvx2<2>(t, q + j * d, d, P, s0, s1);
      else
        oneTileTwoQueriesAvx2<4>(t, q + j * d, d, P, s0, s1);
      _mm256_store_ps(va, s0);
      _mm256_store_ps(vb, s1);
      float *o = out + r * outStride + j;
      storeTileRows(va, rows, o, outStride);
      storeTileRows(vb, rows, o + 1, outStride);
    }
  walkTilePairs<8, 1>(codes, n, r0, m, nib0, P, q, j, nq, d, out, outStride,
                      TwoTilesAvx2{bits, P});
}

//===----------------------------------------------------------------------===//
// AVX-512F: tiles of 16 rows
//===----------------------------------------------------------------------===//

/// The 16 terms of nibble i (x = 0..15), computed in registers: cheaper
/// than storing tables and loading them back.
template <int BITS>
KVQ_AVX512 inline __m512 tableAvx512(const float *q, int64_t i) {
  if constexpr (BITS == 2) {
    const __m512 c1 =
        _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    const __m512 c2 =
        _mm512_setr_ps(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_fmadd_ps(_mm512_set1_ps(q[2 * i + 1]), c2,
                           _mm512_mul_ps(_mm512_set1_ps(q[2 * i]), c1));
  } else {
    return _mm512_mul_ps(
        _mm512_set1_ps(q[i]),
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  }
}

/// Table indices of nibble i for the 16 rows of a 64-bit word. The word is
/// broadcast as two alternating 32-bit halves, so lane 2k holds row k and
/// lane 2k+1 row 8 + k after the shift (vpermps reads the low four bits).
KVQ_AVX512 inline __m512i nibbleIndex(const uint8_t *word) {
  uint64_t w;
  std::memcpy(&w, word, 8);
  const __m512i shift = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20,
                                          20, 24, 24, 28, 28);
  return _mm512_srlv_epi32(_mm512_set1_epi64(static_cast<int64_t>(w)), shift);
}

/// Table term of nibble i for the 16 rows of a 64-bit word.
KVQ_AVX512 inline __m512 termAvx512(const uint8_t *word, __m512 table) {
  return _mm512_permutexvar_ps(nibbleIndex(word), table);
}

/// The four chains of a tile summed canonically, back in row order: row
/// t < 8 is lane 2t, row 8 + t lane 2t + 1.
KVQ_AVX512 inline __m512 tileSums(const __m512 (&A)[4]) {
  const __m512i rowOrder =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  return _mm512_permutexvar_ps(
      rowOrder,
      _mm512_add_ps(_mm512_add_ps(A[0], A[1]), _mm512_add_ps(A[2], A[3])));
}

template <int BITS>
KVQ_AVX512 void twoTilesAvx512(TileWords a, TileWords b, const float *q,
                               int64_t P, __m512 &ra, __m512 &rb) {
  __m512 A[4], B[4];
  for (int u = 0; u < 4; ++u)
    A[u] = B[u] = _mm512_setzero_ps();
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      const __m512 t = tableAvx512<BITS>(q, i + u);
      A[u] = _mm512_add_ps(A[u], termAvx512(a.base + (i + u) * a.stride, t));
      B[u] = _mm512_add_ps(B[u], termAvx512(b.base + (i + u) * b.stride, t));
    }
  ra = tileSums(A);
  rb = tileSums(B);
}

/// twoTilesAvx512 for query vectors q0 and q1 = q0 + d at once (GQA): each
/// nibble's words are decoded once for both, each query vector keeps its
/// own tables and chains, so both get twoTilesAvx512's sums.
template <int BITS>
KVQ_AVX512 void twoTilesTwoQueriesAvx512(TileWords a, TileWords b,
                                         const float *q0, int64_t d, int64_t P,
                                         __m512 (&r)[4]) {
  const float *q1 = q0 + d;
  __m512 A0[4], B0[4], A1[4], B1[4];
  for (int u = 0; u < 4; ++u)
    A0[u] = B0[u] = A1[u] = B1[u] = _mm512_setzero_ps();
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      const __m512i ia = nibbleIndex(a.base + (i + u) * a.stride);
      const __m512i ib = nibbleIndex(b.base + (i + u) * b.stride);
      const __m512 t0 = tableAvx512<BITS>(q0, i + u);
      const __m512 t1 = tableAvx512<BITS>(q1, i + u);
      A0[u] = _mm512_add_ps(A0[u], _mm512_permutexvar_ps(ia, t0));
      B0[u] = _mm512_add_ps(B0[u], _mm512_permutexvar_ps(ib, t0));
      A1[u] = _mm512_add_ps(A1[u], _mm512_permutexvar_ps(ia, t1));
      B1[u] = _mm512_add_ps(B1[u], _mm512_permutexvar_ps(ib, t1));
    }
  r[0] = tileSums(A0);
  r[1] = tileSums(A1);
  r[2] = tileSums(B0);
  r[3] = tileSums(B1);
}

/// walkTilePairs' sums for AVX-512: two tiles of 16 rows, two query
/// vectors.
struct TwoTilesTwoQueriesAvx512 {
  int bits;
  int64_t P, d;
  KVQ_AVX512 void operator()(TileWords a, TileWords b, const float *q,
                             float *va, float *vb) const {
    __m512 r[4]; // tile a's sums of both vectors, then tile b's
    if (bits == 2)
      twoTilesTwoQueriesAvx512<2>(a, b, q, d, P, r);
    else
      twoTilesTwoQueriesAvx512<4>(a, b, q, d, P, r);
    _mm512_storeu_ps(va, r[0]);
    _mm512_storeu_ps(va + 16, r[1]);
    _mm512_storeu_ps(vb, r[2]);
    _mm512_storeu_ps(vb + 16, r[3]);
  }
};

/// walkTilePairs' sums for AVX-512: two tiles of 16 rows, one query vector.
struct TwoTilesAvx512 {
  int bits;
  int64_t P;
  KVQ_AVX512 void operator()(TileWords a, TileWords b, const float *q,
                             float *va, float *vb) const {
    __m512 sa, sb;
    if (bits == 2)
      twoTilesAvx512<2>(a, b, q, P, sa, sb);
    else
      twoTilesAvx512<4>(a, b, q, P, sa, sb);
    _mm512_storeu_ps(va, sa);
    _mm512_storeu_ps(vb, sb);
  }
};

KVQ_AVX512 void dotNibbleRowsAvx512(const NibbleRowsDot &a) {
  const uint8_t *codes = a.codes;
  const int64_t n = a.n, r0 = a.r0, m = a.m, nib0 = a.nib0;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  assert(nibbleTiles(bits, d));
  const int64_t P = d * bits / 4;
  // Query vectors in pairs (GQA), the decode shared; then one at a time.
  const int64_t j =
      walkTilePairs<16, 2>(codes, n, r0, m, nib0, P, q, 0, nq, d, out,
                           outStride, TwoTilesTwoQueriesAvx512{bits, P, d});
  walkTilePairs<16, 1>(codes, n, r0, m, nib0, P, q, j, nq, d, out, outStride,
                       TwoTilesAvx512{bits, P});
}

} // namespace

void kvq::x86::fillNibbleAvx2(const AttendShape &s, AttendOps &ops) {
  if (nibbleTiles(s.keyBits, s.d))
    ops.dotNibbleRows = dotNibbleRowsAvx2;
}

void kvq::x86::fillNibbleAvx512(const AttendShape &s, AttendOps &ops) {
  if (nibbleTiles(s.keyBits, s.d))
    ops.dotNibbleRows = dotNibbleRowsAvx512;
}
