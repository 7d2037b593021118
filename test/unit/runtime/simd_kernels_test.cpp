//===- simd_kernels_test.cpp - SIMD tables against the reference ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Differential tests in the manner of IREE's mmt4d tests: every entry of the
// SIMD table of this build (AVX2+F16C on x86_64, NEON on arm64, run under
// qemu there) is run next to the scalar reference on the same seeded inputs,
// including the awkward ones (signed zeros, constant groups, values exactly
// halfway between two codes, subnormals, duplicate levels, ties in |x|).
// Codes, scales, zeros, levels, masks and dequantized values must match bit
// for bit; the fused-attention inner ops reorder float sums and are checked
// to a stated relative tolerance.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace kvq;
using kvqtest::Rng;

namespace {

const KernelTable *simdOrSkip() { return simdKernels(); }

#define REQUIRE_SIMD()                                                         \
  const KernelTable *simd = simdOrSkip();                                      \
  if (!simd)                                                                   \
    GTEST_SKIP() << "no SIMD table on this CPU";                               \
  const KernelTable &ref = referenceKernels()

/// fp16-representable test data with the cases that break naive SIMD.
std::vector<float> awkwardData(uint64_t seed, int64_t n, int pattern) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = rng.normal();
    switch (pattern) {
    case 1: // many signed zeros and repeated values
      v = (i % 3 == 0) ? ((i / 3) % 2 ? -0.0 : 0.0) : std::nearbyint(v * 2);
      break;
    case 2: // constant runs (scale 0 groups)
      v = (i / 16) % 2 ? 1.5 : v;
      break;
    case 3: // wide range incl. fp16 subnormals
      v = v * std::ldexp(1.0, static_cast<int>(i % 40) - 24);
      break;
    case 4: // exact multiples of a quarter: many codes land on .5 exactly
      v = std::nearbyint(v * 8) / 4;
      break;
    default:
      break;
    }
    v = std::max(-60000.0, std::min(60000.0, v)); // finite in fp16
    x[static_cast<size_t>(i)] = roundToHalf(static_cast<float>(v));
  }
  return x;
}

std::vector<uint16_t> toHalfs(const std::vector<float> &x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    h[i] = floatToHalf(x[i]);
  return h;
}

struct Case {
  int64_t rows, cols, group;
  int axis;
};

std::vector<Case> gridCases() {
  std::vector<Case> cases;
  for (int axis : {KVQ_AXIS_PER_TOKEN, KVQ_AXIS_PER_CHANNEL})
    for (int64_t group : {4, 8, 16, 32, 64}) {
      cases.push_back({64, 128, group, axis});
      if (axis == KVQ_AXIS_PER_TOKEN)
        cases.push_back({24, group * 3, group, axis});
      else
        cases.push_back({group * 3, 24, group, axis});
    }
  cases.push_back({32, 20, 4, KVQ_AXIS_PER_TOKEN}); // odd column count
  cases.push_back({8, 20, 8, KVQ_AXIS_PER_CHANNEL});
  // The AVX-512 kernels' shapes: sixteen per-token groups per step with a
  // partial last step, head-sized groups, 32-column chunks.
  cases.push_back({13, 96, 32, KVQ_AXIS_PER_TOKEN});
  cases.push_back({5, 256, 128, KVQ_AXIS_PER_TOKEN});
  cases.push_back({64, 96, 32, KVQ_AXIS_PER_CHANNEL});
  cases.push_back({32, 32, 16, KVQ_AXIS_PER_CHANNEL});
  return cases;
}

Grid toGrid(const Case &c) {
  Grid g;
  g.rows = c.rows;
  g.cols = c.cols;
  g.group = c.group;
  g.axis = c.axis;
  return g;
}

const void *data(kvq_dtype dt, const std::vector<float> &f,
                 const std::vector<uint16_t> &h) {
  return dt == KVQ_DTYPE_F16 ? static_cast<const void *>(h.data())
                             : static_cast<const void *>(f.data());
}

std::string label(const Case &c, int bits, int dt, int layout, int pattern) {
  return "rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) +
         " group " + std::to_string(c.group) + " axis " +
         std::to_string(c.axis) + " bits " + std::to_string(bits) + " dtype " +
         std::to_string(dt) + " layout " + std::to_string(layout) +
         " pattern " + std::to_string(pattern);
}

} // namespace

