//===- nuq_test.cpp - Metal NUQ fit/quant/dequant vs the CPU reference ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The Lloyd-Max fit on the GPU (software binary64) must give the fp16
// levels of kvq_nuq_fit bit for bit, for every width, axis, dtype, sweep
// count and exclusion pattern; quantization and dequantization must give
// the same bytes.
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

using namespace kvqmetaltest;

namespace {

struct Case {
  int bits;
  kvq_axis axis;
  kvq_dtype dtype;
  int iters;
  bool exclude;
};

class MetalNuq : public ::testing::TestWithParam<Case> {};

TEST_P(MetalNuq, FitQuantDequantAreBitIdentical) {
  const Case c = GetParam();
  // Per-token vectors of 64 channels, per-channel vectors of 96 tokens
  // (more elements than 8-bit levels would otherwise leave empty cells).
  const int64_t rows = c.axis == KVQ_AXIS_PER_TOKEN ? 6 : 96;
  const int64_t cols = c.axis == KVQ_AXIS_PER_TOKEN ? 128 : 6;
  const int64_t group = c.axis == KVQ_AXIS_PER_TOKEN ? 64 : 96;
  Matrix x = randomMatrix(rows, cols, c.dtype, 300 + c.bits * 7 + c.iters);
  plantConstantGroups(x, c.axis, group);
  std::vector<uint8_t> ex;
  if (c.exclude) {
    ex = randomMask(rows * cols, 0.1, 9);
    // One vector with every element excluded: all-zero levels.
    for (int64_t r = 0; r < (c.axis == KVQ_AXIS_PER_TOKEN ? 1 : rows); ++r)
      for (int64_t j = 0; j < (c.axis == KVQ_AXIS_PER_TOKEN ? group : 1); ++j)
        ex[r * cols + j] = 1;
  }
  const uint8_t *exp = c.exclude ? ex.data() : nullptr;
  const int64_t vectors = rows * cols / group, count = int64_t{1} << c.bits;
  std::vector<float> scratch(kvq_nuq_fit_scratch_size(group, c.bits));
  std::vector<uint16_t> lCpu(vectors * count, 1), lGpu(vectors * count, 2);
  ASSERT_EQ(KVQ_OK, kvq_nuq_fit(x.data(), c.dtype, rows, cols, c.axis, group,
                                c.bits, c.iters, exp, scratch.data(),
                                scratch.size(), lCpu.data()));
  ASSERT_EQ(KVQ_OK,
            kvq_metal_nuq_fit(ctx(), x.data(), c.dtype, rows, cols, c.axis,
                              group, c.bits, c.iters, exp, scratch.data(),
                              scratch.size(), lGpu.data()))
      << kvq_last_error();
  ASSERT_EQ(lCpu, lGpu);

  for (kvq_code_layout layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED}) {
    const int64_t bytes = layout == KVQ_CODES_PACKED
                              ? kvq_packed_size(rows * cols, c.bits)
                              : rows * cols;
    std::vector<uint8_t> cCpu(bytes, 3), cGpu(bytes, 4);
    ASSERT_EQ(KVQ_OK,
              kvq_nuq_quant(x.data(), c.dtype, rows, cols, c.axis, group,
                            c.bits, lCpu.data(), layout, cCpu.data()));
    ASSERT_EQ(KVQ_OK, kvq_metal_nuq_quant(ctx(), x.data(), c.dtype, rows, cols,
                                          c.axis, group, c.bits, lCpu.data(),
                                          layout, cGpu.data()))
        << kvq_last_error();
    EXPECT_EQ(cCpu, cGpu);
    const size_t outBytes = rows * cols * (c.dtype == KVQ_DTYPE_F16 ? 2 : 4);
    std::vector<uint8_t> dCpu(outBytes, 5), dGpu(outBytes, 6);
    ASSERT_EQ(KVQ_OK,
              kvq_nuq_dequant(cCpu.data(), layout, lCpu.data(), rows, cols,
                              c.axis, group, c.bits, dCpu.data(), c.dtype));
    ASSERT_EQ(KVQ_OK, kvq_metal_nuq_dequant(
                          ctx(), cCpu.data(), layout, lCpu.data(), rows, cols,
                          c.axis, group, c.bits, dGpu.data(), c.dtype))
        << kvq_last_error();
    EXPECT_EQ(dCpu, dGpu);
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int bits : {2, 3, 4, 8})
    for (kvq_axis axis : {KVQ_AXIS_PER_TOKEN, KVQ_AXIS_PER_CHANNEL})
      for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
        for (int iters : {0, 8})
          for (bool exclude : {false, true})
            cases.push_back({bits, axis, dtype, iters, exclude});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return "b" + std::to_string(c.bits) +
         (c.axis == KVQ_AXIS_PER_TOKEN ? "_token" : "_channel") +
         (c.dtype == KVQ_DTYPE_F16 ? "_f16" : "_f32") + "_it" +
         std::to_string(c.iters) + (c.exclude ? "_exclude" : "");
}

