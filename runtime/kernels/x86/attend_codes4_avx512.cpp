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
using kvq::avx512::GroupRowsTile512;
using kvq::x86::forEachAccTile;

namespace {

/// Channels c .. c+15 of a row of 4-bit codes (c % 16 == 0) as floats, in
/// block order (blockIndex: lane 2k is channel k, lane 2k + 1 channel
/// 8 + k): `vpermps` of the table {0, ..., 15} reads each lane's code.
struct Codes4 {
  KVQ_AVX512 static __m512 at(const uint8_t *row, int64_t c) {
    return _mm512_permutexvar_ps(
        blockIndex<4>(row, c),
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
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
                          GroupRowsTile512<Codes4, AccTile512>{
                              rows, n, ws, wsStride, d / G,
                              __builtin_ctzll(static_cast<uint64_t>(G)), d,
                              acc});
}
