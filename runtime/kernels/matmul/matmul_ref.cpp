//===- matmul_ref.cpp - kvq_matmul's portable kernel ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// matmul_body.h on scalars: 32 float partial sums and std::fma, the order
// every SIMD kernel reproduces (matmul.h).
//
//===----------------------------------------------------------------------===//
#include "matmul.h"

#include <cmath>

namespace {
struct Scalar {
  using T = float;
  static constexpr int W = 1;
  static constexpr int kDecodeRows = 1, kTileM = 1, kTileN = 1;
  static constexpr int kPassM = 0, kPassN = 0;
  static T zero() { return 0.0f; }
  static T loadF32(const float *p) { return *p; }
  static T loadF16(const uint16_t *p) { return kvq::halfToFloat(*p); }
  static T loadBf16(const uint16_t *p) {
    return kvq::bitsToFloat(static_cast<uint32_t>(*p) << 16);
  }
  static T fma(T a, T b, T c) { return std::fma(a, b, c); }
  static T add(T a, T b) { return a + b; }
  static float hsum(T v) { return v; }
};
} // namespace

#define KVQ_MATMUL_TARGET
#include "matmul_body.h"

void kvq::matmulRef(const MatmulArgs &a, int64_t j0, int64_t j1) {
  matmul_body::kernel<Scalar>(a, j0, j1);
}
