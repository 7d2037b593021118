//===- nibble_tiles.h - Row tiles of nibble-major code blocks -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Shared by the SIMD versions of AttendOps::dotNibbleRows: where the words
// of a tile of rows (nibble i of each row, row t in bits 4t..4t+3) come
// from. Portable code, no ISA attributes.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_NIBBLE_TILES_H
#define KVQ_RUNTIME_LAYOUT_NIBBLE_TILES_H

#include "bitpack.h"

#include <cstdint>

namespace kvq {

/// Nibbles per head row the SIMD kernels keep tables for on the stack
/// (head_dim 512 at 2 bits, 256 at 4); longer rows take the reference.
constexpr int64_t kMaxTileNibbles = 256;

/// The head rows the SIMD dotNibbleRows kernels cover: 2- or 4-bit codes,
/// P = d * bits / 4 nibbles in whole words of four, at most
/// kMaxTileNibbles. The cache's shape decides it (selectAttendOps).
inline bool nibbleTiles(int bits, int64_t d) {
  const int64_t P = d * bits / 4;
  return (bits == 2 || bits == 4) && (d * bits) % 4 == 0 && P % 4 == 0 &&
         P <= kMaxTileNibbles;
}

/// Nibble i of rows [r, r + rows) (rows <= 16) of a block of n rows as one
/// word: for tiles that are partial or start at an odd nibble.
inline uint64_t gatherTileWord(const uint8_t *codes, int64_t n, int64_t i,
                               int64_t r, int64_t rows) {
  uint64_t w = 0;
  for (int64_t t = 0; t < rows; ++t)
    w |= static_cast<uint64_t>(nibbleAt(codes, i * n + r + t)) << (4 * t);
  return w;
}

/// Word i of a tile is the little-endian value at base + i * stride.
struct TileWords {
  const uint8_t *base;
  int64_t stride;
};

/// The words of nibbles nib0 .. nib0 + P - 1 for the `rows` rows at row r:
/// read in place when the tile has all `full` rows and starts on a byte
/// (nothing past the block is touched then), else gathered into buf.
inline TileWords tileWords(const uint8_t *codes, int64_t n, int64_t nib0,
                           int64_t P, int64_t r, int64_t rows, int64_t full,
                           uint64_t *buf) {
  const int64_t k = nib0 * n + r;
  if (rows == full && n % 2 == 0 && k % 2 == 0)
    return {codes + k / 2, n / 2};
  for (int64_t i = 0; i < P; ++i)
    buf[i] = gatherTileWord(codes, n, nib0 + i, r, rows);
  return {reinterpret_cast<const uint8_t *>(buf), 8};
}

/// out[t * outStride] = v[t] for the tile's rows.
inline void storeTileRows(const float *v, int64_t rows, float *out,
                          int64_t outStride) {
  for (int64_t t = 0; t < rows; ++t)
    out[t * outStride] = v[t];
}

/// The walk of the SIMD dotNibbleRows versions: for query vectors j0 .. nq-1
/// in steps of QJ (while QJ remain) and rows [0, m) in steps of two
/// TILE-row tiles (the second may be missing: it then repeats the first and
/// its sums are dropped), sums(a, b, q + j*d, va, vb) writes TILE canonical
/// sums per tile and query vector (va[jj*TILE + t]), stored to out. Two
/// tiles per step keep eight addition chains in flight per query vector.
/// Returns the first query vector not walked (nq when QJ is 1).
template <int TILE, int QJ, class TwoTileSums>
int64_t walkTilePairs(const uint8_t *codes, int64_t n, int64_t r0, int64_t m,
                      int64_t nib0, int64_t P, const float *q, int64_t j0,
                      int64_t nq, int64_t d, float *out, int64_t outStride,
                      const TwoTileSums &sums) {
  uint64_t bufA[kMaxTileNibbles], bufB[kMaxTileNibbles];
  alignas(64) float va[QJ * TILE], vb[QJ * TILE];
  int64_t j = j0;
  for (; j + QJ <= nq; j += QJ)
    for (int64_t r = 0; r < m; r += 2 * TILE) {
      const int64_t ra = m - r < TILE ? m - r : TILE;
      const int64_t rb = m - r - ra < TILE ? m - r - ra : TILE;
      const TileWords a = tileWords(codes, n, nib0, P, r0 + r, ra, TILE, bufA);
      const TileWords b =
          rb > 0 ? tileWords(codes, n, nib0, P, r0 + r + TILE, rb, TILE, bufB)
                 : a;
      sums(a, b, q + j * d, va, vb);
      for (int jj = 0; jj < QJ; ++jj) {
        float *o = out + r * outStride + j + jj;
        storeTileRows(va + jj * TILE, ra, o, outStride);
        storeTileRows(vb + jj * TILE, rb, o + TILE * outStride, outStride);
      }
    }
  return j;
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_NIBBLE_TILES_H
