//===- attend_x86_pairs.cpp - Weighted sums of 2-bit value rows in pairs --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::axpyCodesRows for 2-bit codes on x86_64 (contract in
// kernels.h): rows go in pairs (2k, 2k+1), and each element gains one
// pairTerm(wa, a, wb, b) = fma(wb, b, wa * a).
//
// Also the AVX-512 entry's selection, which sends 3- and 4-bit rows to
// attend_avx512_codes.cpp.
// - AVX-512F: the 16 terms of a pair and group form one zmm table; a lane's
//   index a + 4b is built from the two rows' code words (a shift, a rotate
//   and a bit select), so one `vpermps` and one addition cover 16 channels
//   of two rows, where decoding took a shift, a permute and an FMA per 8
//   codes.
// - AVX2: each lane computes the term: wa * a from a 4-entry product table
//   (`vpermilps` reads the two low bits of the shifted word), b from
//   {0,1,2,3} the same way, then the FMA; as many vector uops per code as
//   the one-row-at-a-time kernel.
// A lone last row takes one FMA per element, as the other widths do.
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include <cassert>

using namespace kvq;
using kvq::avx2::AccTile;
using kvq::x86::forEachAccTile;

namespace {

uint32_t word32(const uint8_t *p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

/// Weights of the rows' groups: ws[r*stride + j*groups + (c >> shift)].
struct PairWeights {
  const float *ws;
  int64_t stride, groups;
  int shift; ///< log2 of the group size
  const float *at(int64_t r, int64_t j, int64_t c) const {
    return ws + r * stride + j * groups + (c >> shift);
  }
};

//===----------------------------------------------------------------------===//
// AVX2: NJ queries x W channels of accumulators in registers
//===----------------------------------------------------------------------===//

/// SPAN: channels that share one weight inside the block (min(G, W)), so
/// a pair's product table and weight broadcast are built once per span.
template <int SPAN16, int SPAN32> struct PairTileAvx2 {
  const uint8_t *const *rows;
  int64_t n;
  PairWeights w;
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX2 void run(int64_t j0, int64_t c0) const {
    constexpr int SPAN = W == 16 ? SPAN16 : SPAN32;
    const __m256 codes = _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3);
    const __m256i s0 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i s1 = _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30);
    AccTile<NJ, W> tile;
    tile.load(acc, j0, c0, d);
    auto &a = tile.a;
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      // products[jj][s] = wa * {0,1,2,3} and wb of span s of query jj.
      __m256 products[NJ][W / SPAN], wbs[NJ][W / SPAN];
      for (int jj = 0; jj < NJ; ++jj)
        for (int sp = 0; sp < W / SPAN; ++sp) {
          const int64_t c = c0 + SPAN * sp;
          products[jj][sp] =
              _mm256_mul_ps(_mm256_set1_ps(*w.at(r, j0 + jj, c)), codes);
          wbs[jj][sp] = _mm256_set1_ps(*w.at(r + 1, j0 + jj, c));
        }
      for (int i = 0; i < W / 8; i += 2) { // one 32-bit word: 16 channels
        const int64_t c = c0 + 8 * i;
        const __m256i A =
            _mm256_set1_epi32(static_cast<int32_t>(word32(rows[r] + c / 4)));
        const __m256i B = _mm256_set1_epi32(
            static_cast<int32_t>(word32(rows[r + 1] + c / 4)));
        const __m256i ia[2] = {_mm256_srlv_epi32(A, s0),
                               _mm256_srlv_epi32(A, s1)};
        const __m256 bv[2] = {
            _mm256_permutevar_ps(codes, _mm256_srlv_epi32(B, s0)),
            _mm256_permutevar_ps(codes, _mm256_srlv_epi32(B, s1))};
        for (int jj = 0; jj < NJ; ++jj)
          for (int h = 0; h < 2; ++h) {
            const int sp = (8 * (i + h)) / SPAN;
            const __m256 lo = _mm256_permutevar_ps(products[jj][sp], ia[h]);
            a[jj][i + h] = _mm256_add_ps(
                a[jj][i + h], _mm256_fmadd_ps(wbs[jj][sp], bv[h], lo));
          }
      }
    }
    if (r < n) // the lone last row: one FMA per element
      for (int i = 0; i < W / 8; i += 2) {
        const int64_t c = c0 + 8 * i;
        const __m256i A =
            _mm256_set1_epi32(static_cast<int32_t>(word32(rows[r] + c / 4)));
        const __m256 v0 = _mm256_permutevar_ps(codes, _mm256_srlv_epi32(A, s0));
        const __m256 v1 = _mm256_permutevar_ps(codes, _mm256_srlv_epi32(A, s1));
        for (int jj = 0; jj < NJ; ++jj) {
          a[jj][i] = _mm256_fmadd_ps(_mm256_set1_ps(*w.at(r, j0 + jj, c)), v0,
                                     a[jj][i]);
          a[jj][i + 1] = _mm256_fmadd_ps(
              _mm256_set1_ps(*w.at(r, j0 + jj, c + 8)), v1, a[jj][i + 1]);
        }
      }
    tile.store(acc, j0, c0, d);
  }
};

/// Tiles of at most 8 accumulators: four queries x 16 channels, two x 16,
/// one x 32 (more would spill: each pair step needs eight temporaries).
/// SPAN16, SPAN32: the span of the tiles 16 and 32 channels wide.
template <int SPAN16, int SPAN32>
KVQ_AVX2 void pairTilesAvx2(const uint8_t *const *rows, int64_t n,
                            const PairWeights &w, int64_t nq, int64_t d,
                            float *acc) {
  forEachAccTile<16, 32>(nq, d,
                         PairTileAvx2<SPAN16, SPAN32>{rows, n, w, d, acc});
}

