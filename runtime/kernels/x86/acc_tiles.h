//===- acc_tiles.h - Tiles of the accumulators of weighted sums -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The weighted-sum kernels over many rows (axpyCodesRows, axpyHalfRows,
// axpyLevelRows, axpyLutRows and their AVX-512 versions) hold a tile of the
// [nq][d] accumulator plane in registers for a whole pass over the rows, so
// each accumulator is loaded and stored once per call. Which tiles cover
// the plane is decided here, once for all of them (the tile-function
// pattern of IREE's mmt4d ukernel): a kernel writes the tile for a given
// shape, this driver walks the plane. The tiling changes no sum, since each
// accumulator still takes the rows in order. The NEON kernels accumulate
// row by row in memory and have no tiles. The one-row dot kernels share
// the walk over query vectors in blocks of at most four here as well
// (forEachQueryBlock).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_X86_ACC_TILES_H
#define KVQ_RUNTIME_KERNELS_X86_ACC_TILES_H

#include <cstdint>

namespace kvq {
namespace x86 {

/// Calls tile.run<NJ, W>(j0, c0) for tiles covering queries [0, nq) x
/// channels [0, d): queries in fours, then a pair, then one; Step channels
/// per tile of several queries and, for a lone query, Wide channels while
/// they fit (its tile has registers to spare), then Step. d % Step == 0.
/// Not a target function itself: it inlines into the kernel's.
template <int Step, int Wide, class Tile>
inline void forEachAccTile(int64_t nq, int64_t d, const Tile &tile) {
  static_assert(Wide % Step == 0, "a wide tile is whole steps");
  int64_t j = 0;
  for (; j + 4 <= nq; j += 4)
    for (int64_t c = 0; c < d; c += Step)
      tile.template run<4, Step>(j, c);
  if (nq - j >= 2) {
    for (int64_t c = 0; c < d; c += Step)
      tile.template run<2, Step>(j, c);
    j += 2;
  }
  if (nq - j == 1) {
    int64_t c = 0;
    for (; c + Wide <= d; c += Wide)
      tile.template run<1, Wide>(j, c);
    for (; c < d; c += Step)
      tile.template run<1, Step>(j, c);
  }
}

/// Calls block.run<NJ>(j) over the query vectors [0, nq): fours, then the
/// last three, two or one at once. The dot kernels of one row (AVX2 and
/// AVX-512) hold NJ accumulators per call; like forEachAccTile it inlines
/// into the kernel's target function.
template <class Block>
inline void forEachQueryBlock(int64_t nq, const Block &block) {
  int64_t j = 0;
  for (; j + 4 <= nq; j += 4)
    block.template run<4>(j);
  switch (nq - j) {
  case 3:
    block.template run<3>(j);
    break;
  case 2:
    block.template run<2>(j);
    break;
  case 1:
    block.template run<1>(j);
    break;
  default:
    break;
  }
}

} // namespace x86
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_X86_ACC_TILES_H
