//===- cache_test.cpp - The Metal cache against the CPU cache -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The same configuration and the same token stream (a prefill, then decode
// steps of varying size) go into a CPU cache and a Metal cache. After every
// step: fetch is bit-identical (f16 and f32), stats and sink positions are
// equal, and fused attention over the quantized layout (GPU: float
// accumulation, shim: lane-order simd_sum) agrees with the CPU's double
// accumulation within 2e-5 relative to the output's magnitude.
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace kvqmetaltest;

namespace {

struct Config {
  const char *name;
  int method, keyBits, valueBits, group, residual, mode, sinks;
  int layers, kvHeads, headDim;
};

/// A few loud key rows make sink selection non-trivial.
void loudRows(Matrix &k, int32_t, uint64_t seed) {
  kvqtest::Rng rng(seed);
  for (int64_t t = 0; t < k.rows; ++t)
    if (rng.uniform() < 0.15)
      for (int64_t c = 0; c < k.cols; ++c)
        k.set(t * k.cols + c, 4.0f * k.get(t * k.cols + c));
}

kvq_config makeConfig(const Config &c) {
  kvq_config cfg;
  kvq_config_init(&cfg, static_cast<kvq_method>(c.method));
  cfg.key_bits = c.keyBits;
  cfg.value_bits = c.valueBits;
  cfg.group_size = c.group;
  cfg.residual_length = c.residual;
  cfg.residual_mode = c.mode;
  cfg.n_sink_tokens = c.sinks;
  cfg.num_layers = c.layers;
  cfg.num_kv_heads = c.kvHeads;
  cfg.head_dim = c.headDim;
  return cfg;
}

/// A CPU cache and a Metal cache fed the same data.
class Twin : public CacheTwin {
public:
  explicit Twin(const Config &c) : CacheTwin(makeConfig(c), &loudRows) {}
};

class MetalCache : public ::testing::TestWithParam<Config> {};

TEST_P(MetalCache, MatchesTheCpuCacheThroughPrefillAndDecode) {
  const Config c = GetParam();
  Twin twin(c);
  // Layer 0: one prefill then decode steps of 1, 2 and 5 tokens; layer 1 of
  // the same cache starts with a single token (prefill of one).
  const int64_t steps[] = {45, 1, 1, 2, 1, 5, 1, 1, 17, 1, 3, 1};
  uint64_t seed = 1000;
  for (int64_t n : steps) {
    twin.append(0, n, seed % 2 ? KVQ_DTYPE_F32 : KVQ_DTYPE_F16, seed);
    twin.expectSame(0, seed);
    if (::testing::Test::HasFatalFailure() || HasFailure())
      return;
    seed += 7;
  }
  for (int64_t n : {1, 1, 40}) {
    twin.append(1, n, KVQ_DTYPE_F32, seed);
    twin.expectSame(1, seed);
    seed += 7;
  }
}

const Config kConfigs[] = {
    {"fp16", KVQ_METHOD_FP16, 2, 2, 32, 32, 0, 0, 2, 2, 32},
    {"kivi2_sliding", KVQ_METHOD_KIVI, 2, 2, 8, 8, KVQ_RESIDUAL_SLIDING, 0, 2,
     2, 32},
    {"kivi3_4_block", KVQ_METHOD_KIVI, 3, 4, 8, 16, KVQ_RESIDUAL_BLOCK, 0, 2, 2,
     24},
    {"kivi8_head64", KVQ_METHOD_KIVI, 8, 8, 16, 16, KVQ_RESIDUAL_SLIDING, 0, 2,
     1, 64},
    {"sink0", KVQ_METHOD_KIVI_SINK, 2, 2, 8, 8, KVQ_RESIDUAL_SLIDING, 0, 2, 2,
     16},
    {"sink3", KVQ_METHOD_KIVI_SINK, 2, 3, 8, 8, KVQ_RESIDUAL_SLIDING, 3, 2, 2,
     16},
    {"sink5_block", KVQ_METHOD_KIVI_SINK, 4, 2, 4, 8, KVQ_RESIDUAL_BLOCK, 5, 2,
     3, 8},
    {"sink_many_head40", KVQ_METHOD_KIVI_SINK, 3, 3, 8, 4, KVQ_RESIDUAL_SLIDING,
     12, 2, 1, 40},
};

INSTANTIATE_TEST_SUITE_P(Methods, MetalCache, ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<Config> &i) {
                           return i.param.name;
                         });