TEST(SimdTable, MatchesTheCpuFeatures) {
  // The CPU's features as the compiler's runtime reports them (not the
  // runtime's own cpuid code) decide which tables must exist.
  const KernelTable *simd = simdKernels();
  const KernelTable *fallback = simdFallbackKernelTable();
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("f16c") &&
                    __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  if (!avx2) {
    EXPECT_EQ(simd, nullptr);
  } else {
    ASSERT_NE(simd, nullptr);
    EXPECT_STREQ(simd->name, avx512 ? "avx512" : "avx2");
  }
  if (avx512) {
    ASSERT_NE(fallback, nullptr);
    EXPECT_STREQ(fallback->name, "avx2");
  } else {
    EXPECT_EQ(fallback, nullptr);
  }
#elif defined(__aarch64__)
  ASSERT_NE(simd, nullptr); // Advanced SIMD is part of the AArch64 baseline
  EXPECT_STREQ(simd->name, "neon");
  EXPECT_EQ(fallback, nullptr);
#else
  EXPECT_EQ(simd, nullptr);
  EXPECT_EQ(fallback, nullptr);
#endif
  // Without an override the runtime runs the best table there is.
  if (!std::getenv("KVQ_KERNELS"))
    EXPECT_EQ(&kernels(), simd ? simd : &referenceKernels());
}

TEST(SimdUniform, GroupQuantAndDequantAreBitIdentical) {
  REQUIRE_SIMD();
  (void)simd;
  uint64_t seed = 1;
  for (const KernelTable *table : simdKernelVariants())
    for (const Case &c : gridCases())
      for (int bits : {2, 3, 4, 8})
        for (int pattern = 0; pattern < 5; ++pattern)
          for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
            for (int layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED}) {
              const Grid g = toGrid(c);
              const int64_t n = c.rows * c.cols;
              auto f = awkwardData(seed++, n, pattern);
              auto h = toHalfs(f);
              const int64_t codeBytes =
                  layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
              std::vector<uint8_t> c1(codeBytes, 0xAA), c2(codeBytes, 0x55);
              std::vector<uint16_t> s1(g.vectors()), s2(g.vectors()),
                  z1(g.vectors()), z2(g.vectors());
              kvq::GroupQuantArgs q;
              q.x = data(dt, f, h);
              q.dtype = dt;
              q.grid = g;
              q.bits = bits;
              q.layout = layout;
              q.codes = c1.data();
              q.scale = s1.data();
              q.zero = z1.data();
              ref.groupQuant(q);
              q.codes = c2.data();
              q.scale = s2.data();
              q.zero = z2.data();
              table->groupQuant(q);
              const std::string what =
                  table->name + (" " + label(c, bits, dt, layout, pattern));
              ASSERT_EQ(s1, s2) << what;
              ASSERT_EQ(z1, z2) << what;
              ASSERT_EQ(c1, c2) << what;
              const size_t outBytes =
                  static_cast<size_t>(n) * (dt == KVQ_DTYPE_F16 ? 2 : 4);
              std::vector<uint8_t> o1(outBytes), o2(outBytes);
              kvq::GroupDequantArgs dq;
              dq.codes = c1.data();
              dq.layout = layout;
              dq.scale = s1.data();
              dq.zero = z1.data();
              dq.grid = g;
              dq.bits = bits;
              dq.out = o1.data();
              dq.dtype = dt;
              ref.groupDequant(dq);
              dq.out = o2.data();
              table->groupDequant(dq);
              ASSERT_EQ(o1, o2) << what;
            }
}

TEST(SimdUniform, ExcludedElementsFallBackIdentically) {
  REQUIRE_SIMD();
  const Case c{64, 64, 32, KVQ_AXIS_PER_CHANNEL};
  const Grid g = toGrid(c);
  auto f = awkwardData(7, 64 * 64, 0);
  std::vector<uint8_t> ex(f.size());
  for (size_t i = 0; i < ex.size(); ++i)
    ex[i] = i % 7 == 0;
  std::vector<uint8_t> c1(64 * 64), c2(64 * 64);
  std::vector<uint16_t> s1(g.vectors()), s2(g.vectors()), z1(g.vectors()),
      z2(g.vectors());
  kvq::GroupQuantArgs q;
  q.x = f.data();
  q.dtype = KVQ_DTYPE_F32;
  q.grid = g;
  q.bits = 2;
  q.exclude = ex.data();
  q.layout = KVQ_CODES_UNPACKED;
  q.codes = c1.data();
  q.scale = s1.data();
  q.zero = z1.data();
  ref.groupQuant(q);
  q.codes = c2.data();
  q.scale = s2.data();
  q.zero = z2.data();
  simd->groupQuant(q);
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(z1, z2);
}

