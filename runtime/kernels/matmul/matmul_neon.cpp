//===- matmul_neon.cpp - kvq_matmul on NEON -------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// matmul_body.h on 4-lane vectors: eight registers hold a dot product's 32
// partial sums; tiles of 3 weight rows use 24 accumulators of the 32
// registers. The lanes of the last vector are added as matmul.h orders
// them (0 + 2, 1 + 3, then the two), not by vaddvq_f32.
//
//===----------------------------------------------------------------------===//
#include "matmul.h"
#include "../neon/neon_kernels.h"

#include <arm_neon.h>

namespace {
struct Neon {
  using T = float32x4_t;
  static constexpr int W = 4;
  static constexpr int kDecodeRows = 3, kTileM = 1, kTileN = 3;
  static constexpr int kPassM = 0, kPassN = 0;
  static T zero() { return vdupq_n_f32(0.0f); }
  static T loadF32(const float *p) { return vld1q_f32(p); }
  static T loadF16(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
  }
  static T loadBf16(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
  }
  static T fma(T a, T b, T c) { return vfmaq_f32(c, a, b); }
  static T add(T a, T b) { return vaddq_f32(a, b); }
  static float hsum(T v) {
    const float32x2_t d = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
  }
};
} // namespace

#define KVQ_MATMUL_TARGET
#include "matmul_body.h"

void kvq::neon::matmulNeon(const MatmulArgs &a, int64_t j0, int64_t j1) {
  matmul_body::kernel<Neon>(a, j0, j1);
}
