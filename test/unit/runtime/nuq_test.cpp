//===- nuq_test.cpp - NUQ (Lloyd-Max) and dense-and-sparse outliers -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The KVQuant seed's kernel-level Evidence: NUQ beats uniform on Laplacian
// data (and the vector length that gives the seed's ~73%), is not worse on
// uniform data, the rank split is exact (also under ties), fraction 0 is pure
// NUQ, and outlier isolation helps on heavy tails.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <algorithm>
#include <numeric>

using namespace kvqtest;

namespace {

std::vector<float> laplaceData(uint64_t seed, int64_t n) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &f : x)
    f = fromHalf(toHalf(static_cast<float>(rng.laplace())));
  return x;
}

std::vector<float> uniformData(uint64_t seed, int64_t n) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &f : x)
    f = fromHalf(toHalf(static_cast<float>(rng.uniform(-1, 1))));
  return x;
}

/// Reconstruction MSE of NUQ over `vectors` rows of length n (one level
/// table per row); outliers (fraction > 0) are kept exact, as in the cache.
double nuqMse(const std::vector<float> &x, int64_t vectors, int64_t n, int bits,
              int iters, float fraction) {
  std::vector<uint8_t> mask(x.size(), 0);
  if (fraction > 0)
    EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, vectors, n,
                                KVQ_AXIS_PER_TOKEN, static_cast<int32_t>(n),
                                fraction, nullptr, mask.data(), nullptr),
              KVQ_OK);
  std::vector<float> scratch(kvq_nuq_fit_scratch_size(n, bits));
  std::vector<uint16_t> levels(static_cast<size_t>(vectors << bits));
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, vectors, n, KVQ_AXIS_PER_TOKEN,
                        static_cast<int32_t>(n), bits, iters, mask.data(),
                        scratch.data(), static_cast<int64_t>(scratch.size()),
                        levels.data()),
            KVQ_OK);
  std::vector<uint8_t> codes(kvq_packed_size(vectors * n, bits));
  EXPECT_EQ(kvq_nuq_quant(x.data(), KVQ_DTYPE_F32, vectors, n,
                          KVQ_AXIS_PER_TOKEN, static_cast<int32_t>(n), bits,
                          levels.data(), KVQ_CODES_PACKED, codes.data()),
            KVQ_OK);
  std::vector<float> out(x.size());
  EXPECT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_PACKED, levels.data(),
                            vectors, n, KVQ_AXIS_PER_TOKEN,
                            static_cast<int32_t>(n), bits, out.data(),
                            KVQ_DTYPE_F32),
            KVQ_OK);
  for (size_t i = 0; i < x.size(); ++i)
    if (mask[i])
      out[i] = x[i];
  return mse(x, out);
}

/// Uniform min/max over the same vectors (one scale/zero per row).
double uniformMse(const std::vector<float> &x, int64_t vectors, int64_t n,
                  int bits) {
  std::vector<uint8_t> codes(x.size());
  std::vector<uint16_t> scale(static_cast<size_t>(vectors)),
      zero(static_cast<size_t>(vectors));
  EXPECT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, vectors, n,
                            KVQ_AXIS_PER_TOKEN, static_cast<int32_t>(n), bits,
                            nullptr, KVQ_CODES_UNPACKED, codes.data(),
                            scale.data(), zero.data()),
            KVQ_OK);
  std::vector<float> out(x.size());
  EXPECT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, scale.data(),
                              zero.data(), vectors, n, KVQ_AXIS_PER_TOKEN,
                              static_cast<int32_t>(n), bits, out.data(),
                              KVQ_DTYPE_F32),
            KVQ_OK);
  return mse(x, out);
}

double reduction(int64_t n, int bits) {
  const int64_t total = 1 << 16;
  std::vector<float> x = laplaceData(11, total);
  return 1.0 - nuqMse(x, total / n, n, bits, 8, 0.0f) /
                   uniformMse(x, total / n, n, bits);
}

} // namespace

TEST(Nuq, LowerMseThanUniformOnLaplacianData) {
  for (int bits : {2, 3})
    for (int64_t n : {64, 256, 4096})
      EXPECT_GT(reduction(n, bits), 0.2) << "bits " << bits << " n " << n;
  EXPECT_GT(reduction(4096, 4), 0.3);
}

TEST(Nuq, FourBitsOnShortVectorsLosesToUniform) {
  // A documented limitation, not a goal: 16 levels fit on 64 samples by
  // quantile initialisation + 8 Lloyd sweeps end in a local optimum about
  // 40% worse than uniform min/max (more sweeps do not escape it). The
  // seed's "NUQ strictly reduces error" holds for 2-3 bits, and for 4 bits
  // only on long vectors.
  EXPECT_NEAR(reduction(64, 4), -0.39, 0.05);
  EXPECT_NEAR(reduction(256, 4), -0.10, 0.05);
}

