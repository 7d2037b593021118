//===- attend_neon_nibble.cpp - Key dots over nibble-major blocks, NEON ---===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::dotNibbleRows for arm64 (contract and canonical order in
// kernels.h). Rows sit in lanes, eight per step (two registers): one
// 32-bit word holds nibble i of the eight rows; query vectors go in pairs
// (GQA) so each decode serves two. NEON has no 16-entry float
// permute, so each lane computes its term with nibbleTerm's own operations
// (2-bit: fma(q[2i+1], x >> 2, q[2i] * (x & 3)); 4-bit: q[i] * x), which
// gives the bits of the x86 kernels' tables, summed in the same order.
//
//===----------------------------------------------------------------------===//
#include "../neon/neon_kernels.h"

#include "nibble_tiles.h"

#include <arm_neon.h>

#include <algorithm>
#include <cassert>
#include <cstring>

using namespace kvq;

namespace {

/// Codes of nibble i for rows 0-3 (a) and 4-7 (b) of word w: 2-bit
/// x & 3 (lo) and x >> 2 (hi) as floats, 4-bit x (lo only).
template <int BITS>
inline void decode(const uint8_t *word, float32x4_t lo[2], float32x4_t hi[2]) {
  uint32_t w;
  std::memcpy(&w, word, 4);
  const uint32x4_t x = vdupq_n_u32(w), m = vdupq_n_u32(15);
  const int32_t sa[4] = {0, -4, -8, -12}, sb[4] = {-16, -20, -24, -28};
  const uint32x4_t nib[2] = {vandq_u32(vshlq_u32(x, vld1q_s32(sa)), m),
                             vandq_u32(vshlq_u32(x, vld1q_s32(sb)), m)};
  for (int h = 0; h < 2; ++h) {
    if constexpr (BITS == 2) {
      lo[h] = vcvtq_f32_u32(vandq_u32(nib[h], vdupq_n_u32(3)));
      hi[h] = vcvtq_f32_u32(vshrq_n_u32(nib[h], 2));
    } else {
      lo[h] = vcvtq_f32_u32(nib[h]);
    }
  }
}

/// Canonical sums of one tile of eight rows for NQ query vectors (q, q + d,
/// ...), the decode shared: out8[j*8 + t] for row t and query j. Each term
/// is nibbleTerm's operations (2-bit: fma(q[2i+1], hi, q[2i] * lo)).
template <int BITS, int NQ>
void tileSums(TileWords w, const float *q, int64_t d, int64_t P, float *out8) {
  float32x4_t S[NQ][4][2];
  for (int j = 0; j < NQ; ++j)
    for (int u = 0; u < 4; ++u)
      S[j][u][0] = S[j][u][1] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      const int64_t k = i + u;
      float32x4_t lo[2], hi[2];
      decode<BITS>(w.base + k * w.stride, lo, hi);
      for (int j = 0; j < NQ; ++j) {
        const float *qj = q + j * d;
        for (int h = 0; h < 2; ++h) {
          float32x4_t t;
          if constexpr (BITS == 2)
            t = vfmaq_f32(vmulq_n_f32(lo[h], qj[2 * k]),
                          vdupq_n_f32(qj[2 * k + 1]), hi[h]);
          else
            t = vmulq_n_f32(lo[h], qj[k]);
          S[j][u][h] = vaddq_f32(S[j][u][h], t);
        }
      }
    }
  for (int j = 0; j < NQ; ++j)
    for (int h = 0; h < 2; ++h)
      vst1q_f32(out8 + j * 8 + 4 * h,
                vaddq_f32(vaddq_f32(S[j][0][h], S[j][1][h]),
                          vaddq_f32(S[j][2][h], S[j][3][h])));
}

void dotNibbleRowsNeon(const NibbleRowsDot &a) {
  const uint8_t *codes = a.codes;
  const int64_t n = a.n, r0 = a.r0, m = a.m, nib0 = a.nib0;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  assert(nibbleTiles(bits, d));
  const int64_t P = d * bits / 4;
  uint64_t buf[kMaxTileNibbles];
  float v[16];
  for (int64_t r = 0; r < m; r += 8) {
    const int64_t rows = std::min<int64_t>(8, m - r);
    const TileWords w = tileWords(codes, n, nib0, P, r0 + r, rows, 8, buf);
    for (int64_t j = 0; j < nq;) {
      // Query vectors in pairs (GQA) share the decode.
      const int64_t pair = nq - j >= 2 ? 2 : 1;
      if (bits == 2 && pair == 2)
        tileSums<2, 2>(w, q + j * d, d, P, v);
      else if (bits == 2)
        tileSums<2, 1>(w, q + j * d, d, P, v);
      else if (pair == 2)
        tileSums<4, 2>(w, q + j * d, d, P, v);
      else
        tileSums<4, 1>(w, q + j * d, d, P, v);
      for (int64_t p = 0; p < pair; ++p)
        storeTileRows(v + 8 * p, rows, out + r * outStride + j + p, outStride);
      j += pair;
    }
  }
}

} // namespace

void kvq::neon::fillNibbleNeon(const AttendShape &s, AttendOps &ops) {
  if (nibbleTiles(s.keyBits, s.d))
    ops.dotNibbleRows = dotNibbleRowsNeon;
}
