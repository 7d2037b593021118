//===- attend_codes3_avx512.cpp - Weighted sums of 3-bit rows, AVX-512 ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::axpyCodesRows for 3-bit value codes on AVX-512F (the entry and
// its selection are attend_pairs.cpp's). Sixteen codes per register from
// their 6 bytes: the two words holding codes 0-7 and 8-15 broadcast into the
// two halves of one register by a masked broadcast, one variable shift and
// a mask, then a conversion and one FMA per query vector, where AVX2 spends
// twice the operations per 16 codes. Lanes are in channel order, so the
// accumulators of a tile (NJ query vectors x 64 or 128 channels) load and
// store as they lie. Same bits as AVX2, NEON and the reference: acc =
// fma(w, code, acc) per element, rows in order (kernels.h).
//
//===----------------------------------------------------------------------===//
#include "acc_tiles.h"
#include "x86_kernels.h"
#include "x86_target.h"

#include <cassert>
#include <cstring>
#include <immintrin.h>

using namespace kvq;
using kvq::x86::forEachAccTile;

namespace {

/// Channels c .. c + 15 (c % 16 == 0) of a row of 3-bit codes as floats,
/// in channel order; exactly the 6 bytes from c * 3 / 8 are read.
KVQ_AVX512 inline __m512 codes3x16(const uint8_t *row, int64_t c) {
  const uint8_t *p = row + c / 8 * 3;
  uint32_t w0, w1;
  std::memcpy(&w0, p, 4);
  std::memcpy(&w1, p + 2, 4);
  const __m512i words =
      _mm512_mask_set1_epi32(_mm512_set1_epi32(static_cast<int32_t>(w0)),
                             0xFF00, static_cast<int32_t>(w1));
  const __m512i shift = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 8, 11, 14,
                                          17, 20, 23, 26, 29);
  return _mm512_cvtepi32_ps(
      _mm512_and_si512(_mm512_srlv_epi32(words, shift), _mm512_set1_epi32(7)));
}

/// acc[j0+jj][c0 .. c0+W) += ws[r*stride + (j0+jj)*groups + c/G] *
/// code_r[c] over the rows in order; G is a multiple of 16, so one weight
/// covers a register.
struct Code3Tile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *ws;
  int64_t wsStride, groups;
  int shift; ///< log2 G
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    constexpr int B = W / 16;
    __m512 a[NJ][B];
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        a[jj][b] = _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b);
    for (int64_t r = 0; r < n; ++r) {
      const float *w = ws + r * wsStride + j0 * groups;
      for (int b = 0; b < B; ++b) {
        const int64_t c = c0 + 16 * b;
        const __m512 v = codes3x16(rows[r], c);
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][b] = _mm512_fmadd_ps(
              _mm512_set1_ps(w[jj * groups + (c >> shift)]), v, a[jj][b]);
      }
    }
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < B; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b, a[jj][b]);
  }
};

} // namespace

/// Tiles: four or two queries x 64 channels, one query x 128 (the caller,
/// attend_pairs.cpp's AVX-512 entry, checked the shape).
KVQ_AVX512 void kvq::x86::axpyCodes3Avx512(const uint8_t *const *rows,
                                           int64_t n, const float *ws,
                                           int64_t wsStride, int64_t G,
                                           int64_t nq, int64_t d, float *acc) {
  assert(d % 64 == 0 && G % 16 == 0 && (G & (G - 1)) == 0 && d % G == 0);
  forEachAccTile<64, 128>(
      nq, d,
      Code3Tile512{rows, n, ws, wsStride, d / G,
                   __builtin_ctzll(static_cast<uint64_t>(G)), d, acc});
}
