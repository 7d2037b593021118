//===- select_test.cpp - Metal outliers, key norms, sinks vs the CPU ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Outlier masks and thresholds, screened masks, key norms (software
// binary64) and sink positions (one simdgroup, prefix sums) must equal the
// CPU reference exactly, ties included.
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

#include <cmath>

using namespace kvqmetaltest;

namespace {

TEST(MetalOutliers, SplitMatchesForEveryAxisFractionAndExclusion) {
  for (kvq_axis axis : {KVQ_AXIS_PER_TOKEN, KVQ_AXIS_PER_CHANNEL})
    for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
      for (float fraction : {0.0f, 0.01f, 0.07f, 0.25f, 0.5f})
        for (bool exclude : {false, true}) {
          const int64_t rows = 64, cols = 48, group = 16;
          Matrix x = randomMatrix(rows, cols, dtype, 11);
          plantConstantGroups(x, axis, group); // all-tie vectors
          std::vector<uint8_t> ex;
          if (exclude)
            ex = randomMask(rows * cols, 0.3, 3);
          const uint8_t *exp = exclude ? ex.data() : nullptr;
          const int64_t vectors = rows * cols / group;
          std::vector<uint8_t> mCpu(rows * cols, 9), mGpu(rows * cols, 8);
          std::vector<float> tCpu(vectors, -1), tGpu(vectors, -2);
          ASSERT_EQ(KVQ_OK,
                    kvq_outlier_split(x.data(), dtype, rows, cols, axis, group,
                                      fraction, exp, mCpu.data(), tCpu.data()));
          ASSERT_EQ(KVQ_OK, kvq_metal_outlier_split(
                                ctx(), x.data(), dtype, rows, cols, axis, group,
                                fraction, exp, mGpu.data(), tGpu.data()))
              << kvq_last_error();
          EXPECT_EQ(mCpu, mGpu) << axis << dtype << fraction << exclude;
          for (int64_t v = 0; v < vectors; ++v)
            EXPECT_EQ(std::memcmp(&tCpu[v], &tGpu[v], 4), 0) << v;
        }
}

TEST(MetalOutliers, ScreenMatches) {
  const int64_t rows = 20, cols = 24;
  Matrix x = randomMatrix(rows, cols, KVQ_DTYPE_F16, 4);
  std::vector<float> thr(cols);
  for (int64_t c = 0; c < cols; ++c)
    thr[c] = c % 5 == 0 ? INFINITY : std::fabs(x.get(c * 3 % (rows * cols)));
  std::vector<uint8_t> a(rows * cols), b(rows * cols);
  ASSERT_EQ(KVQ_OK, kvq_outlier_screen(x.data(), KVQ_DTYPE_F16, rows, cols,
                                       thr.data(), a.data()));
  ASSERT_EQ(KVQ_OK, kvq_metal_outlier_screen(ctx(), x.data(), KVQ_DTYPE_F16,
                                             rows, cols, thr.data(), b.data()));
  EXPECT_EQ(a, b);
  thr[3] = NAN;
  EXPECT_EQ(KVQ_ERR_NON_FINITE,
            kvq_metal_outlier_screen(ctx(), x.data(), KVQ_DTYPE_F16, rows, cols,
                                     thr.data(), b.data()));
}

TEST(MetalSinks, KeyNormsAreBitIdentical) {
  for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
    const int64_t tokens = 37;
    const int heads = 3, dim = 40;
    Matrix k = randomMatrix(tokens, heads * dim, dtype, 21);
    std::vector<float> a(tokens), b(tokens);
    ASSERT_EQ(KVQ_OK,
              kvq_key_norm(k.data(), dtype, tokens, heads, dim, a.data()));
    ASSERT_EQ(KVQ_OK, kvq_metal_key_norm(ctx(), k.data(), dtype, tokens, heads,
                                         dim, b.data()));
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * tokens));
  }
}

TEST(MetalSinks, SelectMatchesWithTiesAndEveryK) {
  kvqtest::Rng rng(5);
  for (int64_t tokens : {1, 5, 31, 32, 33, 100, 1000}) {
    std::vector<float> norms(tokens);
    for (auto &v : norms) // few distinct values: many ties
      v = static_cast<float>(static_cast<int>(rng.uniform(0, 6))) * 0.5f;
    for (int32_t k : {0, 1, 2, 5, 17, 64}) {
      if (k > tokens)
        continue;
      std::vector<int64_t> a(k + 1, -1), b(k + 1, -2);
      ASSERT_EQ(KVQ_OK, kvq_sink_select(norms.data(), tokens, k, a.data()));
      ASSERT_EQ(KVQ_OK,
                kvq_metal_sink_select(ctx(), norms.data(), tokens, k, b.data()))
          << kvq_last_error();
      a.resize(k);
      b.resize(k);
      EXPECT_EQ(a, b) << tokens << " tokens, k = " << k;
    }
  }
  std::vector<float> norms = {1, 2, -1};
  int64_t pos[2];
  EXPECT_EQ(kvq_sink_select(norms.data(), 3, 2, pos),
            kvq_metal_sink_select(ctx(), norms.data(), 3, 2, pos));
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            kvq_metal_sink_select(ctx(), norms.data(), 2, 3, pos));
}

} // namespace
