//===- rope_args.h - Pre-RoPE score operands --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The operands of the attention ops that score pre-RoPE keys
// (AttendOps::ropeNibbleTiles, ropeCodeRows, ropeHalfRows; kernels.h),
// whose kernels are in this folder.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_ROPE_ROPE_ARGS_H
#define KVQ_RUNTIME_KERNELS_ROPE_ROPE_ARGS_H

#include <cstdint>

namespace kvq {

/// Most tiles of 16 rows one ropeNibbleTiles call scores.
constexpr int64_t kRopeNibbleMaxTiles = 4;

/// ropeNibbleTiles' operands: one head's 2- or 4-bit keys in a
/// nibble-major KIVI key group (bitpack.h), stored before RoPE.
struct RopeNibbleTiles {
  const uint8_t *codes = nullptr; ///< the group's codes
  int bits = 0;                   ///< 2 or 4
  int64_t rows = 0;               ///< its coded rows (even)
  int64_t row0 = 0;               ///< the first tile's first coded row (even)
  int64_t tiles = 0;              ///< 1 .. kRopeNibbleMaxTiles tiles of 16 rows
  int64_t nib0 = 0;               ///< the head's first nibble
  const float *scale = nullptr, *zero = nullptr; ///< the head's d channels
  /// Angles of tile u's pair i, token t at cos[(u * d/2 + i) * 16 + t].
  const float *cos = nullptr, *sin = nullptr;
  /// Query vector j's pair sides q_a, q_b, -q_a at q + j * qStride, each
  /// d/2 floats (RopeQueries' layout).
  const float *q = nullptr;
  int64_t qStride = 0, nq = 0, d = 0;
  bool interleaved = false; ///< pairs (2i, 2i+1), else (i, i + d/2)
  float *out = nullptr;     ///< out[(u * 16 + t) * outStride + j]
  int64_t outStride = 0;
};

/// What the pre-RoPE row kernels (ropeCodeRows, ropeHalfRows) share: n
/// rows of one head, their angles by rows, the query vectors and where
/// the scores go.
struct RopeRowsScore {
  int64_t n = 0; ///< 1 .. 16 rows
  /// Angles of row t's pair i at cos[t * d/2 + i].
  const float *cos = nullptr, *sin = nullptr;
  /// Query vector j's pair sides q_a, q_b, -q_a at q + j * qStride, each
  /// d/2 floats (RopeQueries' layout).
  const float *q = nullptr;
  int64_t qStride = 0, nq = 0, d = 0;
  bool interleaved = false; ///< pairs (2i, 2i+1), else (i, i + d/2)
  float *out = nullptr;     ///< out[t * outStride + j]
  int64_t outStride = 0;
};

/// ropeCodeRows' operands: one head's keys in n rows of row-major packed
/// codes (a KIVI key group's rows, stored before RoPE).
struct RopeCodeRows : RopeRowsScore {
  /// Row t's codes of the head: channel c at bits [c * bits, (c + 1) *
  /// bits) from bit 0 of rows[t], as packedCodeAt reads them.
  const uint8_t *const *rows = nullptr;
  int bits = 0;                                  ///< 3
  const float *scale = nullptr, *zero = nullptr; ///< the head's d channels
};

/// ropeHalfRows' operands: one head's keys in n fp16 rows (rows[t], d
/// halves each: the fp16 cache, KIVI's window and sinks).
struct RopeHalfRows : RopeRowsScore {
  const uint16_t *const *rows = nullptr;
};

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_ROPE_ROPE_ARGS_H
