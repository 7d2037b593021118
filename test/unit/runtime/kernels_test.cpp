//===- kernels_test.cpp - Uniform kernels, sinks, bad arguments -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The numerical decisions of docs/RUNTIME.md for uniform quantization (rint
// half to even, fp16-rounded scale/zero, constant groups, calibration
// exclusion), key norm / sink select, and each stateless kernel's bad-argument
// statuses.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <algorithm>

using namespace kvqtest;

TEST(UniformQuant, RoundsHalfToEven) {
  // min 0, max 3, 2 bits: scale 1, so codes are rint(x).
  std::vector<float> x = {0.0f, 3.0f, 0.5f, 1.5f, 2.5f, 1.0f, 2.0f, 0.25f};
  std::vector<uint8_t> codes(8);
  uint16_t scale, zero;
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 1, 8, KVQ_AXIS_PER_TOKEN,
                            8, 2, nullptr, KVQ_CODES_UNPACKED, codes.data(),
                            &scale, &zero),
            KVQ_OK);
  EXPECT_EQ(scale, toHalf(1.0f));
  EXPECT_EQ(zero, toHalf(0.0f));
  EXPECT_EQ(codes, (std::vector<uint8_t>{0, 3, 0, 2, 2, 1, 2, 0}));
}

TEST(UniformQuant, ConstantGroupStoresZeroScaleAndDequantizesExactly) {
  std::vector<float> x(16, 1.25f);
  std::vector<uint8_t> codes(16, 7);
  uint16_t scale = 1, zero = 1;
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 16, 1,
                            KVQ_AXIS_PER_CHANNEL, 16, 4, nullptr,
                            KVQ_CODES_UNPACKED, codes.data(), &scale, &zero),
            KVQ_OK);
  EXPECT_EQ(scale, 0);
  EXPECT_EQ(zero, toHalf(1.25f));
  EXPECT_TRUE(std::all_of(codes.begin(), codes.end(),
                          [](uint8_t c) { return c == 0; }));
  std::vector<float> out(16);
  ASSERT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, &scale, &zero,
                              16, 1, KVQ_AXIS_PER_CHANNEL, 16, 4, out.data(),
                              KVQ_DTYPE_F32),
            KVQ_OK);
  for (float f : out)
    EXPECT_EQ(f, 1.25f);
}

TEST(UniformQuant, QuantizesWithTheFp16RoundedScale) {
  // Range [0, 1] at 3 bits: scale 1/7 is not an fp16 value. Codes must be
  // rint(x / fp16(1/7)), and some x must tell the two scales apart.
  const int n = 2048;
  std::vector<float> x(n);
  x[0] = 0.0f;
  x[1] = 1.0f;
  for (int i = 2; i < n; ++i)
    x[i] = fromHalf(toHalf(static_cast<float>(i) / n)); // spread in (0, 1)
  std::vector<uint8_t> codes(n);
  uint16_t scale, zero;
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 1, n, KVQ_AXIS_PER_TOKEN,
                            n, 3, nullptr, KVQ_CODES_UNPACKED, codes.data(),
                            &scale, &zero),
            KVQ_OK);
  ASSERT_EQ(scale, toHalf(1.0f / 7.0f));
  const float s = fromHalf(scale);
  bool distinguishes = false;
  for (int i = 0; i < n; ++i) {
    float q = std::min(7.0f, std::max(0.0f, std::nearbyint(x[i] / s)));
    EXPECT_EQ(codes[i], static_cast<uint8_t>(q)) << "x = " << x[i];
    float exact = std::min(7.0f, std::max(0.0f, std::nearbyint(x[i] * 7.0f)));
    distinguishes |= exact != q;
  }
  EXPECT_TRUE(distinguishes);
}

TEST(UniformQuant, ExcludedElementsLeaveTheMinMax) {
  // One channel over 8 tokens, token 3 is a planted sink excluded from the
  // calibration: the range is that of the other 7 tokens.
  std::vector<float> x = {0.f, 1.f, 2.f, 100.f, 3.f, 1.5f, 0.5f, 2.5f};
  std::vector<uint8_t> exclude = {0, 0, 0, 1, 0, 0, 0, 0};
  std::vector<uint8_t> codes(8);
  uint16_t scale, zero;
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 8, 1, KVQ_AXIS_PER_CHANNEL,
                            8, 2, exclude.data(), KVQ_CODES_UNPACKED,
                            codes.data(), &scale, &zero),
            KVQ_OK);
  EXPECT_EQ(scale, toHalf(1.0f));
  EXPECT_EQ(zero, toHalf(0.0f));
  EXPECT_EQ(codes[3], 3); // clamped; the caller keeps the sink in fp16
  // An all-excluded group calibrates as the constant 0.
  std::vector<uint8_t> all(8, 1);
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 8, 1, KVQ_AXIS_PER_CHANNEL,
                            8, 2, all.data(), KVQ_CODES_UNPACKED, codes.data(),
                            &scale, &zero),
            KVQ_OK);
  EXPECT_EQ(scale, 0);
  EXPECT_EQ(zero, 0);
}

