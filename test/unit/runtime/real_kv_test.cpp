//===- real_kv_test.cpp - Decode-time error on real post-RoPE K/V ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Real keys and values of stories260K (test/data/stories260K, layers 0 and
// 1, 512 tokens) go through the public ABI as a model uses a cache: a
// 128-token prefill in one kvq_cache_update, then one token per update;
// kvq_cache_fetch gives them back. For every method's default
// configuration (kvq_config_init), the key MSE of the decoded part stays
// within 2x that of the prefill part. The seed's kvquant configuration
// (refit_interval 0: key levels fit at prefill and frozen) does not: RoPE
// moves decode keys out of the levels' range (docs/RUNTIME.md, "Why kvquant
// refits by default").
//
//===----------------------------------------------------------------------===//
#include "npy.h"

#include "kvq/runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr int64_t kPrefill = 128;

struct Dump {
  int64_t tokens = 0, heads = 0, dim = 0;
  std::vector<float> k, v;
};

Dump load(int layer) {
  Dump d;
  kvq::npy::Array k, v;
  std::string err, base = std::string(KVQ_TEST_DATA_DIR) + "/";
  const std::string n = std::to_string(layer);
  EXPECT_TRUE(kvq::npy::read(base + "k" + n + ".npy", k, err)) << err;
  EXPECT_TRUE(kvq::npy::read(base + "v" + n + ".npy", v, err)) << err;
  if (k.shape.size() != 3 || k.shape != v.shape) {
    ADD_FAILURE() << "bad shapes in " << base;
    return d;
  }
  d.tokens = k.shape[0];
  d.heads = k.shape[1];
  d.dim = k.shape[2];
  d.k = std::move(k.data);
  d.v = std::move(v.data);
  return d;
}

struct Split {
  double prefill = 0, decode = 0; ///< key MSE of [0, P) and [P, T)
  double effectiveBits = 0;
};

/// Prefill kPrefill tokens, decode the rest one per update, fetch, and
/// measure the key MSE of both parts.
Split run(const Dump &d, kvq_config cfg) {
  Split s;
  const int64_t C = d.heads * d.dim, T = d.tokens;
  kvq_cache_t *cache = nullptr;
  EXPECT_EQ(kvq_cache_create(&cfg, &cache), KVQ_OK) << kvq_last_error();
  if (!cache)
    return s;
  EXPECT_EQ(kvq_cache_update(cache, 0, d.k.data(), d.v.data(), kPrefill,
                             KVQ_DTYPE_F32),
            KVQ_OK);
  for (int64_t t = kPrefill; t < T; ++t)
    EXPECT_EQ(
        kvq_cache_update(cache, 0, &d.k[t * C], &d.v[t * C], 1, KVQ_DTYPE_F32),
        KVQ_OK);
  std::vector<float> k(d.k.size()), v(d.v.size());
  EXPECT_EQ(kvq_cache_fetch(cache, 0, k.data(), v.data(), T, KVQ_DTYPE_F32),
            KVQ_OK);
  kvq_stats st;
  EXPECT_EQ(kvq_cache_stats(cache, 0, &st), KVQ_OK);
  s.effectiveBits = st.effective_bits;
  kvq_cache_destroy(cache);
  for (int64_t i = 0; i < T * C; ++i) {
    const double e = static_cast<double>(k[i]) - d.k[i];
    (i < kPrefill * C ? s.prefill : s.decode) += e * e;
  }
  s.prefill /= static_cast<double>(kPrefill * C);
  s.decode /= static_cast<double>((T - kPrefill) * C);
  return s;
}

kvq_config defaults(kvq_method m, const Dump &d) {
  kvq_config cfg;
  kvq_config_init(&cfg, m);
  cfg.num_kv_heads = static_cast<int32_t>(d.heads);
  cfg.head_dim = static_cast<int32_t>(d.dim);
  // The one shape adaptation (as kvq-eval makes it): KIVI's group of 32
  // channels cannot divide head_dim 8, so a group is the whole head.
  if (cfg.head_dim % cfg.group_size != 0)
    cfg.group_size = cfg.head_dim;
  return cfg;
}

const char *name(kvq_method m) {
  switch (m) {
  case KVQ_METHOD_FP16:
    return "fp16";
  case KVQ_METHOD_KIVI:
    return "kivi";
  case KVQ_METHOD_KIVI_SINK:
    return "kivi_sink";
  default:
    return "kvquant";
  }
}

} // namespace

TEST(RealKv, DecodedKeyErrorWithinTwiceThePrefillsForEveryDefault) {
  for (int layer : {0, 1}) {
    const Dump d = load(layer);
    ASSERT_EQ(d.tokens, 512);
    ASSERT_EQ(d.heads, 4);
    ASSERT_EQ(d.dim, 8);
    for (kvq_method m : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI, KVQ_METHOD_KIVI_SINK,
                         KVQ_METHOD_KVQUANT}) {
      const Split s = run(d, defaults(m, d));
      std::printf("layer %d %-9s key MSE prefill %.4g decode %.4g (%.2fx), "
                  "%.3f effective bits\n",
                  layer, name(m), s.prefill, s.decode, s.decode / s.prefill,
                  s.effectiveBits);
      EXPECT_GT(s.prefill, 0.0) << name(m); // f32 input, fp16 cache
      EXPECT_LE(s.decode, 2 * s.prefill) << "layer " << layer << " " << name(m);
    }
  }
}

TEST(RealKv, SeedFrozenKvquantLevelsBreakDownInDecode) {
  for (int layer : {0, 1}) {
    const Dump d = load(layer);
    ASSERT_EQ(d.tokens, 512);
    kvq_config frozen = defaults(KVQ_METHOD_KVQUANT, d);
    frozen.refit_interval = 0; // the seed's configuration
    const Split f = run(d, frozen);
    const Split r = run(d, defaults(KVQ_METHOD_KVQUANT, d));
    std::printf("layer %d kvquant frozen: key MSE prefill %.4g decode %.4g "
                "(%.1fx), %.3f effective bits; default (refit %d): %.3f\n",
                layer, f.prefill, f.decode, f.decode / f.prefill,
                f.effectiveBits, KVQ_DEFAULT_REFIT_INTERVAL, r.effectiveBits);
    // The prefill part is the same fit either way; decode is what differs.
    EXPECT_EQ(f.prefill, r.prefill);
    // Far outside the 2x bound (measured 22x and 36x), so the default's
    // mechanism is what keeps decode in line.
    EXPECT_GT(f.decode, 10 * f.prefill) << "layer " << layer;
    // And the refits cost no bits here: the frozen levels' threshold screen
    // turns the drifting decode keys into fp16 outliers (4 bytes each).
    EXPECT_LE(r.effectiveBits, f.effectiveBits) << "layer " << layer;
  }
}
