//===- attend_avx512_codes.cpp - Weighted sums of 3-/4-bit rows, AVX-512 --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::axpyCodesRows for 3- and 4-bit value codes on AVX-512F (the
// entry and its selection are attend_x86_pairs.cpp's, where 2-bit rows go in
// pairs). Sixteen codes per register, then one FMA per query vector, where
// AVX2 spends twice the operations per 16 codes:
// - 4-bit: their 8 bytes broadcast as one 64-bit word and shifted
//   (blockIndex, as KVQuant's value tables use), one `vpermps` that yields
//   the codes as floats, lanes in blockIndex's order (AccTile512);
// - 3-bit: their 6 bytes as two words in the two halves of one register,
//   one variable shift and a mask (codes3x16), lanes in channel order
//   (AccTile512InOrder); the `vpermps` scheme was not faster for them.
// 8-bit rows keep the AVX2 kernel (docs/PERFORMANCE.md). The accumulators of
// a tile (NJ query vectors x 64 or 128 channels) stay in registers across
// the rows (GroupRowsTile512). Same bits as AVX2, NEON and the reference:
// acc = fma(w, code, acc) per element, rows in order (kernels.h).
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/avx512_util.h"
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <cassert>
#include <immintrin.h>

using namespace kvq;
using kvq::avx512::AccTile512;
using kvq::avx512::AccTile512InOrder;
using kvq::avx512::blockIndex;
using kvq::avx512::codes3x16;
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

/// Channels c .. c + 15 (c % 16 == 0) of a row of 3-bit codes as floats,
/// in channel order.
struct Codes3 {
  KVQ_AVX512 static __m512 at(const uint8_t *row, int64_t c) {
    return _mm512_cvtepi32_ps(codes3x16(row, c));
  }
};

/// Tiles: four or two queries x 64 channels, one query x 128.
template <class Codes, template <int, int> class Acc>
KVQ_AVX512 void axpyTiles(const uint8_t *const *rows, int64_t n,
                          const float *ws, int64_t wsStride, int64_t G,
                          int64_t nq, int64_t d, float *acc) {
  forEachAccTile<64, 128>(
      nq, d,
      GroupRowsTile512<Codes, Acc>{rows, n, ws, wsStride, d / G,
                                   __builtin_ctzll(static_cast<uint64_t>(G)), d,
                                   acc});
}

} // namespace

/// The caller, attend_x86_pairs.cpp's AVX-512 entry, checked the shape.
KVQ_AVX512 void kvq::x86::axpyCodes34Avx512(const CodeRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t wsStride = a.wsStride, G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert((bits == 3 || bits == 4) && d % 64 == 0 && G % 16 == 0 &&
         (G & (G - 1)) == 0 && d % G == 0);
  if (bits == 4)
    axpyTiles<Codes4, AccTile512>(rows, n, ws, wsStride, G, nq, d, acc);
  else
    axpyTiles<Codes3, AccTile512InOrder>(rows, n, ws, wsStride, G, nq, d, acc);
}
