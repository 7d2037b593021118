//===- attend_avx2_half_narrow.cpp - fp16 rows of narrow heads, AVX2 ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fp16 cache's key dots and value sums for head widths of whole
// 8-channel blocks that the block-16 kernels do not take (d % 16 == 8:
// small models such as stories260K, head_dim 8). Every ISA runs the
// reference there, so these give the reference's bits: a dot is a product,
// then a sum, channel by channel from +0; a weighted sum is a product, then
// a sum, row by row. No FMA (the file, like the runtime, is built with
// -ffp-contract=off). Eight rows sit in the lanes of the key dots (a
// transpose per 8 x 8 block), so the chain of additions runs across rows
// instead of along one; the reference's one call per row and scalar
// conversions held about half of a stories260K decode step.
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <immintrin.h>

using namespace kvq;
using kvq::x86::forEachQueryBlock;

namespace {

bool narrow(int64_t d) { return d > 0 && d % 16 == 8; }

/// Channels c .. c+7 of an fp16 row as floats.
KVQ_AVX2 inline __m256 halfs8(const uint16_t *row, int64_t c) {
  return _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + c)));
}

/// x[i] lane k -> out[k] lane i (8 x 8 floats).
KVQ_AVX2 inline void transpose8(const __m256 x[8], __m256 out[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(x[i], x[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    out[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    out[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

/// out[r*outStride + j0+jj] = sum_c q[(j0+jj)*d + c] * half(row_r[c]) for
/// the rows r < n (rowStride apart, n <= 8) and NJ query vectors from j0;
/// the lanes past n read a row of zeros and are not stored.
struct NarrowDotBlock {
  const uint16_t *rows;
  int64_t rowStride, n;
  const float *q;
  int64_t d;
  float *out;
  int64_t outStride;

  template <int NJ> KVQ_AVX2 void run(int64_t j0) const {
    static const uint16_t zeros[8] = {};
    __m256 acc[NJ];
    for (int jj = 0; jj < NJ; ++jj)
      acc[jj] = _mm256_setzero_ps();
    for (int64_t c0 = 0; c0 < d; c0 += 8) {
      __m256 x[8], col[8];
      for (int64_t r = 0; r < 8; ++r)
        x[r] = halfs8(r < n ? rows + r * rowStride : zeros, r < n ? c0 : 0);
      transpose8(x, col);
      for (int jj = 0; jj < NJ; ++jj) {
        const float *qj = q + (j0 + jj) * d + c0;
        for (int c = 0; c < 8; ++c)
          acc[jj] = _mm256_add_ps(
              acc[jj], _mm256_mul_ps(_mm256_set1_ps(qj[c]), col[c]));
      }
    }
    for (int jj = 0; jj < NJ; ++jj) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[jj]);
      for (int64_t r = 0; r < n; ++r)
        out[r * outStride + j0 + jj] = lanes[r];
    }
  }
};

KVQ_AVX2 void dotHalfRowsNarrow(const HalfRowsDot &a) {
  for (int64_t r0 = 0; r0 < a.n; r0 += 8)
    forEachQueryBlock(a.nq, NarrowDotBlock{a.rows + r0 * a.rowStride,
                                           a.rowStride,
                                           a.n - r0 < 8 ? a.n - r0 : 8, a.q,
                                           a.d, a.out + r0 * a.outStride,
                                           a.outStride});
}

/// dotHalf as a block of one row (the same operations per lane).
KVQ_AVX2 void dotHalfNarrow(const uint16_t *row, const float *q, int64_t nq,
                            int64_t d, float *out) {
  forEachQueryBlock(nq, NarrowDotBlock{row, 0, 1, q, d, out, 1});
}

/// acc[j][c0 .. c0+8) += w[r][j] * row_r over all rows, NJ accumulators
/// in registers.
struct NarrowAxpyTile {
  const uint16_t *const *rows;
  int64_t n;
  const float *w;
  int64_t wStride, d;
  float *acc;
  int64_t c0;

  template <int NJ> KVQ_AVX2 void run(int64_t j0) const {
    __m256 a[NJ];
    for (int jj = 0; jj < NJ; ++jj)
      a[jj] = _mm256_loadu_ps(acc + (j0 + jj) * d + c0);
    for (int64_t r = 0; r < n; ++r) {
      const __m256 v = halfs8(rows[r], c0);
      for (int jj = 0; jj < NJ; ++jj)
        a[jj] = _mm256_add_ps(
            a[jj], _mm256_mul_ps(_mm256_set1_ps(w[r * wStride + j0 + jj]), v));
    }
    for (int jj = 0; jj < NJ; ++jj)
      _mm256_storeu_ps(acc + (j0 + jj) * d + c0, a[jj]);
  }
};

KVQ_AVX2 void axpyHalfRowsNarrow(const HalfRowsAxpy &a) {
  for (int64_t c0 = 0; c0 < a.d; c0 += 8)
    forEachQueryBlock(a.nq, NarrowAxpyTile{a.rows, a.n, a.w, a.wStride, a.d,
                                           a.acc, c0});
}

/// axpyHalf as a run of one row.
KVQ_AVX2 void axpyHalfNarrow(const uint16_t *row, const float *w, int64_t nq,
                             int64_t d, float *acc) {
  axpyHalfRowsNarrow(HalfRowsAxpy{&row, 1, w, 0, nq, d, acc});
}

} // namespace

void kvq::x86::fillHalfNarrowAvx2(const AttendShape &s, AttendOps &ops) {
  if (!narrow(s.d))
    return;
  ops.dotHalf = dotHalfNarrow;
  ops.dotHalfRows = dotHalfRowsNarrow;
  ops.axpyHalf = axpyHalfNarrow;
  ops.axpyHalfRows = axpyHalfRowsNarrow;
}