TEST(MetalCacheErrors, CreateRules) {
  kvq_metal_cache_t *c = nullptr;
  auto create = [&](int method, int headDim, int backend) {
    return kvq_metal_cache_create_flat(method, 2, 2, 8, 8, 0, 0, 0.01f, 8, 0, 1,
                                       32, 1, 1, headDim, backend,
                                       KVQ_ROPE_NONE, 10000.0f, &c);
  };
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            create(KVQ_METHOD_KIVI, 32, KVQ_BACKEND_CPU));
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            create(KVQ_METHOD_KIVI, 512, KVQ_BACKEND_METAL));
  EXPECT_EQ(KVQ_ERR_UNKNOWN_METHOD, create(9, 32, KVQ_BACKEND_METAL));
  EXPECT_EQ(KVQ_ERR_BAD_GROUP_SIZE,
            create(KVQ_METHOD_KIVI, 36, KVQ_BACKEND_METAL));
  EXPECT_EQ(nullptr, c);
  ASSERT_EQ(KVQ_OK, create(KVQ_METHOD_KIVI, 32, KVQ_BACKEND_METAL));
  kvq_metal_cache_destroy(c);
  kvq_metal_cache_destroy(nullptr);
}

TEST(MetalCacheErrors, UpdateFetchAttendStatusesAndNoPartialUpdate) {
  Twin twin({"kivi", KVQ_METHOD_KIVI, 2, 2, 8, 8, 0, 0, 1, 1, 16});
  twin.append(0, 20, KVQ_DTYPE_F32, 3);
  std::vector<float> k(16 * 4, 1.0f), v(16 * 4, 1.0f);
  k[37] = NAN;
  EXPECT_EQ(KVQ_ERR_NON_FINITE,
            kvq_metal_cache_update(twin.gpu_, 0, k.data(), v.data(), 4,
                                   KVQ_DTYPE_F32));
  EXPECT_EQ(KVQ_ERR_LAYER_OUT_OF_RANGE,
            kvq_metal_cache_update(twin.gpu_, 1, k.data(), v.data(), 4,
                                   KVQ_DTYPE_F32));
  EXPECT_EQ(KVQ_ERR_EMPTY_INPUT,
            kvq_metal_cache_update(twin.gpu_, 0, k.data(), v.data(), 0,
                                   KVQ_DTYPE_F32));
  twin.expectSame(0, 3); // the failed updates changed nothing
  std::vector<float> out(16 * 20 * 2);
  EXPECT_EQ(KVQ_ERR_BUFFER_TOO_SMALL,
            kvq_metal_cache_fetch(twin.gpu_, 0, out.data(), out.data(), 19,
                                  KVQ_DTYPE_F32));
  std::vector<float> q(16 * 3, 0.5f), o(16 * 3);
  EXPECT_EQ(KVQ_ERR_SHAPE_MISMATCH,
            kvq_metal_cache_attend(twin.gpu_, 0, q.data(), 1, 0, o.data()));
  EXPECT_EQ(KVQ_ERR_SHAPE_MISMATCH,
            kvq_metal_cache_attend(twin.gpu_, 0, q.data(), 21, 1, o.data()));
  EXPECT_EQ(KVQ_ERR_EMPTY_INPUT,
            kvq_metal_cache_attend(twin.gpu_, 0, q.data(), 0, 1, o.data()));
}

// A KIVI group spanning [-65504, 65504] dequantizes its top code to 65536,
// Inf in fp16: fetch as fp16 is KVQ_ERR_NON_FINITE on both backends (it was
// OK with Inf), and writes nothing; f32 works.
TEST(MetalCacheErrors, Fp16FetchBeyondTheFp16RangeIsAStatus) {
  kvq_metal_cache_t *gpu = nullptr;
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_create_flat(KVQ_METHOD_KIVI, 2, 2, 8, 0, 0,
                                                0, 0.01f, 8, 0, 1, 32, 1, 1, 16,
                                                KVQ_BACKEND_METAL,
                                                KVQ_ROPE_NONE, 10000.0f, &gpu));
  std::vector<float> k(8 * 16, 0.5f), v(8 * 16, 0.5f);
  k[0] = 65504.0f;
  k[16] = -65504.0f;
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(gpu, 0, k.data(), v.data(), 8,
                                           KVQ_DTYPE_F32));
  std::vector<uint16_t> kh(8 * 16, 7), vh(8 * 16, 7);
  EXPECT_EQ(
      KVQ_ERR_NON_FINITE,
      kvq_metal_cache_fetch(gpu, 0, kh.data(), vh.data(), 8, KVQ_DTYPE_F16));
  EXPECT_NE(std::string(kvq_last_error()).find("fp16 range"),
            std::string::npos);
  EXPECT_EQ(kh[0], 7);
  std::vector<float> kf(8 * 16), vf(8 * 16);
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_fetch(gpu, 0, kf.data(), vf.data(), 8,
                                          KVQ_DTYPE_F32));
  EXPECT_EQ(kf[0], 65536.0f);
  kvq_metal_cache_destroy(gpu);
}

} // namespace