TEST(SimdUniform, StorePrimitivesAreBitIdentical) {
  REQUIRE_SIMD();
  Rng rng(5);
  for (int bits : {2, 3, 4, 8})
    for (int64_t n : {1, 7, 8, 9, 31, 32, 33, 100, 1024, 1031}) {
      std::vector<uint8_t> codes(static_cast<size_t>(n));
      for (auto &c : codes)
        c = static_cast<uint8_t>(rng.uniform() * (1 << bits));
      std::vector<uint8_t> p1(packedBytes(n, bits)), p2(p1.size());
      ref.packCodes(codes.data(), n, bits, p1.data());
      simd->packCodes(codes.data(), n, bits, p2.data());
      ASSERT_EQ(p1, p2) << "bits " << bits << " n " << n;
      std::vector<uint8_t> u(static_cast<size_t>(n));
      simd->unpackCodes(p1.data(), n, bits, u.data());
      ASSERT_EQ(u, codes) << "bits " << bits << " n " << n;
    }
  for (int pattern = 0; pattern < 5; ++pattern)
    for (int bits : {2, 3, 4, 8})
      for (int64_t n : {5, 8, 32, 37, 128})
        for (int64_t stride : {1, 3}) {
          auto x = awkwardData(100 + pattern, n * stride, pattern);
          uint16_t s1, z1, s2, z2;
          kvq::UniformCalibrateArgs cal;
          cal.x = x.data();
          cal.n = n;
          cal.stride = stride;
          cal.bits = bits;
          cal.scale = &s1;
          cal.zero = &z1;
          ref.uniformCalibrate(cal);
          cal.scale = &s2;
          cal.zero = &z2;
          simd->uniformCalibrate(cal);
          ASSERT_EQ(s1, s2);
          ASSERT_EQ(z1, z2);
          std::vector<uint8_t> c1(static_cast<size_t>(n)), c2(c1.size());
          kvq::UniformQuantizeArgs q;
          q.x = x.data();
          q.n = n;
          q.stride = stride;
          q.scale = s1;
          q.zero = z1;
          q.bits = bits;
          q.codes = c1.data();
          ref.uniformQuantize(q);
          q.codes = c2.data();
          simd->uniformQuantize(q);
          ASSERT_EQ(c1, c2) << "pattern " << pattern << " bits " << bits
                            << " n " << n << " stride " << stride;
        }
}

TEST(SimdNuq, QuantAndDequantAreBitIdentical) {
  REQUIRE_SIMD();
  (void)simd;
  uint64_t seed = 300;
  for (const KernelTable *table : simdKernelVariants())
    for (const Case &c : gridCases())
      for (int bits : {2, 3, 4, 8})
        for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
          for (int layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED})
            for (int pattern : {0, 1, 4}) {
              const Grid g = toGrid(c);
              const int64_t n = c.rows * c.cols, L = 1 << bits;
              auto f = awkwardData(seed++, n, pattern);
              auto h = toHalfs(f);
              // Ascending fp16 levels with duplicates and exact midpoints.
              Rng rng(seed);
              std::vector<uint16_t> levels(
                  static_cast<size_t>(g.vectors() * L));
              for (int64_t v = 0; v < g.vectors(); ++v) {
                float l = -2.0f;
                for (int64_t i = 0; i < L; ++i) {
                  if (rng.uniform() > 0.2)
                    l += static_cast<float>(std::nearbyint(rng.uniform() * 8) /
                                            8);
                  levels[static_cast<size_t>(v * L + i)] = floatToHalf(l);
                }
              }
              const int64_t codeBytes =
                  layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
              std::vector<uint8_t> c1(codeBytes), c2(codeBytes);
              kvq::NuqQuantArgs q;
              q.x = data(dt, f, h);
              q.dtype = dt;
              q.grid = g;
              q.bits = bits;
              q.levels = levels.data();
              q.layout = layout;
              q.codes = c1.data();
              ref.nuqQuant(q);
              q.codes = c2.data();
              table->nuqQuant(q);
              const std::string what =
                  table->name + (" " + label(c, bits, dt, layout, pattern));
              ASSERT_EQ(c1, c2) << what;
              const size_t outBytes =
                  static_cast<size_t>(n) * (dt == KVQ_DTYPE_F16 ? 2 : 4);
              std::vector<uint8_t> o1(outBytes), o2(outBytes);
              kvq::NuqDequantArgs dq;
              dq.codes = c1.data();
              dq.layout = layout;
              dq.levels = levels.data();
              dq.grid = g;
              dq.bits = bits;
              dq.out = o1.data();
              dq.dtype = dt;
              ref.nuqDequant(dq);
              dq.out = o2.data();
              table->nuqDequant(dq);
              ASSERT_EQ(o1, o2) << what;
            }
}