//===----------------------------------------------------------------------===//
// AVX-512F: NJ queries x 64 channels, one table per (pair, query, group)
//===----------------------------------------------------------------------===//

/// BPG: 16-channel blocks per group within the 64 channels (G = 16, 32, or
/// a multiple of 64), so a table is built only where a group starts.
template <int BPG> struct PairTileAvx512 {
  const uint8_t *const *rows;
  int64_t n;
  PairWeights w;
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    static_assert(W == 64, "one zmm table covers 64 channels");
    const __m512 c1 =
        _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3); // x & 3
    const __m512 c2 = _mm512_setr_ps(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3,
                                     3, 3); // x >> 2
    // Lane l: code l of row a in bits 0-1 (shift by 2l), code l of row b in
    // bits 2-3 (rotate right by 2l - 2).
    const __m512i sa = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                         22, 24, 26, 28, 30);
    const __m512i sb = _mm512_setr_epi32(30, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
                                         20, 22, 24, 26, 28);
    const __m512i low2 = _mm512_set1_epi32(3);
    __m512 a[NJ][4];
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < 4; ++b)
        a[jj][b] = _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b);
    int64_t r = 0;
    for (; r + 2 <= n; r += 2) {
      __m512i idx[4];
      for (int b = 0; b < 4; ++b) {
        const int64_t byte = (c0 + 16 * b) / 4;
        const __m512i A = _mm512_srlv_epi32(
            _mm512_set1_epi32(static_cast<int32_t>(word32(rows[r] + byte))),
            sa);
        const __m512i B = _mm512_rorv_epi32(
            _mm512_set1_epi32(static_cast<int32_t>(word32(rows[r + 1] + byte))),
            sb);
        idx[b] = _mm512_ternarylogic_epi32(A, B, low2, 0xe4); // low2 ? A : B
      }
      for (int jj = 0; jj < NJ; ++jj) {
        __m512 table = _mm512_setzero_ps();
        for (int b = 0; b < 4; ++b) {
          const int64_t c = c0 + 16 * b;
          if (b % BPG == 0)
            table = _mm512_fmadd_ps(
                _mm512_set1_ps(*w.at(r + 1, j0 + jj, c)), c2,
                _mm512_mul_ps(_mm512_set1_ps(*w.at(r, j0 + jj, c)), c1));
          a[jj][b] =
              _mm512_add_ps(a[jj][b], _mm512_permutexvar_ps(idx[b], table));
        }
      }
    }
    if (r < n) // the lone last row: one FMA per element
      for (int b = 0; b < 4; ++b) {
        const int64_t c = c0 + 16 * b;
        const __m512 v = _mm512_permutexvar_ps(
            _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int32_t>(
                                  word32(rows[r] + c / 4))),
                              sa),
            c1);
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][b] = _mm512_fmadd_ps(_mm512_set1_ps(*w.at(r, j0 + jj, c)), v,
                                     a[jj][b]);
      }
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < 4; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b, a[jj][b]);
  }
};

template <int BPG>
KVQ_AVX512 void pairTilesAvx512(const uint8_t *const *rows, int64_t n,
                                const PairWeights &w, int64_t nq, int64_t d,
                                float *acc) {
  forEachAccTile<64, 64>(nq, d, PairTileAvx512<BPG>{rows, n, w, d, acc});
}

bool powerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

/// The AVX-512 axpyCodesRows: 2-bit rows in pairs here, 3- and 4-bit rows
/// 16 codes per register (attend_avx512_codes.cpp); all take 64 channels per
/// tile and whole registers of one weight (groups of 16 channels and more, a
/// power of two dividing d).
bool codeRowsAvx512(int bits, int64_t d, int64_t G) {
  return bits >= 2 && bits <= 4 && d % 64 == 0 && G % 16 == 0 &&
         powerOfTwo(G) && d % G == 0;
}

PairWeights pairWeights(const float *ws, int64_t wsStride, int64_t G,
                        int64_t d) {
  return {ws, wsStride, d / G, __builtin_ctzll(static_cast<uint64_t>(G))};
}

} // namespace

KVQ_AVX2 void kvq::x86::axpyCodePairsAvx2(const CodeRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const float *ws = a.ws;
  const int64_t wsStride = a.wsStride, G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  // Covered where axpyCodesRowsAvx2 is (fillAttendAvx2), which calls it.
  assert(d % 16 == 0 && G % 8 == 0 && powerOfTwo(G));
  const PairWeights w = pairWeights(ws, wsStride, G, d);
  switch (G) {
  case 8:
    return pairTilesAvx2<8, 8>(rows, n, w, nq, d, acc);
  case 16:
    return pairTilesAvx2<16, 16>(rows, n, w, nq, d, acc);
  default:
    return pairTilesAvx2<16, 32>(rows, n, w, nq, d, acc);
  }
}

namespace {

KVQ_AVX512 void axpyCodesRowsAvx512(const CodeRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t wsStride = a.wsStride, G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(codeRowsAvx512(bits, d, G));
  if (bits != 2)
    return x86::axpyCodes34Avx512(a);
  const PairWeights w = pairWeights(ws, wsStride, G, d);
  switch (G) {
  case 16:
    return pairTilesAvx512<1>(rows, n, w, nq, d, acc);
  case 32:
    return pairTilesAvx512<2>(rows, n, w, nq, d, acc);
  default:
    return pairTilesAvx512<4>(rows, n, w, nq, d, acc);
  }
}

} // namespace

void kvq::x86::fillPairsAvx512(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep the AVX2 entry (the table starts from the AVX2 one).
  if (codeRowsAvx512(s.valueBits, s.d, s.G))
    ops.axpyCodesRows = axpyCodesRowsAvx512;
}