TEST(UniformQuant, PerChannelAndPerTokenGroupShapes) {
  // [4, 6] matrix; per-token groups of 3 -> scale [4, 2]; per-channel groups
  // of 2 -> scale [2, 6], vectors in row-major order over the scale shape.
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = static_cast<float>(i);
  std::vector<uint8_t> codes(24);
  std::vector<uint16_t> scale(12), zero(12);
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 4, 6, KVQ_AXIS_PER_TOKEN,
                            3, 2, nullptr, KVQ_CODES_UNPACKED, codes.data(),
                            scale.data(), zero.data()),
            KVQ_OK);
  for (int v = 0; v < 8; ++v) // vector v = row v/2, columns 3*(v%2)..
    EXPECT_EQ(zero[v], toHalf(static_cast<float>((v / 2) * 6 + (v % 2) * 3)));
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 4, 6, KVQ_AXIS_PER_CHANNEL,
                            2, 2, nullptr, KVQ_CODES_UNPACKED, codes.data(),
                            scale.data(), zero.data()),
            KVQ_OK);
  for (int v = 0; v < 12; ++v) { // vector v = rows 2*(v/6).., column v%6
    EXPECT_EQ(zero[v], toHalf(static_cast<float>((v / 6) * 12 + v % 6)));
    EXPECT_EQ(scale[v], toHalf(6.0f / 3.0f));
  }
}

TEST(UniformQuant, F16AndF32InputsAgree) {
  Rng rng(3);
  std::vector<float> x(64);
  std::vector<uint16_t> xh(64);
  for (int i = 0; i < 64; ++i) {
    xh[i] = toHalf(static_cast<float>(rng.normal()));
    x[i] = fromHalf(xh[i]);
  }
  std::vector<uint8_t> c1(64), c2(64);
  std::vector<uint16_t> s1(8), z1(8), s2(8), z2(8);
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN,
                            8, 3, nullptr, KVQ_CODES_UNPACKED, c1.data(),
                            s1.data(), z1.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_group_quant(xh.data(), KVQ_DTYPE_F16, 8, 8, KVQ_AXIS_PER_TOKEN,
                            8, 3, nullptr, KVQ_CODES_UNPACKED, c2.data(),
                            s2.data(), z2.data()),
            KVQ_OK);
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(z1, z2);
}

TEST(SinkKernels, KeyNormIsMeanOverHeadsOfL2Norms) {
  // 2 tokens, 2 heads, dim 2: token 0 heads (3,4) and (0,0) -> (5+0)/2.
  std::vector<float> k = {3, 4, 0, 0, 1, 0, 0, 2};
  std::vector<float> norms(2);
  ASSERT_EQ(kvq_key_norm(k.data(), KVQ_DTYPE_F32, 2, 2, 2, norms.data()),
            KVQ_OK);
  EXPECT_FLOAT_EQ(norms[0], 2.5f);
  EXPECT_FLOAT_EQ(norms[1], 1.5f);
}

TEST(SinkKernels, SinkSelectTopKTiesToEarlierAscending) {
  std::vector<float> norms = {1, 5, 2, 5, 9, 5, 0};
  std::vector<int64_t> pos(3);
  ASSERT_EQ(kvq_sink_select(norms.data(), 7, 3, pos.data()), KVQ_OK);
  EXPECT_EQ(pos, (std::vector<int64_t>{1, 3, 4})); // 9, then the first two 5s
  ASSERT_EQ(kvq_sink_select(norms.data(), 7, 0, pos.data()), KVQ_OK);
}

//===----------------------------------------------------------------------===//
// Bad arguments: a distinct status per problem, outputs untouched.
//===----------------------------------------------------------------------===//