/// The reference's and the SIMD table's Lloyd fits of x agree bit for bit.
/// Each gets exactly lloydWorkFloats(m) of work (in its own heap block, so
/// the sanitizer build sees any access past it).
void expectSameFit(const KernelTable &ref, const KernelTable &simd,
                   const std::vector<float> &x, int64_t m, int bits, int iters,
                   const std::string &what) {
  auto a = x, b = x;
  std::vector<float> w1(static_cast<size_t>(lloydWorkFloats(m))), w2 = w1;
  float l1[kMaxLevels], l2[kMaxLevels];
  kvq::LloydFitGatheredArgs fit;
  fit.m = m;
  fit.bits = bits;
  fit.iters = iters;
  fit.data = a.data();
  fit.work = w1.data();
  fit.levels = l1;
  ref.lloydFitGathered(fit);
  fit.data = b.data();
  fit.work = w2.data();
  fit.levels = l2;
  simd.lloydFitGathered(fit);
  ASSERT_EQ(0, std::memcmp(l1, l2, sizeof(float) * (1u << bits))) << what;
}

std::string fitLabel(int pattern, int bits, int64_t m, int iters) {
  return "pattern " + std::to_string(pattern) + " bits " +
         std::to_string(bits) + " m " + std::to_string(m) + " iters " +
         std::to_string(iters);
}

TEST(SimdNuq, LloydFitGivesTheSameLevels) {
  REQUIRE_SIMD();
  for (int pattern = 0; pattern < 5; ++pattern)
    for (int bits : {2, 3, 4, 8})
      for (int64_t m : {1, 2, 3, 17, 128, 1000})
        for (int iters : {0, 1, 8}) {
          ASSERT_NO_FATAL_FAILURE(expectSameFit(
              ref, *simd, awkwardData(500 + m + pattern, m, pattern), m, bits,
              iters, fitLabel(pattern, bits, m, iters)));
          float l1[kMaxLevels], l2[kMaxLevels];
          std::vector<float> s1(static_cast<size_t>(lloydScratchFloats(m))),
              s2(s1.size());
          std::vector<uint8_t> ex(static_cast<size_t>(m));
          for (int64_t i = 0; i < m; ++i)
            ex[static_cast<size_t>(i)] = i % 5 == 1;
          auto z = awkwardData(600 + m, m, pattern);
          kvq::LloydFitArgs fit;
          fit.x = z.data();
          fit.n = m;
          fit.exclude = ex.data();
          fit.exStride = 1;
          fit.bits = bits;
          fit.iters = iters;
          fit.scratch = s1.data();
          fit.levels = l1;
          const int64_t eligible = ref.lloydFit(fit);
          fit.scratch = s2.data();
          fit.levels = l2;
          ASSERT_EQ(eligible, simd->lloydFit(fit));
          ASSERT_EQ(0, std::memcmp(l1, l2, sizeof(float) * (1u << bits)));
        }
}

// The fast fit sums a cell by prefix sums only where every partial sum is
// exact in double (fp16 data always are); float data beyond fp16 take
// either path: plain normals (exact: a span under 53 bits), the same
// scaled over 2^-60..2^60 (not exact: the sequential sums), and values a
// few ulps apart at two far scales (the boundary of the span).
TEST(SimdNuq, LloydFitOnFloatDataGivesTheSameLevels) {
  REQUIRE_SIMD();
  for (int pattern = 0; pattern < 3; ++pattern)
    for (int bits : {2, 3, 4})
      for (int64_t m : {2, 17, 128, 1000, 9000})
        for (int iters : {1, 8, 100}) {
          Rng rng(7000 + static_cast<uint64_t>(m) + pattern);
          std::vector<float> x(static_cast<size_t>(m));
          for (int64_t i = 0; i < m; ++i) {
            double v = rng.normal();
            if (pattern == 1)
              v = std::ldexp(v, static_cast<int>(i % 121) - 60);
            else if (pattern == 2) // 1 + k ulp, or 2^29 times it
              v = std::ldexp(1.0 + std::ldexp(static_cast<double>(i % 5), -23),
                             i % 2 ? 29 - static_cast<int>(m > 128) : 0);
            x[static_cast<size_t>(i)] = static_cast<float>(v);
          }
          ASSERT_NO_FATAL_FAILURE(
              expectSameFit(ref, *simd, x, m, bits, iters,
                            fitLabel(pattern, bits, m, iters)));
        }
}

