//===- rope.h - Rotary position embedding of a pre-RoPE key cache -*- C++ -*-=//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A cache configured with a RoPE (kvq_config.rope_style != NONE) stores keys
// before the rotation (KVQuant's pre-RoPE key quantization) and rotates each
// dequantized key at its position when it attends or fetches. The rotation
// must give the same bits on every architecture, so the angles are computed
// by this file's own exp/log/sin/cos in double, built from IEEE basic
// operations only (no libm, whose last bits differ between x86_64 and
// arm64), and rounded to float (docs/RUNTIME.md, "Pre-RoPE keys").
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_ROPE_ROPE_H
#define KVQ_RUNTIME_KERNELS_ROPE_ROPE_H

#include "kvq/runtime.h"

#include <cstdint>
#include <vector>

/// The portable loops of the pre-RoPE key pass (rope.cpp, attention.cpp,
/// the stores' loadKeys): on x86_64 an AVX2 clone is chosen at load time.
/// Both clones run the same element-wise operations (no contraction:
/// -ffp-contract=off), so they give the same bits, as arm64 does.
#if defined(__x86_64__) && defined(__ELF__)
#define KVQ_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define KVQ_AVX2_CLONE
#endif

namespace kvq {

/// Tokens per tile of the pre-RoPE key pass (attendKeysRotated): a tile's
/// keys by columns are 16 lanes per channel (two AVX2 vectors).
constexpr int64_t kKeyTile = 16;

/// The RoPE of a cache: for pair i of a head (channels (2i, 2i+1) when
/// interleaved, (i, i + d/2) when half), the angle at position p is
/// p * theta^(-2i/d). cos/sin of position p = 256 m + j are combined in
/// float from two tables, j's (256 rows, built once) and 256 m's (one row,
/// built when a caller moves to a new m): c = ch cl - sh sl,
/// s = sh cl + ch sl.
class Rope {
public:
  /// Tables for cfg; an empty (disabled) Rope when cfg has no RoPE. May
  /// throw std::bad_alloc.
  explicit Rope(const kvq_config &cfg);

  bool enabled() const { return style_ != KVQ_ROPE_NONE; }
  /// Pairs (2i, 2i+1); else (i, i + d/2).
  bool interleaved() const { return style_ == KVQ_ROPE_INTERLEAVED; }

  /// Per-caller state: the cos/sin row of the current 256-token block.
  struct Cursor {
    int64_t block = -1;
    std::vector<float> cosHi, sinHi; ///< [d/2]
    std::vector<float> cos, sin;     ///< [d/2] of the last position
  };

  /// Keep the high rows (the cos/sin row of each 256-position block) of
  /// positions below `positions` in a table, so that a cursor entering a
  /// block copies its row instead of evaluating d/2 sines and cosines: at
  /// 32K tokens every attention call entered 128 blocks per layer. The
  /// attention entry calls it before splitting the work; it changes state
  /// behind a const reference (the table is a cache of values the Rope
  /// defines), which is safe because one kvq cache is used from one thread
  /// at a time (docs/RUNTIME.md, "Thread-safety"). Best effort: out of
  /// memory, the table stays as it was and cursors compute the rows, the
  /// same bits either way.
  void cover(int64_t positions) const noexcept;

  /// cos/sin of every pair at position pos into cursor.cos / cursor.sin.
  void angles(int64_t pos, Cursor &cursor) const;

  /// Rotate `heads` consecutive head rows of `row` (heads * d floats) by
  /// the angles last computed into cursor.
  void rotate(float *row, int64_t heads, const Cursor &cursor) const;

  /// angles(pos) then rotate: the post-RoPE key row of position pos.
  void rotateAt(float *row, int64_t heads, int64_t pos, Cursor &cursor) const {
    angles(pos, cursor);
    rotate(row, heads, cursor);
  }

  // The tiles of the pre-RoPE key pass (attendKeysRotated): the same
  // operations as angles, element by element, so its scores use the very
  // angles fetch rotates with.

  /// angles() of positions pos0 .. pos0 + n - 1: pair i of position
  /// pos0 + t at cosOut[t * tStride + i * iStride] (sinOut likewise).
  void anglesTile(int64_t pos0, int64_t n, Cursor &cursor, float *cosOut,
                  float *sinOut, int64_t tStride, int64_t iStride) const;

  /// rotate() of n rows of `heads` heads (rows[t * heads * d + ...]) by
  /// the angles of row t at cos[t * d/2 + i] (anglesTile, tStride d/2).
  void rotateRows(float *rows, int64_t n, int64_t heads, const float *cos,
                  const float *sin) const;

private:
  /// cursor.cosHi / sinHi for the block holding pos.
  void moveTo(int64_t pos, Cursor &cursor) const;
  /// The high row of block `block` into cosOut / sinOut (pairs floats).
  void highRow(int64_t block, float *cosOut, float *sinOut) const;

  int32_t style_ = KVQ_ROPE_NONE;
  int64_t d_ = 0, pairs_ = 0;
  std::vector<double> invFreq_;      ///< theta^(-2i/d), [pairs]
  std::vector<float> cosLo_, sinLo_; ///< [256][pairs]
  /// The same by tiles: [256 / kKeyTile][pairs][kKeyTile] (anglesTile).
  std::vector<float> cosLoT_, sinLoT_;
  /// highRow of blocks [0, hiBlocks_): [block][pairs] (cover).
  mutable std::vector<float> cosHi_, sinHi_;
  mutable int64_t hiBlocks_ = 0;
};

/// Deterministic double math of the angles (exposed for the unit test):
/// results depend only on IEEE-754 basic operations and the argument.
namespace detmath {
double log(double x);                        ///< x > 0, finite
double exp(double x);                        ///< |x| < 700
void sincos(double x, double *s, double *c); ///< 0 <= x < 2^40
} // namespace detmath

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_ROPE_ROPE_H
