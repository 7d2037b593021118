//===- attend_avx512_half.cpp - fp16 rows of fused attention, AVX-512 -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fp16 cache's key dots and value sums on sixteen lanes: a 16-lane
// conversion and FMA halve the operations per row. Warm, the AVX2 kernels
// ran the fp16 cache at only about 1.5x the machine's DRAM read rate, so
// the arithmetic was not hidden behind the memory stream
// (docs/PERFORMANCE.md has the A/B).
// Same bits as AVX2 and NEON: a dot keeps the canonical order
// (attend_avx2.cpp), lane l of one accumulator being the partial sum S_l;
// a weighted sum is one FMA per element and row, rows in order.
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/avx2_util.h"
#include "../x86/avx512_util.h"
#include "../x86/x86_kernels.h"

#include "block16_family.h"

#include <algorithm>
#include <cassert>

using namespace kvq;
using kvq::avx512::AccTile512InOrder;
using kvq::avx512::halfs16;
using kvq::x86::forEachAccTile;
using kvq::x86::forEachQueryBlock;

namespace {

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

/// The canonical reductions of sixteen accumulators at once: lane m of the
/// result is canonicalSum(a[m]). Each step adds the halves canonicalSum
/// adds, of two vectors per instruction: S_l + S_{l+8} (256-bit halves),
/// T_l + T_{l+4} (128-bit quarters), U_l + U_{l+2}, then W_0 + W_1; so a
/// sum costs about three operations instead of eight, with its bits.
KVQ_AVX512 inline __m512 canonicalSums16(const __m512 (&a)[16]) {
  __m512 t[8], u[4], w[2];
  for (int k = 0; k < 8; ++k) // lanes 0-7: T of a[2k], 8-15: of a[2k+1]
    t[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xEE));
  for (int k = 0; k < 4; ++k) // quarter i: U of a[4k + i]
    u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0xDD));
  for (int k = 0; k < 2; ++k) // quarter i: W_0, W_1 of a[8k + i], a[8k+4+i]
    w[k] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * k], u[2 * k + 1], 0x44),
                         _mm512_shuffle_ps(u[2 * k], u[2 * k + 1], 0xEE));
  // Quarter i, element e: the sum of a[4e + i]; back to order m = 4e + i.
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88),
                                 _mm512_shuffle_ps(w[0], w[1], 0xDD));
  const __m512i order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, f);
}

/// dotHalfRows on AVX-512: R rows x QJ query vectors (R * QJ = 16) are
/// sixteen accumulators, each row converted once for its QJ vectors, and
/// their sums reduced together (canonicalSums16). One row per call spent
/// most of its time in the horizontal sums: at head_dim 64 a row's four
/// FMAs per query vector met eight reduction operations.
template <int QJ>
KVQ_AVX512 void halfRowsBlock(const HalfRowsDot &a, int64_t r0, int64_t j0) {
  constexpr int R = 16 / QJ;
  const int64_t d = a.d, rows = std::min<int64_t>(R, a.n - r0);
  const float *q = a.q + j0 * d;
  __m512 acc[16];
  for (int i = 0; i < 16; ++i)
    acc[i] = _mm512_setzero_ps();
  const uint16_t *row[R];
  for (int r = 0; r < R; ++r) // rows past n repeat the first, unstored
    row[r] = a.rows + (r0 + (r < rows ? r : 0)) * a.rowStride;
  for (int64_t c = 0; c < d; c += 16) {
    __m512 qc[QJ]; // loaded once for the block's R rows
    for (int j = 0; j < QJ; ++j)
      qc[j] = _mm512_loadu_ps(q + j * d + c);
    for (int r = 0; r < R; ++r) {
      const __m512 v = halfs16(row[r], c);
      for (int j = 0; j < QJ; ++j)
        acc[r * QJ + j] = _mm512_fmadd_ps(qc[j], v, acc[r * QJ + j]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, canonicalSums16(acc));
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < QJ; ++j)
      a.out[(r0 + r) * a.outStride + j0 + j] = sums[r * QJ + j];
}

KVQ_AVX512 void dotHalfRowsAvx512(const HalfRowsDot &a) {
  assert(block16::whole16(a.d));
  int64_t j = 0;
  for (; j + 4 <= a.nq; j += 4)
    for (int64_t r = 0; r < a.n; r += 4)
      halfRowsBlock<4>(a, r, j);
  for (; j + 2 <= a.nq; j += 2)
    for (int64_t r = 0; r < a.n; r += 8)
      halfRowsBlock<2>(a, r, j);
  for (; j < a.nq; ++j)
    for (int64_t r = 0; r < a.n; r += 16)
      halfRowsBlock<1>(a, r, j);
}

/// out[j*d + c] = q[j*d + c] * half(h[c]), sixteen channels a step (eight
/// for the last of d % 16 == 8): the same single rounding as every table.
/// KIVI folds a key group's scales into the queries with it, all heads in
/// one call, once per group: AVX2's loop held ~5 % of a warm 1K-token
/// kivi2 step.
KVQ_AVX512 void mulHalfAvx512(const uint16_t *h, const float *q, int64_t nq,
                              int64_t d, float *out) {
  assert(d % 8 == 0);
  int64_t c = 0;
  for (; c + 16 <= d; c += 16) {
    const __m512 s = halfs16(h, c);
    for (int64_t j = 0; j < nq; ++j)
      _mm512_storeu_ps(out + j * d + c,
                       _mm512_mul_ps(_mm512_loadu_ps(q + j * d + c), s));
  }
  if (c < d) {
    const __m256 s = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + c)));
    for (int64_t j = 0; j < nq; ++j)
      _mm256_storeu_ps(out + j * d + c,
                       _mm256_mul_ps(_mm256_loadu_ps(q + j * d + c), s));
  }
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
    AccTile512InOrder<NJ, W> t;
    t.load(acc, j0, c0, d);
    auto &a = t.a;
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
    t.store(acc, j0, c0, d);
  }
};

/// Which head widths axpyHalfRowsAvx512 takes: whole tiles of 64 channels.
bool halfTilesCover(int64_t d) { return d > 0 && d % 64 == 0; }

/// Tiles: four queries x 64 channels (16 accumulators), two x 64, one
/// query x 128 (8 accumulators: a whole head at head_dim 128).
KVQ_AVX512 void axpyHalfRowsAvx512(const HalfRowsAxpy &a) {
  const uint16_t *const *rows = a.rows;
  const int64_t n = a.n;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(halfTilesCover(d));
  forEachAccTile<64, 128>(nq, d, HalfTile512{rows, n, w, wStride, d, acc});
}

} // namespace

void kvq::x86::fillHalfAvx512(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep the AVX2 entries (the table starts from the AVX2 one).
  if (s.d % 8 == 0) // as fillAttend: also called with d = heads * head_dim
    ops.mulHalf = mulHalfAvx512;
  if (block16::whole16(s.d)) {
    ops.dotHalf = dotHalfAvx512;
    ops.dotHalfRows = dotHalfRowsAvx512;
  }
  if (halfTilesCover(s.d))
    ops.axpyHalfRows = axpyHalfRowsAvx512;
}
