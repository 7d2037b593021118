//===- metal_cache_kvquant_test.cpp - Metal KVQuant cache vs the CPU one --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The KVQuant method of the Metal cache against the CPU store
// (runtime/cpu/stores/kvquant/), the oracle: the same configuration
// and the same prefill + decode steps go into a CPU cache and a Metal
// cache, and after every step fetch must be bit-identical (f16 and f32),
// every field of kvq_stats equal, the sink positions equal, and fused
// attention within 2e-5 of the output's magnitude (the tolerance of
// cache_test.cpp: float accumulation on the GPU, double on the CPU). The
// configurations cover bits 2/3/4/8, outlier fractions including 0,
// kvquant_n_sink 0/1/4 (including a prefill made only of sinks), frozen
// keys (refit_interval 0) and refits every 4 or 16 tokens, and several
// step splits.
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace kvqmetaltest;

namespace {

struct Config {
  const char *name;
  int keyBits, valueBits;
  float fraction;
  int nSink, refit, iters;
  int kvHeads, headDim;
  std::vector<int64_t> steps; ///< layer 0: prefill, then decode steps
};

void PrintTo(const Config &c, std::ostream *os) { *os << c.name; }

kvq_config makeConfig(const Config &c) {
  kvq_config cfg;
  kvq_config_init(&cfg, KVQ_METHOD_KVQUANT);
  cfg.key_bits = c.keyBits;
  cfg.value_bits = c.valueBits;
  cfg.outlier_fraction = c.fraction;
  cfg.kvquant_n_sink = c.nSink;
  cfg.refit_interval = c.refit;
  cfg.lloyd_iters = c.iters;
  cfg.num_layers = 2;
  cfg.num_kv_heads = c.kvHeads;
  cfg.head_dim = c.headDim;
  return cfg;
}

kvq_status createMetal(const kvq_config &cfg, kvq_metal_cache_t **out) {
  return kvq_metal_cache_create_flat(
      cfg.method, cfg.key_bits, cfg.value_bits, cfg.group_size,
      cfg.residual_length, cfg.residual_mode, cfg.n_sink_tokens,
      cfg.outlier_fraction, cfg.lloyd_iters, cfg.refit_interval,
      cfg.kvquant_n_sink, cfg.kvquant_group_size, cfg.num_layers,
      cfg.num_kv_heads, cfg.head_dim, KVQ_BACKEND_METAL, cfg.rope_style,
      cfg.rope_theta, out);
}

/// Loud channels (KVQuant's premise) and a few loud rows: screening and
/// the rank split then see large, repeated magnitudes.
void loudChannelsAndRows(Matrix &k, int32_t, uint64_t seed) {
  kvqtest::Rng rng(seed);
  for (int64_t t = 0; t < k.rows; ++t) {
    const bool loudRow = rng.uniform() < 0.1;
    for (int64_t c = 0; c < k.cols; ++c) {
      const float gain = (c % 7 == 3 ? 6.0f : 1.0f) * (loudRow ? 3.0f : 1.0f);
      k.set(t * k.cols + c, gain * k.get(t * k.cols + c));
    }
  }
}

/// A CPU and a Metal KVQuant cache fed the same data.
class Twin : public CacheTwin {
public:
  explicit Twin(const Config &c)
      : CacheTwin(makeConfig(c), &loudChannelsAndRows) {}
};

class MetalKvquantCache : public ::testing::TestWithParam<Config> {};

TEST_P(MetalKvquantCache, MatchesTheCpuCacheThroughPrefillAndDecode) {
  const Config c = GetParam();
  Twin twin(c);
  uint64_t seed = 2000;
  // What the stream exercised, over all steps.
  int64_t compressed = 0, outliers = 0, sinks = 0, waiting = 0;
  auto step = [&](int layer, int64_t n, kvq_dtype dtype) {
    twin.append(layer, n, dtype, seed);
    twin.expectSame(layer, seed);
    const kvq_stats s = twin.gpuStats(-1);
    compressed = std::max(compressed, s.compressed_tokens);
    outliers = std::max(outliers, s.outlier_count);
    sinks = std::max(sinks, s.sink_tokens);
    waiting = std::max(waiting, s.residual_tokens);
    seed += 7;
  };
  for (int64_t n : c.steps) {
    step(0, n, seed % 2 ? KVQ_DTYPE_F32 : KVQ_DTYPE_F16);
    if (::testing::Test::HasFatalFailure() || HasFailure())
      return;
  }
  // Layer 1 of the same cache: a one-token prefill, then more.
  for (int64_t n : {1, 2, 9, 1}) {
    step(1, n, KVQ_DTYPE_F32);
    if (::testing::Test::HasFatalFailure() || HasFailure())
      return;
  }
  EXPECT_GT(compressed, 0);
  EXPECT_EQ(c.fraction > 0, outliers > 0);
  EXPECT_EQ(c.nSink > 0, sinks > 0);
  EXPECT_EQ(c.refit > 0, waiting > 0); // tokens waiting fp16 for a refit
}

const std::vector<int64_t> kLongPrefill = {45, 1, 1, 2, 1, 5, 1, 1, 17, 1, 3};
const std::vector<int64_t> kShortPrefill = {3, 1, 6, 1, 1, 20, 2, 1};
const std::vector<int64_t> kOneTokenSteps = {1, 1, 1, 1, 30, 1, 1};

const Config kConfigs[] = {
    {"k2v2_frozen", 2, 2, 0.01f, 1, 0, 8, 2, 32, kLongPrefill},
    {"k3v3_frozen_sinks4", 3, 3, 0.02f, 4, 0, 8, 2, 16, kLongPrefill},
    {"k4v2_no_outliers", 4, 2, 0.0f, 1, 0, 6, 2, 24, kLongPrefill},
    {"k8v8_head64", 8, 8, 0.05f, 0, 0, 4, 1, 64, kShortPrefill},
    {"k3v4_sinks_only_prefill", 3, 4, 0.03f, 4, 0, 8, 2, 16, kShortPrefill},
    {"k2v3_one_token_steps", 2, 3, 0.02f, 1, 0, 8, 3, 8, kOneTokenSteps},
    {"k3v3_refit4", 3, 3, 0.02f, 1, 4, 8, 2, 16, kLongPrefill},
    {"k4v4_refit16_sinks4", 4, 4, 0.01f, 4, 16, 8, 2, 32, kLongPrefill},
    {"k2v2_refit4_no_sinks", 2, 2, 0.05f, 0, 4, 8, 1, 40, kShortPrefill},
    {"k8v2_refit4_one_token", 8, 2, 0.0f, 1, 4, 3, 2, 16, kOneTokenSteps},
};

INSTANTIATE_TEST_SUITE_P(Configs, MetalKvquantCache,
                         ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<Config> &i) {
                           return i.param.name;
                         });