TEST(SimdOutliers, SplitScreenAndTopkAreBitIdentical) {
  REQUIRE_SIMD();
  uint64_t seed = 900;
  for (const Case &c : gridCases())
    for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
      for (int pattern : {0, 1, 2, 4})
        for (float fraction : {0.0f, 0.01f, 0.07f, 0.5f}) {
          const Grid g = toGrid(c);
          const int64_t n = c.rows * c.cols;
          auto f = awkwardData(seed++, n, pattern);
          auto h = toHalfs(f);
          std::vector<uint8_t> m1(static_cast<size_t>(n)), m2(m1.size());
          std::vector<float> t1(g.vectors()), t2(g.vectors());
          kvq::OutlierSplitArgs split;
          split.x = data(dt, f, h);
          split.dtype = dt;
          split.grid = g;
          split.fraction = fraction;
          split.mask = m1.data();
          split.threshold = t1.data();
          ref.outlierSplit(split);
          split.mask = m2.data();
          split.threshold = t2.data();
          simd->outlierSplit(split);
          const std::string what = label(c, 0, dt, 0, pattern);
          ASSERT_EQ(m1, m2) << what;
          ASSERT_EQ(0, std::memcmp(t1.data(), t2.data(), 4 * t1.size()))
              << what;
          std::vector<float> thr(static_cast<size_t>(c.cols));
          for (int64_t i = 0; i < c.cols; ++i)
            thr[static_cast<size_t>(i)] =
                i % 9 == 0 ? INFINITY : std::fabs(f[static_cast<size_t>(i)]);
          kvq::OutlierScreenArgs screen;
          screen.x = data(dt, f, h);
          screen.dtype = dt;
          screen.rows = c.rows;
          screen.cols = c.cols;
          screen.threshold = thr.data();
          screen.mask = m1.data();
          ref.outlierScreen(screen);
          screen.mask = m2.data();
          simd->outlierScreen(screen);
          ASSERT_EQ(m1, m2) << what;
        }
  // k up to 16 takes the one-pass selection, above it the bisection;
  // pattern 4 is small integers, so most magnitudes tie.
  for (int pattern : {1, 4})
    for (int64_t n : {1, 9, 64, 128, 1000})
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{16},
                        int64_t{17}, n / 3, n}) {
        if (k > n)
          continue;
        auto x = awkwardData(77 + n + pattern, n, pattern);
        std::vector<uint8_t> m1(static_cast<size_t>(n)), m2(m1.size());
        float th1, th2;
        kvq::TopkAbsArgs top;
        top.x = x.data();
        top.n = n;
        top.k = k;
        top.mask = m1.data();
        top.threshold = &th1;
        ref.topkAbs(top);
        top.mask = m2.data();
        top.threshold = &th2;
        simd->topkAbs(top);
        const std::string what = "pattern " + std::to_string(pattern) + " n " +
                                 std::to_string(n) + " k " + std::to_string(k);
        ASSERT_EQ(m1, m2) << what;
        ASSERT_EQ(floatBits(th1), floatBits(th2)) << what;
        for (float &v : x)
          v = std::fabs(v);
        std::vector<int64_t> p1(static_cast<size_t>(k)), p2(p1.size());
        kvq::TopkIndicesArgs sel;
        sel.values = x.data();
        sel.n = n;
        sel.k = k;
        sel.indices = p1.data();
        ref.topkIndices(sel);
        sel.indices = p2.data();
        simd->topkIndices(sel);
        ASSERT_EQ(p1, p2) << what;
      }
}

TEST(SimdSinks, KeyNormsAreBitIdentical) {
  REQUIRE_SIMD();
  for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
    for (int heads : {1, 3, 8})
      for (int64_t dim : {4, 6, 64, 128})
        for (int64_t tokens : {1, 4, 7, 33}) {
          auto f =
              awkwardData(heads * 1000 + dim + tokens, tokens * heads * dim, 3);
          auto h = toHalfs(f);
          std::vector<float> n1(static_cast<size_t>(tokens)), n2(n1.size());
          kvq::KeyNormArgs norm;
          norm.keys = data(dt, f, h);
          norm.dtype = dt;
          norm.tokens = tokens;
          norm.heads = heads;
          norm.headDim = dim;
          norm.norms = n1.data();
          ref.keyNorm(norm);
          norm.norms = n2.data();
          simd->keyNorm(norm);
          ASSERT_EQ(0, std::memcmp(n1.data(), n2.data(), 4 * n1.size()))
              << "heads " << heads << " dim " << dim << " tokens " << tokens;
        }
}

