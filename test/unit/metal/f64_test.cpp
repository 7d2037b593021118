//===- f64_test.cpp - The kernels' software binary64 against hardware ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_f64.h stands in for `double` on the GPU; every operation must round
// exactly like the host's IEEE double. Checked on random operands drawn the
// way the kernels use them (float-valued inputs, sums, products, quotients)
// and on edge cases (signed zeros, ties, subnormal floats, carries).
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kernels/kvq_f64.h"

#include "shim/undef.h"

#include "runtime/test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace {

uint64_t bitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
double fromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
uint32_t fbits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// A double from a random float-ish or wide-range distribution.
double sample(kvqtest::Rng &rng, int kind) {
  switch (kind % 4) {
  case 0:
    return static_cast<float>(rng.normal() * 10.0);
  case 1:
    return rng.normal() *
           std::ldexp(1.0, static_cast<int>(rng.uniform(-60, 60)));
  case 2:
    return static_cast<float>(rng.laplace(1e-3));
  default: // exact small integers and halves
    return std::floor(rng.uniform(-64, 64)) * 0.5;
  }
}

void expectSame(double expected, uint64_t got, const char *op, double a,
                double b) {
  EXPECT_EQ(bitsOf(expected), got)
      << op << "(" << a << ", " << b << ") = " << expected << " but got "
      << fromBits(got);
}

TEST(MetalSoftDouble, ArithmeticMatchesHardwareDouble) {
  kvqtest::Rng rng(2024);
  for (int i = 0; i < 200000; ++i) {
    double a = sample(rng, i), b = sample(rng, i / 4 + 1);
    uint64_t x = bitsOf(a), y = bitsOf(b);
    expectSame(a + b, kvq_f64_add(x, y), "add", a, b);
    expectSame(a - b, kvq_f64_sub(x, y), "sub", a, b);
    expectSame(a * b, kvq_f64_mul(x, y), "mul", a, b);
    if (b != 0.0)
      expectSame(a / b, kvq_f64_div(x, y), "div", a, b);
    expectSame(std::sqrt(std::fabs(a)), kvq_f64_sqrt(bitsOf(std::fabs(a))),
               "sqrt", a, 0);
    if (::testing::Test::HasFailure())
      return;
  }
}

TEST(MetalSoftDouble, ConversionsMatchHardware) {
  kvqtest::Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    double d = sample(rng, i) * (i % 3 == 0 ? 1e-30 : 1.0);
    float f = static_cast<float>(d);
    ASSERT_EQ(fbits(f), fbits(kvq_f64_to_float(bitsOf(d)))) << d;
    ASSERT_EQ(bitsOf(static_cast<double>(f)), kvq_f64_from_float(f)) << f;
    double big = d * 1e6;
    if (!(std::fabs(big) < 0x1p62)) // outside the documented domain
      big = 0.25;
    ASSERT_EQ(static_cast<int64_t>(big), kvq_f64_to_i64(bitsOf(big))) << big;
    ASSERT_EQ(static_cast<int64_t>(std::ceil(big)),
              kvq_f64_ceil_i64(bitsOf(big)))
        << big;
    int64_t n = static_cast<int64_t>(rng.uniform(-1e15, 1e15));
    ASSERT_EQ(bitsOf(static_cast<double>(n)), kvq_f64_from_i64(n)) << n;
  }
}

TEST(MetalSoftDouble, EdgeCases) {
  const double zero = 0.0, negZero = -0.0;
  EXPECT_EQ(bitsOf(zero), kvq_f64_add(bitsOf(negZero), bitsOf(zero)));
  EXPECT_EQ(bitsOf(negZero), kvq_f64_add(bitsOf(negZero), bitsOf(negZero)));
  EXPECT_EQ(bitsOf(zero), kvq_f64_sub(bitsOf(1.5), bitsOf(1.5)));
  EXPECT_EQ(bitsOf(negZero), kvq_f64_mul(bitsOf(-2.0), bitsOf(zero)));
  // Float subnormals, the smallest and largest floats.
  for (float f : {std::numeric_limits<float>::denorm_min(), 1e-40f,
                  std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), -3.0e-39f}) {
    EXPECT_EQ(bitsOf(static_cast<double>(f)), kvq_f64_from_float(f)) << f;
    EXPECT_EQ(fbits(f), fbits(kvq_f64_to_float(kvq_f64_from_float(f)))) << f;
  }
  // Ties to even when narrowing to float, and overflow to infinity.
  double tie = 1.0 + std::ldexp(1.0, -24);
  EXPECT_EQ(fbits(static_cast<float>(tie)),
            fbits(kvq_f64_to_float(bitsOf(tie))));
  double tieUp = 1.0 + 3 * std::ldexp(1.0, -24);
  EXPECT_EQ(fbits(static_cast<float>(tieUp)),
            fbits(kvq_f64_to_float(bitsOf(tieUp))));
  EXPECT_EQ(fbits(std::numeric_limits<float>::infinity()),
            fbits(kvq_f64_to_float(bitsOf(1e300))));
  EXPECT_EQ(fbits(0.0f), fbits(kvq_f64_to_float(bitsOf(1e-300))));
  // Carry out of the mantissa when rounding up.
  double justBelow2 = std::nextafter(2.0, 0.0);
  EXPECT_EQ(bitsOf(justBelow2 + std::ldexp(1.0, -53)),
            kvq_f64_add(bitsOf(justBelow2), bitsOf(std::ldexp(1.0, -53))));
  // What the kernels compute: outlier counts and quantile positions.
  for (int n = 1; n < 3000; n += 7)
    for (float f : {0.01f, 0.07f, 0.1f, 0.5f, 0.99f}) {
      double k = std::ceil(static_cast<double>(f) * n - 1e-6);
      uint64_t soft =
          kvq_f64_sub(kvq_f64_mul(kvq_f64_from_float(f), kvq_f64_from_i64(n)),
                      bitsOf(1e-6));
      EXPECT_EQ(static_cast<int64_t>(k), kvq_f64_ceil_i64(soft)) << f << n;
    }
}

} // namespace