TEST(Nuq, SeedSeventyThreePercentAtThreeBitsNeedsLongVectors) {
  // The seed reports ~73% lower MSE than uniform at 3 bits on Laplacian
  // data without saying over what vector length. Uniform min/max loses more
  // as vectors grow (the range grows like log n, the bulk does not), so the
  // reduction rises with n. Pinned: these figures (seeded data, 8 sweeps);
  // the seed's ~73% sits between n = 2048 (69.5%) and n = 4096 (74.5%).
  struct Row {
    int64_t n;
    double expected;
  };
  const Row rows[] = {{32, 0.153},   {128, 0.374},  {512, 0.557},
                      {1024, 0.636}, {2048, 0.695}, {4096, 0.745}};
  for (const Row &r : rows) {
    double got = reduction(r.n, 3);
    std::printf("NUQ vs uniform, 3 bits, Laplace, n = %lld: %.1f%% lower MSE\n",
                static_cast<long long>(r.n), 100.0 * got);
    EXPECT_NEAR(got, r.expected, 0.01) << "n " << r.n;
  }
}

TEST(Nuq, NotMateriallyWorseOnUniformData) {
  const int64_t total = 1 << 15;
  std::vector<float> x = uniformData(5, total);
  for (int bits : {2, 3, 4})
    for (int64_t n : {64, 1024}) {
      double nuq = nuqMse(x, total / n, n, bits, 8, 0.0f);
      double uni = uniformMse(x, total / n, n, bits);
      EXPECT_LT(nuq, 1.10 * uni) << "bits " << bits << " n " << n;
    }
}

TEST(Nuq, LloydMseNonIncreasingInIterations) {
  // Through the public API the levels are rounded to fp16 after the fit, so
  // allow that rounding's effect (the strict float-level check is in
  // kvq_runtime_internal_tests).
  std::vector<float> x = laplaceData(21, 4096);
  double previous = 1e30;
  for (int iters = 0; iters <= 12; ++iters) {
    double m = nuqMse(x, 4, 1024, 3, iters, 0.0f);
    EXPECT_LE(m, previous * (1 + 1e-3)) << "iters " << iters;
    previous = m;
  }
  EXPECT_LT(nuqMse(x, 4, 1024, 3, 12, 0.0f), nuqMse(x, 4, 1024, 3, 0, 0.0f));
}

TEST(Nuq, LevelTablesAreDeterministic) {
  std::vector<float> x = laplaceData(8, 2048);
  const int64_t S = kvq_nuq_fit_scratch_size(1024, 3);
  std::vector<float> scratch(static_cast<size_t>(S));
  std::vector<uint16_t> a(16), b(16);
  for (std::vector<uint16_t> *l : {&a, &b})
    ASSERT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 2048, 1,
                          KVQ_AXIS_PER_CHANNEL, 1024, 3, 8, nullptr,
                          scratch.data(), S, l->data()),
              KVQ_OK);
  EXPECT_EQ(a, b);
  for (int v = 0; v < 2; ++v)
    EXPECT_TRUE(std::is_sorted(
        a.begin() + 8 * v, a.begin() + 8 * v + 8,
        [](uint16_t p, uint16_t q) { return fromHalf(p) < fromHalf(q); }));
}

// The documented rule (runtime.h): room for the gathered elements, then the
// SIMD fit's sort keys and prefix sums; the fits above and below run with
// scratch of exactly this size, so the sanitizer build sees any access past
// it (group 1024 takes the long-vector path that allocated before 0.3).
TEST(Nuq, ScratchSizeIsTheDocumentedRule) {
  EXPECT_EQ(kvq_nuq_fit_scratch_size(-5, 3), 0);
  EXPECT_EQ(kvq_nuq_fit_scratch_size(0, 3), 0);
  EXPECT_EQ(kvq_nuq_fit_scratch_size(1, 3), 5);
  EXPECT_EQ(kvq_nuq_fit_scratch_size(1024, 8), 3 * 1024 + 2);
  const int64_t largest = (INT64_MAX - 2) / 3;
  EXPECT_EQ(kvq_nuq_fit_scratch_size(largest, 2), 3 * largest + 2);
  EXPECT_EQ(kvq_nuq_fit_scratch_size(largest + 1, 2), INT64_MAX);
  EXPECT_EQ(kvq_nuq_fit_scratch_size(INT64_MAX, 2), INT64_MAX);
}

TEST(Nuq, QuantileInitialisationAndEmptyVector) {
  // Zero sweeps: levels are the (i + 0.5) / L quantiles with linear
  // interpolation. Data 0..15 at 2 bits: positions 1.875, 5.625, 9.375,
  // 13.125.
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 0.0f);
  const int64_t S = kvq_nuq_fit_scratch_size(16, 2);
  std::vector<float> scratch(static_cast<size_t>(S));
  std::vector<uint16_t> levels(4);
  ASSERT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 1, 16, KVQ_AXIS_PER_TOKEN, 16,
                        2, 0, nullptr, scratch.data(), S, levels.data()),
            KVQ_OK);
  EXPECT_EQ(levels, (std::vector<uint16_t>{toHalf(1.875f), toHalf(5.625f),
                                           toHalf(9.375f), toHalf(13.125f)}));
  std::vector<uint8_t> all(16, 1);
  ASSERT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 1, 16, KVQ_AXIS_PER_TOKEN, 16,
                        2, 8, all.data(), scratch.data(), S, levels.data()),
            KVQ_OK);
  EXPECT_EQ(levels, (std::vector<uint16_t>{0, 0, 0, 0}));
}