INSTANTIATE_TEST_SUITE_P(AllWidths, MetalNuq, ::testing::ValuesIn(allCases()),
                         caseName);

TEST(MetalNuq, HeavyTailedDataOverManySweeps) {
  // Laplace data with wide dynamic range stresses the binary64 sums.
  const int64_t rows = 512, cols = 4;
  Matrix x = randomMatrix(rows, cols, KVQ_DTYPE_F32, 77);
  const int64_t S = kvq_nuq_fit_scratch_size(rows, 3);
  std::vector<float> scratch(static_cast<size_t>(S));
  std::vector<uint16_t> a(4 * 8), b(4 * 8);
  ASSERT_EQ(KVQ_OK, kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, rows, cols,
                                KVQ_AXIS_PER_CHANNEL, rows, 3, 30, nullptr,
                                scratch.data(), S, a.data()));
  ASSERT_EQ(KVQ_OK, kvq_metal_nuq_fit(ctx(), x.data(), KVQ_DTYPE_F32, rows,
                                      cols, KVQ_AXIS_PER_CHANNEL, rows, 3, 30,
                                      nullptr, scratch.data(), S, b.data()));
  EXPECT_EQ(a, b);
}

TEST(MetalNuqErrors, SameStatusesAsTheCpu) {
  Matrix x = randomMatrix(4, 8, KVQ_DTYPE_F32, 2);
  const int64_t S = kvq_nuq_fit_scratch_size(4, 2);
  std::vector<float> scratch(static_cast<size_t>(S));
  std::vector<uint16_t> levels(4 * 2 * 4, 0);
  auto fit = [&](bool metal, int iters, int64_t scratchFloats) {
    return metal
               ? kvq_metal_nuq_fit(ctx(), x.data(), KVQ_DTYPE_F32, 4, 8,
                                   KVQ_AXIS_PER_TOKEN, 4, 2, iters, nullptr,
                                   scratch.data(), scratchFloats, levels.data())
               : kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 4, 8, KVQ_AXIS_PER_TOKEN,
                             4, 2, iters, nullptr, scratch.data(),
                             scratchFloats, levels.data());
  };
  EXPECT_EQ(fit(false, -1, S), fit(true, -1, S));
  EXPECT_EQ(KVQ_ERR_BUFFER_TOO_SMALL, fit(true, 2, S - 1));
  EXPECT_EQ(fit(false, 2, S - 1), fit(true, 2, S - 1));
  EXPECT_EQ(KVQ_OK, fit(true, 2, S));
  EXPECT_EQ(KVQ_OK, fit(false, 2, S));
  std::vector<uint16_t> descending = {0x4000, 0x3c00, 0x3800, 0x3400};
  std::vector<uint8_t> codes(8);
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            kvq_metal_nuq_quant(ctx(), x.data(), KVQ_DTYPE_F32, 1, 8,
                                KVQ_AXIS_PER_TOKEN, 8, 2, descending.data(),
                                KVQ_CODES_UNPACKED, codes.data()));
}

} // namespace