/// The attention inner ops sum in a different order (and with FMA), so
/// each is compared with a relative tolerance on the sum of |terms|:
/// |simd - ref| <= 1e-5 * sum |q_c * v_c| (+ a tiny absolute floor). The
/// SIMD table's ops are the ones selectAttendOps picks for the shape, so
/// the shapes its kernels do not cover (d not a multiple of 16 or 8, odd
/// groups, 3-bit rows of 36 bits) must give the reference's bits.
/// dequantCodes of every table (the reference's included) is the scalar
/// product-then-sum of each code, bit for bit; the packed codes sit in a
/// buffer of exactly their bytes, so a read past them fails under ASan.
TEST(SimdAttendOps, DequantCodesIsTheProductThenSumOfEachCode) {
  std::vector<const KernelTable *> tables = simdKernelVariants();
  tables.push_back(&referenceKernels());
  Rng rng(17);
  int covered = 0;
  for (const KernelTable *t : tables)
    for (int bits = 1; bits <= 8; ++bits) {
      if (!supportedBits(bits))
        continue;
      const AttendOps ops =
          selectAttendOps(*t, AttendShape{128, 8, 32, bits, bits});
      covered += ops.dequantCodes != referenceAttendOps().dequantCodes;
      for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 1024}) {
        std::vector<uint8_t> codes(static_cast<size_t>(n));
        std::vector<float> scale(codes.size()), zero(codes.size()),
            want(codes.size()), got(codes.size(), -1.0f);
        for (int64_t c = 0; c < n; ++c) {
          const size_t i = static_cast<size_t>(c);
          codes[i] = static_cast<uint8_t>(rng.uniform() * (1 << bits));
          scale[i] = static_cast<float>(rng.uniform()) * 0.37f;
          zero[i] = static_cast<float>(rng.normal());
          want[i] = static_cast<float>(codes[i]) * scale[i] + zero[i];
        }
        std::vector<uint8_t> packed(packedBytes(n, bits));
        packCodesRef(codes.data(), n, bits, packed.data());
        ops.dequantCodes(packed.data(), n, bits, scale.data(), zero.data(),
                         got.data());
        ASSERT_EQ(got, want) << t->name << " bits " << bits << " n " << n;
      }
    }
    // The x86 tables have their own kernel for every width.
#if defined(__x86_64__)
  if (!simdKernelVariants().empty())
    EXPECT_GT(covered, 0);
#endif
}

/// One case of the fp16 row kernels: n awkward fp16 rows of d channels,
/// rowStride apart, and nq query vectors; outputs are nq floats per row,
/// outStride apart, the gaps left at 7.
struct HalfRowsCase {
  int64_t d, nq, n, rowStride, outStride;
  std::vector<uint16_t> rows;
  std::vector<float> q;

  HalfRowsCase(int64_t d, int64_t nq, int64_t n, int64_t rowPad)
      : d(d), nq(nq), n(n), rowStride(d + rowPad), outStride(nq + 3) {
    const int pattern = static_cast<int>((d + nq + n) % 5);
    rows = toHalfs(awkwardData(uint64_t(d * 100 + n), n * rowStride, pattern));
    q = awkwardData(uint64_t(nq * 7 + n), nq * d, (pattern + 1) % 5);
  }
  const uint16_t *row(int64_t i) const { return rows.data() + i * rowStride; }
  std::vector<float> blank() const {
    return std::vector<float>(size_t(n * outStride), 7.0f);
  }
  /// dotHalf, one call per row.
  std::vector<float> rowByRow(decltype(AttendOps::dotHalf) dotHalf) const {
    std::vector<float> out = blank();
    for (int64_t i = 0; i < n; ++i)
      dotHalf(row(i), q.data(), nq, d, out.data() + i * outStride);
    return out;
  }
  /// dotHalfRows, one call for all rows.
  std::vector<float> inOneCall(decltype(AttendOps::dotHalfRows) rowsDot) const {
    std::vector<float> out = blank();
    HalfRowsDot dot;
    dot.rows = rows.data();
    dot.rowStride = rowStride;
    dot.n = n;
    dot.q = q.data();
    dot.nq = nq;
    dot.d = d;
    dot.out = out.data();
    dot.outStride = outStride;
    rowsDot(dot);
    return out;
  }
};

/// Heads of d % 16 == 8 channels run the reference on every ISA without
/// these kernels, so the SIMD ones must give its bits exactly: dotHalf,
/// dotHalfRows (rows in lanes, any count, strided input and output),
/// axpyHalf and axpyHalfRows, on data with signed zeros, subnormals and
/// wide ranges.
TEST(SimdAttendOps, NarrowHalfRowsGiveTheReferenceBits) {
  const AttendOps &r = referenceAttendOps();
  int covered = 0;
  for (const KernelTable *t : simdKernelVariants())
    for (int64_t d : {8, 24, 40})
      for (int64_t nq : {1, 2, 3, 4, 5, 9})
        for (int64_t n : {1, 7, 8, 9, 17, 64}) {
          const AttendOps s = selectAttendOps(*t, AttendShape{d, 2, 0, 16, 16});
          if (!s.dotHalfRows)
            continue;
          ++covered;
          const HalfRowsCase c(d, nq, n, 8);
          auto w = awkwardData(uint64_t(nq * 11 + n), n * nq, 0);
          const std::string what = std::string(t->name) + " d " +
                                   std::to_string(d) + " nq " +
                                   std::to_string(nq) + " n " +
                                   std::to_string(n);
          const std::vector<float> want = c.rowByRow(r.dotHalf),
                                   got = c.inOneCall(s.dotHalfRows);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 4 * want.size()))
              << "dotHalfRows " << what;
          std::vector<float> one(static_cast<size_t>(nq));
          s.dotHalf(c.row(0), c.q.data(), nq, d, one.data());
          ASSERT_EQ(0, std::memcmp(want.data(), one.data(), 4 * one.size()))
              << "dotHalf " << what;
          std::vector<const uint16_t *> ptrs(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            ptrs[size_t(i)] = c.row(i);
          std::vector<float> accWant = awkwardData(5, nq * d, 0),
                             accGot = accWant;
          HalfRowsAxpy axpy{ptrs.data(), n, w.data(), nq, nq, d,
                            accWant.data()};
          r.axpyHalfRows(axpy);
          axpy.acc = accGot.data();
          s.axpyHalfRows(axpy);
          ASSERT_EQ(0,
                    std::memcmp(accWant.data(), accGot.data(), 4 * nq * d))
              << "axpyHalfRows " << what;
          r.axpyHalf(c.row(0), w.data(), nq, d, accWant.data());
          s.axpyHalf(c.row(0), w.data(), nq, d, accGot.data());
          ASSERT_EQ(0,
                    std::memcmp(accWant.data(), accGot.data(), 4 * nq * d))
              << "axpyHalf " << what;
        }
