//===- attend_codes4_avx512.cpp - Weighted sums of 4-bit rows, AVX-512 ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::axpyCodesRows for 4-bit value codes on AVX-512F (the entry and
// its selection are attend_pairs.cpp's, where 2-bit rows go in pairs). Sixteen
// codes per register: their 8 bytes broadcast as one 64-bit word and shifted
// (blockIndex, as KVQuant's value tables use), one `vpermps` that yields the
// codes as floats, then one FMA per query vector, where AVX2 spends a
// broadcast, shift, mask and conversion per 8 codes. The accumulators of a tile
// (NJ query vectors x 64 or 128 channels) stay in registers across the rows, in
// blockIndex's lane order (AccTile512). (3-bit rows decode by shifts instead,
// attend_codes3_avx512.cpp: this scheme was not faster for them; 8-bit rows
// keep the AVX2 kernel, docs/PERFORMANCE.md.) Same
// bits as AVX2, NEON and the reference: acc = fma(w, code, acc) per element,
// rows in order (kernels.h).
//
//===----------------------------------------------------------------------===//
#include "acc_tiles.h"
#include "avx512_util.h"
#include "x86_kernels.h"
#include "x86_target.h"

#include <cassert>
#include <immintrin.h>

using namespace kvq;
using kvq::avx512::AccTile512;
using kvq::avx512::blockIndex;
using kvq::x86::forEachAccTile;

namespace {

/// Channels c .. c+15 of a row of 4-bit codes (c % 16 == 0) as floats, in
/// block order (blockIndex: lane 2k is channel k, lane 2k + 1 channel
/// 8 + k): `vpermps` of the table {0, ..., 15} reads each lane's code.
KVQ_AVX512 inline __m512 codes16(const uint8_t *row, int64_t c) {
  return _mm512_permutexvar_ps(
      blockIndex<4>(row, c),
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

/// acc[j0+jj][c0 .. c0+W) += ws[r*stride + (j0+jj)*groups + c/G] *
/// code_r[c] over the rows in order; G is a multiple of 16, so one weight
/// covers a register.
struct CodeTile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *ws;
  int64_t wsStride, groups;
  int shift; ///< log2 G
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    constexpr int B = W / 16;
    AccTile512<NJ, W> t; // lanes in block order, as codes16's
    t.load(acc, j0, c0, d);
    auto &a = t.a;
    for (int64_t r = 0; r < n; ++r) {
      const float *w = ws + r * wsStride + j0 * groups;
      for (int b = 0; b < B; ++b) {
        const int64_t c = c0 + 16 * b;
        const __m512 v = codes16(rows[r], c);
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][b] = _mm512_fmadd_ps(
              _mm512_set1_ps(w[jj * groups + (c >> shift)]), v, a[jj][b]);
      }
    }
    t.store(acc, j0, c0, d);
  }
};

} // namespace

/// Tiles: four or two queries x 64 channels, one query x 128 (the caller,
/// attend_pairs.cpp's AVX-512 entry, checked the shape).
KVQ_AVX512 void kvq::x86::axpyCodes4Avx512(const uint8_t *const *rows,
                                           int64_t n, const float *ws,
                                           int64_t wsStride, int64_t G,
                                           int64_t nq, int64_t d, float *acc) {
  assert(d % 64 == 0 && G % 16 == 0 && (G & (G - 1)) == 0 && d % G == 0);
  forEachAccTile<64, 128>(nq, d,
                          CodeTile512{rows, n, ws, wsStride, d / G,
                                      __builtin_ctzll(static_cast<uint64_t>(G)),
                                      d, acc});
}
