//===- uniform_test.cpp - Metal group quant/dequant vs the CPU reference --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_metal_group_quant/_dequant (MSL kernels run through the shim) must
// give the bytes of kvq_group_quant/_dequant for every width, axis, dtype,
// layout and exclusion pattern, and fail with the same statuses.
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

using namespace kvqmetaltest;

namespace {

struct Case {
  int bits;
  kvq_axis axis;
  kvq_dtype dtype;
  kvq_code_layout layout;
  bool exclude;
};

class MetalUniform : public ::testing::TestWithParam<Case> {};

TEST_P(MetalUniform, QuantAndDequantAreBitIdentical) {
  const Case c = GetParam();
  const int64_t rows = 48, cols = 40, group = 8;
  Matrix x = randomMatrix(rows, cols, c.dtype, 100 + c.bits);
  plantConstantGroups(x, c.axis, group);
  std::vector<uint8_t> ex;
  if (c.exclude)
    ex = randomMask(rows * cols, 0.2, 5);
  const int64_t vectors = rows * cols / group;
  const int64_t codeBytes = c.layout == KVQ_CODES_PACKED
                                ? kvq_packed_size(rows * cols, c.bits)
                                : rows * cols;
  std::vector<uint8_t> codesCpu(codeBytes, 0xAA), codesGpu(codeBytes, 0x55);
  std::vector<uint16_t> sCpu(vectors), zCpu(vectors), sGpu(vectors),
      zGpu(vectors);
  const uint8_t *exp = c.exclude ? ex.data() : nullptr;
  ASSERT_EQ(KVQ_OK, kvq_group_quant(x.data(), c.dtype, rows, cols, c.axis,
                                    group, c.bits, exp, c.layout,
                                    codesCpu.data(), sCpu.data(), zCpu.data()));
  ASSERT_EQ(KVQ_OK,
            kvq_metal_group_quant(ctx(), x.data(), c.dtype, rows, cols, c.axis,
                                  group, c.bits, exp, c.layout, codesGpu.data(),
                                  sGpu.data(), zGpu.data()))
      << kvq_last_error();
  EXPECT_EQ(codesCpu, codesGpu);
  EXPECT_EQ(sCpu, sGpu);
  EXPECT_EQ(zCpu, zGpu);

  for (kvq_dtype out : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
    const size_t bytes = rows * cols * (out == KVQ_DTYPE_F16 ? 2 : 4);
    std::vector<uint8_t> dCpu(bytes, 1), dGpu(bytes, 2);
    ASSERT_EQ(KVQ_OK, kvq_group_dequant(codesCpu.data(), c.layout, sCpu.data(),
                                        zCpu.data(), rows, cols, c.axis, group,
                                        c.bits, dCpu.data(), out));
    ASSERT_EQ(KVQ_OK,
              kvq_metal_group_dequant(ctx(), codesCpu.data(), c.layout,
                                      sCpu.data(), zCpu.data(), rows, cols,
                                      c.axis, group, c.bits, dGpu.data(), out))
        << kvq_last_error();
    EXPECT_EQ(dCpu, dGpu) << "dequant to dtype " << out;
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int bits : {2, 3, 4, 8})
    for (kvq_axis axis : {KVQ_AXIS_PER_TOKEN, KVQ_AXIS_PER_CHANNEL})
      for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
        for (kvq_code_layout layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED})
          for (bool exclude : {false, true})
            cases.push_back({bits, axis, dtype, layout, exclude});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return "b" + std::to_string(c.bits) +
         (c.axis == KVQ_AXIS_PER_TOKEN ? "_token" : "_channel") +
         (c.dtype == KVQ_DTYPE_F16 ? "_f16" : "_f32") +
         (c.layout == KVQ_CODES_PACKED ? "_packed" : "_unpacked") +
         (c.exclude ? "_exclude" : "");
}

INSTANTIATE_TEST_SUITE_P(AllWidths, MetalUniform,
                         ::testing::ValuesIn(allCases()), caseName);

TEST(MetalUniformErrors, SameStatusesAsTheCpuAndOutputsUntouched) {
  Matrix x = randomMatrix(4, 8, KVQ_DTYPE_F32, 1);
  std::vector<uint8_t> codes(32, 7);
  std::vector<uint16_t> s(8, 9), z(8, 9);
  auto both = [&](auto &&call) {
    kvq_status cpu = call(false), gpu = call(true);
    EXPECT_EQ(cpu, gpu);
    EXPECT_NE(KVQ_OK, gpu);
  };
  auto quant = [&](int bits, int group, const void *data) {
    return [&, bits, group, data](bool metal) {
      return metal ? kvq_metal_group_quant(ctx(), data, KVQ_DTYPE_F32, 4, 8,
                                           KVQ_AXIS_PER_TOKEN, group, bits,
                                           nullptr, KVQ_CODES_UNPACKED,
                                           codes.data(), s.data(), z.data())
                   : kvq_group_quant(data, KVQ_DTYPE_F32, 4, 8,
                                     KVQ_AXIS_PER_TOKEN, group, bits, nullptr,
                                     KVQ_CODES_UNPACKED, codes.data(), s.data(),
                                     z.data());
    };
  };
  both(quant(5, 4, x.data()));
  both(quant(2, 3, x.data()));
  both(quant(2, 4, nullptr));
  std::vector<float> bad(32, 1.0f);
  bad[17] = NAN;
  both(quant(2, 4, bad.data()));
  bad[17] = 1e6f; // finite, but not representable in fp16
  both(quant(2, 4, bad.data()));
  EXPECT_EQ(std::vector<uint8_t>(32, 7), codes);
  EXPECT_EQ(std::vector<uint16_t>(8, 9), s);

  EXPECT_EQ(KVQ_ERR_NULL_POINTER,
            kvq_metal_group_quant(nullptr, x.data(), KVQ_DTYPE_F32, 4, 8,
                                  KVQ_AXIS_PER_TOKEN, 4, 2, nullptr,
                                  KVQ_CODES_UNPACKED, codes.data(), s.data(),
                                  z.data()));
  std::vector<uint8_t> tooBig(32, 4); // code 4 > 2^2 - 1
  std::vector<float> out(32, 0.0f);
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            kvq_metal_group_dequant(
                ctx(), tooBig.data(), KVQ_CODES_UNPACKED, s.data(), z.data(), 4,
                8, KVQ_AXIS_PER_TOKEN, 4, 2, out.data(), KVQ_DTYPE_F32));
  EXPECT_EQ(std::vector<float>(32, 0.0f), out);
}

TEST(MetalContext, DefaultContextIsTheEmulatedDevice) {
  ASSERT_NE(nullptr, kvq_metal_default_context());
  EXPECT_EQ(kvq_metal_default_context(), kvq_metal_default_context());
  EXPECT_STREQ("emulated (CPU shim)",
               kvq_metal_device_name(kvq_metal_default_context()));
  EXPECT_STREQ("", kvq_metal_device_name(nullptr));
}

} // namespace