namespace {
struct GroupQuantCall {
  std::vector<float> x = std::vector<float>(64, 1.0f);
  std::vector<uint8_t> codes = std::vector<uint8_t>(64, 0xAB);
  std::vector<uint16_t> scale = std::vector<uint16_t>(64, 0xABCD);
  std::vector<uint16_t> zero = std::vector<uint16_t>(64, 0xABCD);
  kvq_status run(int64_t rows = 8, int64_t cols = 8, int32_t group = 4,
                 int32_t bits = 2, kvq_dtype dtype = KVQ_DTYPE_F32,
                 bool nullX = false, kvq_axis axis = KVQ_AXIS_PER_TOKEN) {
    return kvq_group_quant(nullX ? nullptr : x.data(), dtype, rows, cols, axis,
                           group, bits, nullptr, KVQ_CODES_UNPACKED,
                           codes.data(), scale.data(), zero.data());
  }
  bool untouched() const {
    return std::all_of(codes.begin(), codes.end(),
                       [](uint8_t c) { return c == 0xAB; }) &&
           std::all_of(scale.begin(), scale.end(),
                       [](uint16_t c) { return c == 0xABCD; });
  }
};
} // namespace

TEST(KernelBadArguments, GroupQuant) {
  GroupQuantCall c;
  EXPECT_EQ(c.run(8, 8, 4, 2, KVQ_DTYPE_F32, true), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(c.run(8, 8, 4, 5), KVQ_ERR_UNSUPPORTED_BITS);
  EXPECT_NE(std::string(kvq_last_error()).find("bits"), std::string::npos);
  EXPECT_EQ(c.run(8, 8, 4, 1), KVQ_ERR_UNSUPPORTED_BITS);
  EXPECT_EQ(c.run(8, 8, 3), KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(c.run(8, 8, 0), KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(c.run(6, 8, 4, 2, KVQ_DTYPE_F32, false, KVQ_AXIS_PER_CHANNEL),
            KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(c.run(0, 8), KVQ_ERR_EMPTY_INPUT);
  EXPECT_EQ(c.run(-1, 8), KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.run(8, 8, 4, 2, static_cast<kvq_dtype>(7)),
            KVQ_ERR_INVALID_ARGUMENT);
  c.x[5] = NAN;
  EXPECT_EQ(c.run(), KVQ_ERR_NON_FINITE);
  c.x[5] = INFINITY;
  EXPECT_EQ(c.run(), KVQ_ERR_NON_FINITE);
  c.x[5] = 1e6f; // finite in f32, not representable in fp16
  EXPECT_EQ(c.run(), KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(c.untouched());
  EXPECT_EQ(kvq_group_quant(c.x.data(), KVQ_DTYPE_F32, 8, 8,
                            static_cast<kvq_axis>(9), 4, 2, nullptr,
                            KVQ_CODES_UNPACKED, c.codes.data(), c.scale.data(),
                            c.zero.data()),
            KVQ_ERR_INVALID_ARGUMENT);
}

TEST(KernelBadArguments, GroupDequant) {
  std::vector<uint8_t> codes(64, 1);
  std::vector<uint16_t> scale(16, toHalf(1.0f)), zero(16, 0);
  std::vector<float> out(64, -7.0f);
  auto run = [&](int bits, int group) {
    return kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, scale.data(),
                             zero.data(), 8, 8, KVQ_AXIS_PER_TOKEN, group, bits,
                             out.data(), KVQ_DTYPE_F32);
  };
  EXPECT_EQ(kvq_group_dequant(nullptr, KVQ_CODES_UNPACKED, scale.data(),
                              zero.data(), 8, 8, KVQ_AXIS_PER_TOKEN, 4, 2,
                              out.data(), KVQ_DTYPE_F32),
            KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(run(6, 4), KVQ_ERR_UNSUPPORTED_BITS);
  EXPECT_EQ(run(2, 5), KVQ_ERR_BAD_GROUP_SIZE);
  codes[3] = 4; // > 2^2 - 1
  EXPECT_EQ(run(2, 4), KVQ_ERR_INVALID_ARGUMENT);
  codes[3] = 1;
  scale[2] = 0x7c00; // inf scale
  EXPECT_EQ(run(2, 4), KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(
      std::all_of(out.begin(), out.end(), [](float f) { return f == -7.0f; }));
  scale[2] = toHalf(1.0f);
  EXPECT_EQ(run(2, 4), KVQ_OK);
}

TEST(KernelBadArguments, NuqFitQuantDequant) {
  std::vector<float> x(64, 0.5f);
  const int64_t S = kvq_nuq_fit_scratch_size(8, 3);
  std::vector<float> scratch(static_cast<size_t>(S));
  std::vector<uint16_t> levels(8 * 16, 0x1234);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3,
                        8, nullptr, nullptr, S, levels.data()),
            KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 7,
                        8, nullptr, scratch.data(), S, levels.data()),
            KVQ_ERR_UNSUPPORTED_BITS);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 3, 3,
                        8, nullptr, scratch.data(), S, levels.data()),
            KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3,
                        -1, nullptr, scratch.data(), S, levels.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3,
                        8, nullptr, scratch.data(), S - 1, levels.data()),
            KVQ_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 0, 8, KVQ_AXIS_PER_TOKEN, 8, 3,
                        8, nullptr, scratch.data(), S, levels.data()),
            KVQ_ERR_EMPTY_INPUT);
  x[0] = NAN;
  EXPECT_EQ(kvq_nuq_fit(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3,
                        8, nullptr, scratch.data(), S, levels.data()),
            KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(std::all_of(levels.begin(), levels.end(),
                          [](uint16_t l) { return l == 0x1234; }));
  x[0] = 0.5f;
  // Quant rejects descending level tables; dequant rejects bad codes.
  std::vector<uint16_t> desc(8 * 8);
  for (int v = 0; v < 8; ++v)
    for (int l = 0; l < 8; ++l)
      desc[v * 8 + l] = toHalf(static_cast<float>(8 - l));
  std::vector<uint8_t> codes(64, 0);
  EXPECT_EQ(kvq_nuq_quant(x.data(), KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8,
                          3, desc.data(), KVQ_CODES_UNPACKED, codes.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_nuq_quant(nullptr, KVQ_DTYPE_F32, 8, 8, KVQ_AXIS_PER_TOKEN, 8,
                          3, desc.data(), KVQ_CODES_UNPACKED, codes.data()),
            KVQ_ERR_NULL_POINTER);
  codes[0] = 8;
  std::vector<float> out(64);
  EXPECT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, desc.data(), 8, 8,
                            KVQ_AXIS_PER_TOKEN, 8, 3, out.data(),
                            KVQ_DTYPE_F32),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, desc.data(), 8, 8,
                            KVQ_AXIS_PER_TOKEN, 8, 5, out.data(),
                            KVQ_DTYPE_F32),
            KVQ_ERR_UNSUPPORTED_BITS);
}

