//===- kvq_rope.h - Key rotation of a pre-RoPE Metal cache ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A cache with a RoPE (kvq_config.rope_style != NONE) stores keys before
// the rotation; fetch and attention rotate each dequantized key element at
// its position t (docs/RUNTIME.md "Pre-RoPE keys", docs/METAL.md). The
// angles are the CPU's (runtime/kernels/rope/rope.cpp), computed on the host and
// passed as two tables of (cos, sin) float pairs, [rows][head_dim/2][2]:
//  - low: the 256 rows of positions j = 0..255 (one per cache);
//  - high: one row per 256-token block m, the angles of position 256 m
//    (grown by each layer with its length).
// The cos/sin of t = 256 m + j and the rotated element are combined with
// the float operations of Rope::angles and Rope::rotate, in their order,
// one rounding per statement (never fused: kvq_common.h's pragmas, fast
// math off), so a fetched key is bit-identical to the CPU cache's.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_KERNELS_KVQ_ROPE_H
#define KVQ_RUNTIME_METAL_KERNELS_KVQ_ROPE_H

#include "kvq_common.h"

/// kvq_rope_style values (runtime.h) and the rows of the low table.
#define KVQ_K_ROPE_NONE 0u
#define KVQ_K_ROPE_INTERLEAVED 1u
#define KVQ_K_ROPE_BLOCK 256ul

/// The channel of a head paired with channel k: (2i, 2i+1) when
/// interleaved, (i, i + dim/2) when half.
inline ulong kvq_rope_partner(uint style, ulong dim, ulong k) {
  if (style == KVQ_K_ROPE_INTERLEAVED)
    return k ^ 1ul;
  const ulong half_dim = dim / 2ul;
  return k < half_dim ? k + half_dim : k - half_dim;
}

/// Channel k of a head rotated at position t: x is its pre-RoPE value, y
/// the value of its partner channel (kvq_rope_partner).
inline float kvq_rope_rotate(device const float *low, device const float *high,
                             uint style, ulong dim, ulong t, ulong k, float x,
                             float y) {
  const ulong pairs = dim / 2ul;
  const bool interleaved = style == KVQ_K_ROPE_INTERLEAVED;
  const ulong i = interleaved ? k / 2ul : k % pairs;
  const bool first = interleaved ? (k & 1ul) == 0ul : k < pairs;
  const ulong lo = ((t % KVQ_K_ROPE_BLOCK) * pairs + i) * 2ul;
  const ulong hi = ((t / KVQ_K_ROPE_BLOCK) * pairs + i) * 2ul;
  const float cl = low[lo], sl = low[lo + 1ul];
  const float ch = high[hi], sh = high[hi + 1ul];
  // c = ch cl - sh sl, s = sh cl + ch sl (Rope::angles).
  const float cc = ch * cl;
  const float ss = sh * sl;
  const float c = cc - ss;
  const float sc = sh * cl;
  const float cs = ch * sl;
  const float s = sc + cs;
  // Pair (a, b) -> (a c - b s, a s + b c) (Rope::rotate).
  if (first) {
    const float ac = x * c;
    const float bs = y * s;
    return ac - bs;
  }
  const float as = y * s;
  const float bc = x * c;
  return as + bc;
}

#endif // KVQ_RUNTIME_METAL_KERNELS_KVQ_ROPE_H
