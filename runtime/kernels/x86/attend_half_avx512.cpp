//===- attend_half_avx512.cpp - fp16 rows of fused attention, AVX-512 -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fp16 cache's key dots and value sums on sixteen lanes: a 16-lane
// conversion and FMA halve the operations per row, and dotHalfRows keeps
// sixteen dot chains in flight and reduces them together. Warm, the AVX2
// kernels ran the fp16 cache at only about 1.5x the machine's DRAM read rate,
// so the arithmetic was not hidden behind the memory stream
// (docs/PERFORMANCE.md has the A/B).
// Same bits as AVX2 and NEON: a dot keeps the canonical order
// (attend_avx2.cpp), lane l of one accumulator being the partial sum S_l;
// a weighted sum is one FMA per element and row, rows in order.
//
//===----------------------------------------------------------------------===//
#include "acc_tiles.h"
#include "avx2_util.h"
#include "x86_kernels.h"

#include "block16_family.h"

#include <cassert>

using namespace kvq;
using kvq::x86::forEachAccTile;
using kvq::x86::forEachQueryBlock;

namespace {

/// Channels c .. c+15 of an fp16 row as floats.
KVQ_AVX512 inline __m512 halfs16(const uint16_t *row, int64_t c) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + c)));
}

/// The canonical reduction of the sixteen partial sums: T_l = S_l + S_{l+8},
/// then hsum's U, W and W_0 + W_1.
KVQ_AVX512 inline float canonicalSum(__m512 s) {
  return avx2::hsum(_mm256_add_ps(
      _mm512_castps512_ps256(s),
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
}

/// out[jj] = q_jj . row for NJ query vectors, one FMA chain each.
template <int NJ>
KVQ_AVX512 void dotHalfBlock(const uint16_t *row, const float *q, int64_t d,
                             float *out) {
  __m512 acc[NJ];
  for (int jj = 0; jj < NJ; ++jj)
    acc[jj] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __m512 v = halfs16(row, c);
    for (int jj = 0; jj < NJ; ++jj)
      acc[jj] = _mm512_fmadd_ps(_mm512_loadu_ps(q + jj * d + c), v, acc[jj]);
  }
  for (int jj = 0; jj < NJ; ++jj)
    out[jj] = canonicalSum(acc[jj]);
}

struct HalfDotBlocks {
  const uint16_t *row;
  const float *q;
  int64_t d;
  float *out;
  template <int NJ> KVQ_AVX512 void run(int64_t j) const {
    dotHalfBlock<NJ>(row, q + j * d, d, out + j);
  }
};

KVQ_AVX512 void dotHalfAvx512(const uint16_t *row, const float *q, int64_t nq,
                              int64_t d, float *out) {
  assert(block16::whole16(d));
  forEachQueryBlock(nq, HalfDotBlocks{row, q, d, out});
}

/// canonicalSum of each of 16 accumulators, lane k of the result for
/// acc[k]: the same additions of the same lanes, done for two and then
/// four accumulators per register (about 3.5 operations per sum instead of
/// 9, and no chain of shuffles per row).
KVQ_AVX512 inline __m512 canonicalSums16(const __m512 (&acc)[16]) {
  __m512 t[8];
  for (int p = 0; p < 8; ++p) {
    // T_l = S_l + S_{l+8}: lanes 0-7 for acc[2p], 8-15 for acc[2p+1].
    const __m512 a = acc[2 * p], b = acc[2 * p + 1];
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 w[4];
  for (int m = 0; m < 4; ++m) {
    // hsum: U_i = T_i + T_{i+4}, quarter i of the register for acc[4m+i];
    // then U_i + U_{i+2}, then lane 0 + lane 1, in lane 0 of each quarter.
    const __m512 x = t[2 * m], y = t[2 * m + 1];
    __m512 u =
        _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, _MM_SHUFFLE(3, 2, 3, 2)));
    w[m] = _mm512_add_ps(u, _mm512_movehdup_ps(u));
  }
  // Lane 0 of each quarter, in order: acc[0..7], then acc[8..15].
  const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8,
                                         12, 16, 20, 24, 28);
  return _mm512_shuffle_f32x4(_mm512_permutex2var_ps(w[0], pick, w[1]),
                              _mm512_permutex2var_ps(w[2], pick, w[3]),
                              _MM_SHUFFLE(1, 0, 1, 0));
}