TEST(MetalKvquantCacheErrors, CreateRules) {
  kvq_config cfg = makeConfig({"x", 3, 3, 0.01f, 1, 0, 8, 1, 32, {}});
  kvq_metal_cache_t *c = nullptr;
  cfg.kvquant_group_size = 16; // the CPU rule: kvquant ignores groups
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT, createMetal(cfg, &c));
  cfg.kvquant_group_size = 32;
  cfg.outlier_fraction = 1.0f;
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT, createMetal(cfg, &c));
  cfg.outlier_fraction = 0.01f;
  cfg.head_dim = 512; // beyond the attention kernel
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT, createMetal(cfg, &c));
  EXPECT_EQ(nullptr, c);
  cfg.head_dim = 32;
  ASSERT_EQ(KVQ_OK, createMetal(cfg, &c)) << kvq_last_error();
  kvq_metal_cache_destroy(c);
}

TEST(MetalKvquantCacheErrors, FailedUpdatesChangeNothing) {
  for (int refit : {0, 4}) {
    Twin twin({"x", 3, 3, 0.02f, 1, refit, 8, 1, 16, {}});
    twin.append(0, 10, KVQ_DTYPE_F32, 3);
    twin.append(0, 2, KVQ_DTYPE_F16, 4);
    std::vector<float> k(16 * 4, 1.0f), v(16 * 4, 1.0f);
    v[37] = INFINITY;
    EXPECT_EQ(KVQ_ERR_NON_FINITE,
              kvq_metal_cache_update(twin.gpu_, 0, k.data(), v.data(), 4,
                                     KVQ_DTYPE_F32));
    EXPECT_EQ(KVQ_ERR_EMPTY_INPUT,
              kvq_metal_cache_update(twin.gpu_, 0, k.data(), v.data(), 0,
                                     KVQ_DTYPE_F32));
    twin.expectSame(0, 5);
    twin.append(0, 3, KVQ_DTYPE_F32, 6); // and it goes on as the CPU does
    twin.expectSame(0, 7);
  }
}

} // namespace