TEST(Outliers, SplitSelectsTheTrueTopKByMagnitude) {
  std::vector<float> x = laplaceData(31, 1000);
  std::vector<uint8_t> mask(1000);
  float thr;
  ASSERT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 1000, 1,
                              KVQ_AXIS_PER_CHANNEL, 1000, 0.013f, nullptr,
                              mask.data(), &thr),
            KVQ_OK);
  std::vector<int> idx(1000);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa != fb ? fa > fb : a < b; // ties to the earlier index
  });
  const int k = 13; // ceil(0.013 * 1000)
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), k);
  for (int i = 0; i < k; ++i)
    EXPECT_EQ(mask[idx[i]], 1);
  EXPECT_EQ(thr, std::fabs(x[idx[k - 1]]));
}

TEST(Outliers, SplitExactUnderTies) {
  // A constant vector: a value threshold would select all 100; rank
  // selection takes exactly k = ceil(0.05 * 100) = 5, the earliest ones.
  std::vector<float> x(100, 2.0f);
  std::vector<uint8_t> mask(100);
  float thr;
  ASSERT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 1, 100,
                              KVQ_AXIS_PER_TOKEN, 100, 0.05f, nullptr,
                              mask.data(), &thr),
            KVQ_OK);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), 5);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(mask[i], 1);
  EXPECT_EQ(thr, 2.0f);
  // Partial ties, signs ignored: |-5| ties with 5; k = 3 takes 9, then the
  // first two of the 5s.
  std::vector<float> y = {1, 5, -5, 9, 5, 0, 0, 0, 0, 0};
  std::vector<uint8_t> ex(10, 0), m(10);
  ASSERT_EQ(kvq_outlier_split(y.data(), KVQ_DTYPE_F32, 1, 10,
                              KVQ_AXIS_PER_TOKEN, 10, 0.3f, ex.data(), m.data(),
                              &thr),
            KVQ_OK);
  EXPECT_EQ(m, (std::vector<uint8_t>{0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  // Excluded elements neither count nor get selected: k over 5 eligible.
  ex = {0, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  ASSERT_EQ(kvq_outlier_split(y.data(), KVQ_DTYPE_F32, 1, 10,
                              KVQ_AXIS_PER_TOKEN, 10, 0.3f, ex.data(), m.data(),
                              &thr),
            KVQ_OK);
  EXPECT_EQ(m, (std::vector<uint8_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
}

TEST(Outliers, FractionZeroIsPureNuq) {
  std::vector<float> x = laplaceData(41, 1024);
  std::vector<uint8_t> mask(1024, 7);
  std::vector<float> thr(4);
  ASSERT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 4, 256,
                              KVQ_AXIS_PER_TOKEN, 256, 0.0f, nullptr,
                              mask.data(), thr.data()),
            KVQ_OK);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 0), 1024);
  for (float t : thr)
    EXPECT_TRUE(std::isinf(t));
  // Fitting with that (all-clear) mask as the exclusion gives the levels of
  // a fit without any exclusion, bit for bit.
  std::vector<float> scratch(kvq_nuq_fit_scratch_size(256, 3));
  std::vector<uint16_t> masked(4 * 8), pure(4 * 8, 1);
  for (auto [exclude, levels] :
       {std::pair{mask.data(), &masked}, std::pair{(uint8_t *)nullptr, &pure}})
    ASSERT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 4, 256, KVQ_AXIS_PER_TOKEN,
                          256, 3, 8, exclude, scratch.data(),
                          static_cast<int64_t>(scratch.size()), levels->data()),
              KVQ_OK);
  EXPECT_EQ(masked, pure);
}

TEST(Outliers, IsolationLowersMseOnHeavyTails) {
  // Laplacian bulk plus 0.5% spikes of 40x: the spikes drag the levels out.
  Rng rng(51);
  std::vector<float> x(8192);
  for (float &f : x) {
    double v = rng.laplace();
    if (rng.uniform() < 0.005)
      v *= 40;
    f = fromHalf(toHalf(static_cast<float>(v)));
  }
  for (int bits : {2, 3}) {
    double without = nuqMse(x, 32, 256, bits, 8, 0.0f);
    double with = nuqMse(x, 32, 256, bits, 8, 0.01f);
    EXPECT_LT(with, 0.7 * without) << "bits " << bits;
  }
}

TEST(Outliers, ScreenUsesGreaterOrEqual) {
  std::vector<float> x = {1.0f, -2.0f, 3.0f, 2.0f, -1.5f, 0.0f};
  std::vector<float> thr = {2.0f, 1.5f, INFINITY};
  std::vector<uint8_t> mask(6);
  ASSERT_EQ(kvq_outlier_screen(x.data(), KVQ_DTYPE_F32, 2, 3, thr.data(),
                               mask.data()),
            KVQ_OK);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 1, 0, 1, 1, 0}));
}