/// out[r*outStride + jj] = q_jj . rows[r] for R rows and NJ query vectors
/// (R * NJ = 16 chains, each dotHalfBlock's).
template <int R, int NJ>
KVQ_AVX512 void dotHalfTile(const uint16_t *const *rows, const float *q,
                            int64_t d, float *out, int64_t outStride) {
  static_assert(R * NJ == 16, "one register of sums");
  __m512 acc[16];
  for (__m512 &a : acc)
    a = _mm512_setzero_ps();
  // Row after row, so the rows are read in address order (the hardware
  // prefetcher streams them); the chains of different rows still overlap.
  for (int r = 0; r < R; ++r) {
    const uint16_t *row = rows[r];
    for (int64_t c = 0; c < d; c += 16) {
      const __m512 v = halfs16(row, c);
      for (int jj = 0; jj < NJ; ++jj)
        acc[r * NJ + jj] = _mm512_fmadd_ps(_mm512_loadu_ps(q + jj * d + c), v,
                                           acc[r * NJ + jj]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, canonicalSums16(acc));
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < NJ; ++jj)
      out[r * outStride + jj] = sums[r * NJ + jj];
}

/// Query vectors [0, NJ) of q against n rows: tiles of 16 / NJ rows, the
/// last rows one by one.
template <int NJ>
KVQ_AVX512 void dotHalfRowsOfBlock(const uint16_t *const *rows, int64_t n,
                                   const float *q, int64_t d, float *out,
                                   int64_t outStride) {
  constexpr int R = 16 / NJ;
  int64_t r = 0;
  for (; r + R <= n; r += R)
    dotHalfTile<R, NJ>(rows + r, q, d, out + r * outStride, outStride);
  for (; r < n; ++r)
    dotHalfBlock<NJ>(rows[r], q, d, out + r * outStride);
}

KVQ_AVX512 void dotHalfRowsAvx512(const uint16_t *const *rows, int64_t n,
                                  const float *q, int64_t nq, int64_t d,
                                  float *out, int64_t outStride) {
  assert(block16::whole16(d));
  int64_t j = 0;
  for (; j + 4 <= nq; j += 4)
    dotHalfRowsOfBlock<4>(rows, n, q + j * d, d, out + j, outStride);
  if (nq - j >= 2) {
    dotHalfRowsOfBlock<2>(rows, n, q + j * d, d, out + j, outStride);
    j += 2;
  }
  if (nq - j == 1)
    dotHalfRowsOfBlock<1>(rows, n, q + j * d, d, out + j, outStride);
}

/// acc[j0+jj][c0 .. c0+W) += w[r][j0+jj] * row_r over all rows, NJ*W/16
/// accumulators in registers (a tile of forEachAccTile).
struct HalfTile512 {
  const uint16_t *const *rows;
  int64_t n;
  const float *w;
  int64_t wStride, d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    constexpr int B = W / 16;
    __m512 a[NJ][B];
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        a[jj][b] = _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b);
    for (int64_t r = 0; r < n; ++r) {
      const uint16_t *row = rows[r] + c0;
      __m512 wv[NJ];
      for (int jj = 0; jj < NJ; ++jj)
        wv[jj] = _mm512_set1_ps(w[r * wStride + j0 + jj]);
      for (int b = 0; b < B; ++b) {
        const __m512 v = halfs16(row, 16 * b);
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][b] = _mm512_fmadd_ps(wv[jj], v, a[jj][b]);
      }
    }
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b, a[jj][b]);
  }
};

/// Which head widths axpyHalfRowsAvx512 takes: whole tiles of 64 channels.
bool halfTilesCover(int64_t d) { return d > 0 && d % 64 == 0; }

/// Tiles: four queries x 64 channels (16 accumulators), two x 64, one
/// query x 128 (8 accumulators: a whole head at head_dim 128).
KVQ_AVX512 void axpyHalfRowsAvx512(const uint16_t *const *rows, int64_t n,
                                   const float *w, int64_t wStride, int64_t nq,
                                   int64_t d, float *acc) {
  assert(halfTilesCover(d));
  forEachAccTile<64, 128>(nq, d, HalfTile512{rows, n, w, wStride, d, acc});
}

} // namespace

void kvq::x86::fillHalfAvx512(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep the AVX2 entries (the table starts from the AVX2 one).
  if (block16::whole16(s.d)) {
    ops.dotHalf = dotHalfAvx512;
    ops.dotHalfRows = dotHalfRowsEntry<dotHalfRowsAvx512>;
  }
  if (halfTilesCover(s.d))
    ops.axpyHalfRows = axpyHalfRowsEntry<axpyHalfRowsAvx512>;
}
