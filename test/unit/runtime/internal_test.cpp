//===- internal_test.cpp - Reference kernels below the C ABI --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Checks that need the internal kernel interface: Lloyd-Max distortion per
// sweep (float levels, before fp16 rounding), the fit's radix sort, and the
// dispatch table.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "lloyd_fast.h"
#if defined(__x86_64__)
#include "x86_kernels.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

TEST(LloydInternal, DistortionIsMonotoneNonIncreasingPerSweep) {
  std::mt19937_64 gen(99);
  for (int bits : {2, 3, 4, 8}) {
    std::vector<float> x(3000),
        scratch(static_cast<size_t>(kvq::lloydScratchFloats(3000)));
    for (float &f : x) {
      double u = (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
      double s = u < 0.5 ? -1 : 1;
      f = static_cast<float>(-s * std::log(1 - 2 * std::fabs(u - 0.5)));
    }
    std::vector<double> trace(21);
    float levels[kvq::kMaxLevels];
    kvq::LloydFitArgs fit;
    fit.x = x.data();
    fit.n = 3000;
    fit.bits = bits;
    fit.iters = 20;
    fit.scratch = scratch.data();
    fit.levels = levels;
    fit.distortion = trace.data();
    ASSERT_EQ(kvq::lloydFitRef(fit), 3000);
    for (int i = 1; i <= 20; ++i)
      EXPECT_LE(trace[i], trace[i - 1]) << "bits " << bits << " sweep " << i;
    EXPECT_LT(trace[20], trace[0]) << "bits " << bits;
  }
}

namespace {
/// m values of one of five awkward patterns: wide exponents; signed zeros,
/// infinities and subnormals; one repeated value (whose radix passes are
/// all skipped); only negative values; few distinct integers.
std::vector<float> awkwardSortInput(std::mt19937_64 &gen, int64_t m,
                                    int pattern) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(static_cast<size_t>(m));
  for (float &f : x) {
    const double u = static_cast<double>(gen() >> 11) / 9007199254740992.0;
    switch (pattern) {
    case 0:
      f = static_cast<float>(std::ldexp(u - 0.5, int(gen() % 80) - 40));
      break;
    case 1: {
      const float pick[] = {0.0f, -0.0f, inf, -inf, 1e-45f, -1e-45f, 2.5f};
      f = pick[gen() % 7];
      break;
    }
    case 2:
      f = -3.25f;
      break;
    case 3:
      f = -static_cast<float>(u) * 1e6f;
      break;
    default:
      f = static_cast<float>(static_cast<int>(gen() % 5) - 2);
    }
  }
  return x;
}
} // namespace

TEST(LloydInternal, SortFloatsOrdersLikeStdSort) {
  std::mt19937_64 gen(5);
  // Lengths around the old stack buffer (512 keys) and the AVX-512
  // network's (128 values).
  for (int64_t m : {0, 1, 2, 3, 127, 511, 512, 513, 5000})
    for (int pattern = 0; pattern < 5; ++pattern) {
      const std::vector<float> x = awkwardSortInput(gen, m, pattern);
      std::vector<float> radix = x, expected = x;
      std::vector<float> work(static_cast<size_t>(2 * m)); // exactly the keys
      kvq::sortFloats(radix.data(), m, work.data());
      std::sort(expected.begin(), expected.end());
      for (int64_t i = 0; i < m; ++i) {
        SCOPED_TRACE(testing::Message()
                     << "m " << m << " pattern " << pattern << " i " << i);
        ASSERT_EQ(radix[size_t(i)], expected[size_t(i)]);
        if (i > 0 && radix[size_t(i)] == 0.0f && radix[size_t(i - 1)] == 0.0f)
          EXPECT_FALSE(!std::signbit(radix[size_t(i - 1)]) &&
                       std::signbit(radix[size_t(i)]))
              << "-0 after +0";
      }
      // The same multiset of bit patterns (no zero lost its sign).
      auto bits = [](std::vector<float> v) {
        std::vector<uint32_t> b(v.size());
        if (!v.empty())
          std::memcpy(b.data(), v.data(), 4 * v.size());
        std::sort(b.begin(), b.end());
        return b;
      };
      EXPECT_EQ(bits(radix), bits(x)) << "m " << m << " pattern " << pattern;
    }
}

