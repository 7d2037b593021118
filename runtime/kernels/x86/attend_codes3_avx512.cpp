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
#include "avx512_util.h"
#include "x86_kernels.h"
#include "x86_target.h"

#include <cassert>
#include <immintrin.h>

using namespace kvq;
using kvq::avx512::AccTile512InOrder;
using kvq::avx512::codes3x16;
using kvq::avx512::GroupRowsTile512;
using kvq::x86::forEachAccTile;

namespace {

/// Channels c .. c + 15 (c % 16 == 0) of a row of 3-bit codes as floats,
/// in channel order.
struct Codes3 {
  KVQ_AVX512 static __m512 at(const uint8_t *row, int64_t c) {
    return _mm512_cvtepi32_ps(codes3x16(row, c));
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
  forEachAccTile<64, 128>(nq, d,
                          GroupRowsTile512<Codes3, AccTile512InOrder>{
                              rows, n, ws, wsStride, d / G,
                              __builtin_ctzll(static_cast<uint64_t>(G)), d,
                              acc});
}