#if defined(__x86_64__)
  if (!simdKernelVariants().empty())
    EXPECT_GT(covered, 0);
#endif
}

/// Whole 16-channel heads: AVX-512's dotHalfRows reduces sixteen dots at
/// once and must give its table's dotHalf bits (the canonical order, the
/// same on every ISA: attend_order_test), at every row and query count its
/// blocks of 4 x 4, 8 x 2 and 16 x 1 leave over, with strided rows and
/// output.
TEST(SimdAttendOps, WideHalfRowsGiveTheirTablesDotHalfBits) {
  int covered = 0;
  for (const KernelTable *t : simdKernelVariants())
    for (int64_t d : {16, 64, 128})
      for (int64_t nq : {1, 2, 3, 4, 5, 6, 9})
        for (int64_t n : {1, 3, 4, 5, 8, 9, 16, 17, 64}) {
          const AttendOps s = selectAttendOps(*t, AttendShape{d, 2, 0, 16, 16});
          if (!s.dotHalfRows)
            continue;
          ++covered;
          const HalfRowsCase c(d, nq, n, 16);
          const std::vector<float> want = c.rowByRow(s.dotHalf),
                                   got = c.inOneCall(s.dotHalfRows);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 4 * want.size()))
              << t->name << " d " << d << " nq " << nq << " n " << n;
        }
#if defined(__x86_64__)
  for (const KernelTable *t : simdKernelVariants())
    if (std::string(t->name) == "avx512")
      EXPECT_GT(covered, 0) << "AVX-512's dotHalfRows was not reached";
#endif
}