#if defined(__x86_64__)
// The AVX-512 table's fits sort up to 128 values in registers: the bytes
// must be sortFloats', signed zeros included, at every length around the
// network's register counts (1, 2, 4 and 8 registers) and past them.
TEST(LloydInternal, NetworkSortGivesSortFloatsBytes) {
  if (!__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937_64 gen(6);
  for (int64_t m = 0; m <= 140; ++m)
    for (int pattern = 0; pattern < 5; ++pattern)
      for (int round = 0; round < 3; ++round) {
        const std::vector<float> x = awkwardSortInput(gen, m, pattern);
        std::vector<float> radix = x, network = x;
        std::vector<float> w1(static_cast<size_t>(2 * m)), w2 = w1;
        kvq::sortFloats(radix.data(), m, w1.data());
        kvq::x86::sortFloatsForTests(network.data(), m, w2.data());
        ASSERT_EQ(0, m ? std::memcmp(radix.data(), network.data(), 4 * m) : 0)
            << "m " << m << " pattern " << pattern;
      }
}
#endif

TEST(LloydInternal, NearestLevelTiesGoToTheLowerLevel) {
  float levels[] = {0.0f, 1.0f, 1.0f, 3.0f};
  EXPECT_EQ(kvq::nearestLevel(levels, 4, 0.5f), 0);
  EXPECT_EQ(kvq::nearestLevel(levels, 4, 1.0f), 1);
  EXPECT_EQ(kvq::nearestLevel(levels, 4, 2.0f), 1);
  EXPECT_EQ(kvq::nearestLevel(levels, 4, 2.5f), 3);
  EXPECT_EQ(kvq::nearestLevel(levels, 4, 9.0f), 3);
  EXPECT_EQ(kvq::nearestLevel(levels, 4, -9.0f), 0);
}

TEST(KernelTable, ActiveTableIsTheSimdTableWhenThereIsOne) {
  EXPECT_STREQ(kvq::referenceKernels().name, "reference");
  const kvq::KernelTable *simd = kvq::simdKernels();
  const char *env = std::getenv("KVQ_KERNELS");
  if (simd && !(env && std::string(env) == "reference"))
    EXPECT_EQ(&kvq::kernels(), simd);
  else
    EXPECT_EQ(&kvq::kernels(), &kvq::referenceKernels());
}

TEST(OutlierCount, CeilWithoutFloatRoundUp) {
  EXPECT_EQ(kvq::outlierCount(0.07f, 100), 7); // 0.07f * 100 = 7.0000000298
  EXPECT_EQ(kvq::outlierCount(0.01f, 128), 2);
  EXPECT_EQ(kvq::outlierCount(0.01f, 64), 1);
  EXPECT_EQ(kvq::outlierCount(0.0f, 64), 0);
  EXPECT_EQ(kvq::outlierCount(0.5f, 0), 0);
}

TEST(Fp16Internal, SubnormalsAndOverflow) {
  EXPECT_EQ(kvq::floatToHalf(5.9604644775390625e-8f), 0x0001);
  EXPECT_EQ(kvq::floatToHalf(2.98023223876953125e-8f), 0x0000); // tie -> even
  EXPECT_EQ(kvq::floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(kvq::floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(kvq::floatToHalf(-1e-30f), 0x8000);
  EXPECT_TRUE(std::isnan(kvq::halfToFloat(kvq::floatToHalf(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h)
    ASSERT_EQ(kvq::floatToHalf(kvq::halfToFloat(static_cast<uint16_t>(h))), h);
}
