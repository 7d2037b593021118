//===- attend_nibble_neon.cpp - Key dots over nibble-major blocks, NEON ---===//
//
// AttendOps::dotNibbleRows for arm64 (contract and canonical order in
// kernels.h). Rows sit in lanes, eight per step (two registers): one
// 32-bit word holds nibble i of the eight rows. NEON has no 16-entry float
// permute, so each lane computes its term with nibbleTerm's own operations
// (2-bit: fma(q[2i+1], x >> 2, q[2i] * (x & 3)); 4-bit: q[i] * x), which
// gives the bits of the x86 kernels' tables, summed in the same order.
//
//===----------------------------------------------------------------------===//
#include "neon_kernels.h"

#include "nibble_tiles.h"

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

using namespace kvq;

namespace {

/// Terms of nibble i for rows 0-3 (ta) and 4-7 (tb) of word w.
template <int BITS>
inline void terms(const uint8_t *word, const float *q, int64_t i,
                  float32x4_t &ta, float32x4_t &tb) {
  uint32_t w;
  std::memcpy(&w, word, 4);
  const uint32x4_t x = vdupq_n_u32(w), m = vdupq_n_u32(15);
  const int32_t sa[4] = {0, -4, -8, -12}, sb[4] = {-16, -20, -24, -28};
  const uint32x4_t xa = vandq_u32(vshlq_u32(x, vld1q_s32(sa)), m);
  const uint32x4_t xb = vandq_u32(vshlq_u32(x, vld1q_s32(sb)), m);
  if constexpr (BITS == 2) {
    const float32x4_t qa = vdupq_n_f32(q[2 * i]), qb = vdupq_n_f32(q[2 * i + 1]);
    const uint32x4_t three = vdupq_n_u32(3);
    ta = vfmaq_f32(vmulq_f32(qa, vcvtq_f32_u32(vandq_u32(xa, three))), qb,
                   vcvtq_f32_u32(vshrq_n_u32(xa, 2)));
    tb = vfmaq_f32(vmulq_f32(qa, vcvtq_f32_u32(vandq_u32(xb, three))), qb,
                   vcvtq_f32_u32(vshrq_n_u32(xb, 2)));
  } else {
    const float32x4_t s = vdupq_n_f32(q[i]);
    ta = vmulq_f32(s, vcvtq_f32_u32(xa));
    tb = vmulq_f32(s, vcvtq_f32_u32(xb));
  }
}

/// Canonical sums of one tile of eight rows.
template <int BITS>
void tileSums(TileWords w, const float *q, int64_t P, float *out8) {
  float32x4_t A[4], B[4];
  for (int u = 0; u < 4; ++u)
    A[u] = B[u] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < P; i += 4)
    for (int u = 0; u < 4; ++u) {
      float32x4_t ta, tb;
      terms<BITS>(w.base + (i + u) * w.stride, q, i + u, ta, tb);
      A[u] = vaddq_f32(A[u], ta);
      B[u] = vaddq_f32(B[u], tb);
    }
  vst1q_f32(out8, vaddq_f32(vaddq_f32(A[0], A[1]), vaddq_f32(A[2], A[3])));
  vst1q_f32(out8 + 4,
            vaddq_f32(vaddq_f32(B[0], B[1]), vaddq_f32(B[2], B[3])));
}

void dotNibbleRowsNeon(const uint8_t *codes, int64_t n, int64_t r0, int64_t m,
                       int64_t nib0, int bits, const float *q, int64_t nq,
                       int64_t d, float *out, int64_t outStride) {
  const int64_t P = d * bits / 4;
  if (P % 4 != 0 || P > kMaxTileNibbles)
    return referenceAttendOps().dotNibbleRows(codes, n, r0, m, nib0, bits, q,
                                              nq, d, out, outStride);
  uint64_t buf[kMaxTileNibbles];
  float v[8];
  for (int64_t j = 0; j < nq; ++j)
    for (int64_t r = 0; r < m; r += 8) {
      const int64_t rows = std::min<int64_t>(8, m - r);
      const TileWords w = tileWords(codes, n, nib0, P, r0 + r, rows, 8, buf);
      if (bits == 2)
        tileSums<2>(w, q + j * d, P, v);
      else
        tileSums<4>(w, q + j * d, P, v);
      storeTileRows(v, rows, out + r * outStride + j, outStride);
    }
}

} // namespace

void kvq::neon::fillNibbleNeon(AttendOps &ops) {
  ops.dotNibbleRows = dotNibbleRowsNeon;
}