TEST(SimdAttendOps, MatchTheReferenceWithinTolerance) {
  REQUIRE_SIMD();
  (void)ref;
  const AttendOps &r = referenceAttendOps();
  Rng rng(42);
  for (int64_t d : {16, 64, 128, 40, 24, 12})
    for (int64_t nq : {1, 2, 4, 5})
      for (int bits : {2, 3, 4, 8}) {
        // Groups of 8 where d allows, else odd ones (5 | 40, 3 | 24, 12).
        const int64_t G = d % 16 == 0 ? 8 : (d % 5 == 0 ? 5 : 3);
        const AttendOps s =
            selectAttendOps(*simd, AttendShape{d, 1, G, bits, bits});
        const int64_t L = int64_t{1} << bits, first = d * 3;
        std::vector<float> q(static_cast<size_t>(nq * d)),
            lut(static_cast<size_t>(nq * d * L)), w(static_cast<size_t>(nq)),
            ws(static_cast<size_t>(nq * d / G));
        for (auto &v : q)
          v = static_cast<float>(rng.normal());
        for (auto &v : lut)
          v = static_cast<float>(rng.normal());
        for (auto &v : w)
          v = static_cast<float>(rng.uniform());
        for (auto &v : ws)
          v = static_cast<float>(rng.uniform());
        std::vector<uint16_t> row(static_cast<size_t>(d));
        for (auto &v : row)
          v = floatToHalf(static_cast<float>(rng.normal()));
        std::vector<uint8_t> codes(static_cast<size_t>(4 * d));
        for (auto &v : codes)
          v = static_cast<uint8_t>(rng.uniform() * 256);
        // Within tolerance, or bit for bit where the selection kept the
        // reference.
        auto close = [&](const std::vector<float> &a,
                         const std::vector<float> &b, double scale,
                         bool simdOp) {
          for (size_t i = 0; i < a.size(); ++i) {
            if (!simdOp)
              ASSERT_EQ(floatBits(a[i]), floatBits(b[i]))
                  << "d " << d << " nq " << nq << " bits " << bits << " i "
                  << i;
            ASSERT_NEAR(a[i], b[i], 1e-5 * scale + 1e-6)
                << "d " << d << " nq " << nq << " bits " << bits << " i " << i;
          }
        };
        const double mag = static_cast<double>(d) * 4 * static_cast<double>(L);
        std::vector<float> o1(static_cast<size_t>(nq)), o2(o1.size());
        r.dotHalf(row.data(), q.data(), nq, d, o1.data());
        s.dotHalf(row.data(), q.data(), nq, d, o2.data());
        close(o1, o2, static_cast<double>(d) * 16, s.dotHalf != r.dotHalf);
        CodesDot dc;
        dc.packed = codes.data();
        dc.first = first;
        dc.bits = bits;
        dc.q = q.data();
        dc.nq = nq;
        dc.d = d;
        dc.out = o1.data();
        r.dotCodes(dc);
        dc.out = o2.data();
        s.dotCodes(dc);
        close(o1, o2, mag, s.dotCodes != r.dotCodes);
        LutDot dl;
        dl.packed = codes.data();
        dl.first = first;
        dl.bits = bits;
        dl.lut = lut.data();
        dl.nq = nq;
        dl.d = d;
        dl.out = o1.data();
        r.dotLut(dl);
        dl.out = o2.data();
        s.dotLut(dl);
        close(o1, o2, static_cast<double>(d) * 4, s.dotLut != r.dotLut);
        std::vector<float> a1(static_cast<size_t>(nq * d), 0.5f), a2 = a1;
        r.axpyHalf(row.data(), w.data(), nq, d, a1.data());
        s.axpyHalf(row.data(), w.data(), nq, d, a2.data());
        close(a1, a2, 8, s.axpyHalf != r.axpyHalf);
        a2 = a1;
        CodesAxpy ac;
        ac.packed = codes.data();
        ac.first = first;
        ac.bits = bits;
        ac.ws = ws.data();
        ac.G = G;
        ac.nq = nq;
        ac.d = d;
        ac.acc = a1.data();
        r.axpyCodes(ac);
        ac.acc = a2.data();
        s.axpyCodes(ac);
        close(a1, a2, 8.0 * static_cast<double>(L), s.axpyCodes != r.axpyCodes);
        {
          // Two rows, each with its own tables (lutEntries floats apiece).
          const int64_t E = lutEntries(bits);
          const uint8_t *rows2[2] = {codes.data() + first * bits / 8,
                                     codes.data() + d * bits / 8};
          std::vector<float> luts(static_cast<size_t>(2 * nq * E));
          for (auto &v : luts)
            v = static_cast<float>(rng.normal());
          for (size_t i = 0; i < luts.size(); ++i) // periodic past 2^bits
            if (static_cast<int64_t>(i) % E >= L)
              luts[i] = luts[i - i % E + static_cast<int64_t>(i) % E % L];
          a2 = a1; // the ops above may differ in the last bits
          LutRowsAxpy al;
          al.rows = rows2;
          al.n = 2;
          al.bits = bits;
          al.luts = luts.data();
          al.lutStride = nq * E;
          al.nq = nq;
          al.d = d;
          al.acc = a1.data();
          r.axpyLutRows(al);
          al.acc = a2.data();
          s.axpyLutRows(al);
          ASSERT_EQ(a1, a2); // one addition per element and row: exact
        }
        std::vector<float> m1(static_cast<size_t>(nq * d)), m2(m1.size());
        r.mulHalf(row.data(), q.data(), nq, d, m1.data());
        s.mulHalf(row.data(), q.data(), nq, d, m2.data());
        ASSERT_EQ(m1, m2); // one rounding per element: exact
        std::vector<float> h1(static_cast<size_t>(d)), h2(h1.size());
        r.halfToFloatN(row.data(), d, h1.data());
        s.halfToFloatN(row.data(), d, h2.data());
        ASSERT_EQ(h1, h2);
        // Several blocks in one call, each converted like halfToFloatN
        // (odd counts exercise the scalar tail).
        const uint16_t *blocks[3] = {row.data(), row.data() + 1,
                                     row.data() + d / 2};
        const int64_t count = d / 2 - 1;
        std::vector<float> b1(static_cast<size_t>(3 * count), -1.0f),
            b2(b1.size(), -2.0f), want(b1.size());
        r.halfRowsToFloat(blocks, 3, count, b1.data());
        s.halfRowsToFloat(blocks, 3, count, b2.data());
        for (int64_t i = 0; i < 3 * count; ++i)
          want[static_cast<size_t>(i)] =
              halfToFloat(blocks[i / count][i % count]);
        ASSERT_EQ(b1, want);
        ASSERT_EQ(b2, want);
      }
}