TEST(KernelBadArguments, OutlierSplitAndScreen) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> mask(64, 9);
  std::vector<float> thr(8, -1.0f);
  EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 8, 8,
                              KVQ_AXIS_PER_CHANNEL, 8, 1.0f, nullptr,
                              mask.data(), thr.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 8, 8,
                              KVQ_AXIS_PER_CHANNEL, 8, -0.1f, nullptr,
                              mask.data(), thr.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 8, 8,
                              KVQ_AXIS_PER_CHANNEL, 8, NAN, nullptr,
                              mask.data(), thr.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 8, 8,
                              KVQ_AXIS_PER_CHANNEL, 3, 0.1f, nullptr,
                              mask.data(), thr.data()),
            KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(kvq_outlier_split(x.data(), KVQ_DTYPE_F32, 8, 8,
                              KVQ_AXIS_PER_CHANNEL, 8, 0.1f, nullptr, nullptr,
                              thr.data()),
            KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(
      kvq_outlier_screen(x.data(), KVQ_DTYPE_F32, 8, 8, nullptr, mask.data()),
      KVQ_ERR_NULL_POINTER);
  thr[1] = NAN;
  EXPECT_EQ(kvq_outlier_screen(x.data(), KVQ_DTYPE_F32, 8, 8, thr.data(),
                               mask.data()),
            KVQ_ERR_NON_FINITE);
  EXPECT_EQ(kvq_outlier_screen(x.data(), KVQ_DTYPE_F32, 8, 0, thr.data(),
                               mask.data()),
            KVQ_ERR_EMPTY_INPUT);
  EXPECT_TRUE(
      std::all_of(mask.begin(), mask.end(), [](uint8_t m) { return m == 9; }));
}

TEST(KernelBadArguments, KeyNormAndSinkSelect) {
  std::vector<float> k(16, 1.0f), norms(4, -1.0f);
  std::vector<int64_t> pos(4, -5);
  EXPECT_EQ(kvq_key_norm(nullptr, KVQ_DTYPE_F32, 4, 1, 4, norms.data()),
            KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_key_norm(k.data(), KVQ_DTYPE_F32, 0, 1, 4, norms.data()),
            KVQ_ERR_EMPTY_INPUT);
  EXPECT_EQ(kvq_key_norm(k.data(), KVQ_DTYPE_F32, 4, -1, 4, norms.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  k[2] = INFINITY;
  EXPECT_EQ(kvq_key_norm(k.data(), KVQ_DTYPE_F32, 4, 1, 4, norms.data()),
            KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(std::all_of(norms.begin(), norms.end(),
                          [](float f) { return f == -1.0f; }));
  std::vector<float> good = {1, 2, 3, 4};
  EXPECT_EQ(kvq_sink_select(good.data(), 4, 5, pos.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_sink_select(good.data(), 0, 0, pos.data()),
            KVQ_ERR_EMPTY_INPUT);
  EXPECT_EQ(kvq_sink_select(nullptr, 4, 1, pos.data()), KVQ_ERR_NULL_POINTER);
  good[1] = NAN;
  EXPECT_EQ(kvq_sink_select(good.data(), 4, 1, pos.data()), KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(
      std::all_of(pos.begin(), pos.end(), [](int64_t p) { return p == -5; }));
}

// Every kernel entry point refuses an fp16 or f32 buffer that is not
// aligned to its elements, names it, and writes nothing.
TEST(KernelBadArguments, MisalignedDataBuffersAreRefused) {
  std::vector<uint8_t> raw(64 * 4 + 16, 0);
  uint8_t *base =
      raw.data() + (8 - reinterpret_cast<uintptr_t>(raw.data()) % 8);
  const void *h1 = base + 1, *f2 = base + 2; // fp16 at 1 mod 2, f32 at 2 mod 4
  std::vector<uint8_t> codes(64, 0xAB);
  std::vector<uint16_t> scale(16, toHalf(1.0f)), zero(16, 0), levels(8 * 8);
  for (int v = 0; v < 8; ++v)
    for (int l = 0; l < 8; ++l)
      levels[static_cast<size_t>(v * 8 + l)] = toHalf(static_cast<float>(l));
  std::vector<float> scratch(
      static_cast<size_t>(kvq_nuq_fit_scratch_size(8, 3))),
      thr(8, 1.0f), norms(4, -1.0f);
  std::vector<uint8_t> mask(64, 9);
  std::vector<uint16_t> fitted(8 * 8, 0x1234);
  auto refused = [&](kvq_status s, const char *name) {
    EXPECT_EQ(s, KVQ_ERR_INVALID_ARGUMENT) << name;
    const std::string msg = kvq_last_error();
    EXPECT_NE(msg.find(std::string(name) + " is not aligned"),
              std::string::npos)
        << msg;
  };
  for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
    const void *x = dt == KVQ_DTYPE_F16 ? h1 : f2;
    void *out = const_cast<void *>(x);
    refused(kvq_group_quant(x, dt, 8, 8, KVQ_AXIS_PER_TOKEN, 4, 2, nullptr,
                            KVQ_CODES_UNPACKED, codes.data(), scale.data(),
                            zero.data()),
            "x");
    refused(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, scale.data(),
                              zero.data(), 8, 8, KVQ_AXIS_PER_TOKEN, 4, 2, out,
                              dt),
            "out");
    refused(kvq_nuq_fit(x, dt, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3, 8, nullptr,
                        scratch.data(), static_cast<int64_t>(scratch.size()),
                        fitted.data()),
            "x");
    refused(kvq_nuq_quant(x, dt, 8, 8, KVQ_AXIS_PER_TOKEN, 8, 3, levels.data(),
                          KVQ_CODES_UNPACKED, codes.data()),
            "x");
    refused(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, levels.data(), 8,
                            8, KVQ_AXIS_PER_TOKEN, 8, 3, out, dt),
            "out");
    refused(kvq_outlier_split(x, dt, 8, 8, KVQ_AXIS_PER_CHANNEL, 8, 0.1f,
                              nullptr, mask.data(), thr.data()),
            "x");
    refused(kvq_outlier_screen(x, dt, 8, 8, thr.data(), mask.data()), "x");
    refused(kvq_key_norm(x, dt, 4, 1, 4, norms.data()), "keys");
  }
  EXPECT_TRUE(
      std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(std::all_of(codes.begin(), codes.end(),
                          [](uint8_t c) { return c == 0xAB; }));
  EXPECT_TRUE(
      std::all_of(mask.begin(), mask.end(), [](uint8_t m) { return m == 9; }));
  EXPECT_TRUE(std::all_of(fitted.begin(), fitted.end(),
                          [](uint16_t l) { return l == 0x1234; }));
  EXPECT_TRUE(std::all_of(norms.begin(), norms.end(),
                          [](float f) { return f == -1.0f; }));
}

TEST(StatusStrings, EveryStatusHasADistinctName) {
  std::vector<std::string> names;
  for (int s = 0; s <= KVQ_ERR_CORRUPT_DATA; ++s)
    names.push_back(kvq_status_string(static_cast<kvq_status>(s)));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
  EXPECT_STREQ(kvq_status_string(static_cast<kvq_status>(99)),
               "unknown status");
}
