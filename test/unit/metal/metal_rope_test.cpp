//===- metal_rope_test.cpp - Pre-RoPE key caches on the Metal backend -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A Metal cache with a RoPE (kvq_config.rope_style) stores its keys before
// the rotation and rotates them inside the fetch and attention kernels
// (kernels/kvq_rope.h). Checked here:
//  - against the CPU cache of the same configuration, fed the same steps
//    across the 256-token seams of the angle tables, for every method and
//    both styles: bit-identical fetch (f16, f32), equal stats and sinks,
//    attention within the 2e-5 of cache_test.cpp (expectCachesMatch);
//  - against an oracle that does not share the runtime's angle code (libm
//    in double): the fetched keys of an fp16 cache are the stored keys
//    rotated with the style's pairing (and not with the other pairing, nor
//    unrotated), values untouched; attention equals softmax attention over
//    those rotated keys;
//  - fork, truncate and the fp16 range of rotated keys, as on the CPU.
// Save and load of RoPE caches: metal_saveload_test.cpp (its setups
// include RoPE configurations).
//
//===----------------------------------------------------------------------===//
#include "metal/metal_test_util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace kvqmetaltest;

namespace {

struct Config {
  const char *name;
  kvq_method method;
  kvq_rope_style style;
  int keyBits, group, residual, sinks, refit;
  int kvHeads, headDim;
  float theta;
};

void PrintTo(const Config &c, std::ostream *os) { *os << c.name; }

kvq_config makeConfig(const Config &c) {
  kvq_config cfg;
  kvq_config_init(&cfg, c.method);
  cfg.key_bits = c.keyBits;
  cfg.value_bits = c.keyBits;
  cfg.group_size = c.group;
  cfg.residual_length = c.residual;
  if (c.method == KVQ_METHOD_KIVI_SINK)
    cfg.n_sink_tokens = c.sinks;
  if (c.method == KVQ_METHOD_KVQUANT)
    cfg.kvquant_n_sink = c.sinks;
  cfg.refit_interval = c.refit;
  cfg.outlier_fraction = 0.02f;
  cfg.num_layers = 2;
  cfg.num_kv_heads = c.kvHeads;
  cfg.head_dim = c.headDim;
  cfg.rope_style = c.style;
  cfg.rope_theta = c.theta;
  return cfg;
}

/// Loud channel pairs (the pre-RoPE outliers: channels 2 and 3 of every
/// head) and a few loud rows (sink candidates).
void loudPairsAndRows(Matrix &k, int32_t headDim, uint64_t seed) {
  kvqtest::Rng rng(seed);
  for (int64_t t = 0; t < k.rows; ++t) {
    const float row = rng.uniform() < 0.1 ? 3.0f : 1.0f;
    for (int64_t c = 0; c < k.cols; ++c) {
      const float gain = (c % headDim) / 2 == 1 ? 5.0f : 1.0f;
      k.set(t * k.cols + c, row * gain * k.get(t * k.cols + c));
    }
  }
}

/// A CPU and a Metal cache of one RoPE configuration fed the same data.
class Twin : public CacheTwin {
public:
  explicit Twin(const Config &c)
      : CacheTwin(makeConfig(c), &loudPairsAndRows) {}
};

class MetalRopeCache : public ::testing::TestWithParam<Config> {};

TEST_P(MetalRopeCache, MatchesTheCpuCacheAcrossTheTableSeams) {
  const Config c = GetParam();
  Twin twin(c);
  // Layer 0: a prefill short of the first 256-token seam, decode steps
  // across it, a long step across the second seam. Layer 1: single tokens.
  const int64_t steps[] = {250, 1, 5, 3, 270, 1, 2};
  uint64_t seed = 3000;
  for (int64_t n : steps) {
    twin.append(0, n, seed % 2 ? KVQ_DTYPE_F32 : KVQ_DTYPE_F16, seed);
    twin.expectSame(0, seed);
    if (HasFailure())
      return;
    seed += 11;
  }
  for (int i = 0; i < 3; ++i) {
    twin.append(1, 1, KVQ_DTYPE_F32, seed);
    twin.expectSame(1, seed);
    seed += 11;
  }
}

// Head dims where the partner of a half-style channel sits in another
// lane (40: d/2 = 20), in the same lane's next component (64: d/2 = 32),
// and the interleaved partner in the neighbouring lane.
const Config kConfigs[] = {
    {"fp16_interleaved", KVQ_METHOD_FP16, KVQ_ROPE_INTERLEAVED, 2, 8, 8, 0, 0,
     2, 32, 10000.0f},
    {"fp16_half_head40", KVQ_METHOD_FP16, KVQ_ROPE_HALF, 2, 8, 8, 0, 0, 2, 40,
     500000.0f},
    {"kivi2_interleaved", KVQ_METHOD_KIVI, KVQ_ROPE_INTERLEAVED, 2, 16, 16, 0,
     0, 2, 32, 10000.0f},
    {"kivi2_half", KVQ_METHOD_KIVI, KVQ_ROPE_HALF, 2, 16, 16, 0, 0, 2, 32,
     10000.0f},
    {"kivi4_half_head64", KVQ_METHOD_KIVI, KVQ_ROPE_HALF, 4, 32, 32, 0, 0, 1,
     64, 10000.0f},
    {"kivi_sink3_interleaved", KVQ_METHOD_KIVI_SINK, KVQ_ROPE_INTERLEAVED, 2,
     16, 16, 3, 0, 2, 16, 10000.0f},
    {"kivi_sink3_half", KVQ_METHOD_KIVI_SINK, KVQ_ROPE_HALF, 3, 16, 16, 3, 0, 2,
     16, 10000.0f},
    {"kvquant3_frozen_interleaved", KVQ_METHOD_KVQUANT, KVQ_ROPE_INTERLEAVED, 3,
     32, 32, 1, 0, 2, 16, 10000.0f},
    {"kvquant2_frozen_half", KVQ_METHOD_KVQUANT, KVQ_ROPE_HALF, 2, 32, 32, 1, 0,
     2, 16, 10000.0f},
    {"kvquant3_refit_half_head40", KVQ_METHOD_KVQUANT, KVQ_ROPE_HALF, 3, 8, 8,
     0, 64, 1, 40, 10000.0f},
};

INSTANTIATE_TEST_SUITE_P(Methods, MetalRopeCache, ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<Config> &i) {
                           return i.param.name;
                         });

//===----------------------------------------------------------------------===//
// An oracle of its own: libm angles in double
//===----------------------------------------------------------------------===//

/// rows [n, heads * d] rotated at positions 0..n-1 with `style`'s pairing
/// (or unrotated for KVQ_ROPE_NONE), in double.
std::vector<double> rotated(const std::vector<float> &rows, int64_t n,
                            int heads, int d, int style, double theta) {
  std::vector<double> out(rows.begin(), rows.end());
  if (style == KVQ_ROPE_NONE)
    return out;
  for (int64_t t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const int64_t base = (t * heads + h) * d;
        const int64_t a = base + (style == KVQ_ROPE_INTERLEAVED ? 2 * i : i);
        const int64_t b =
            base + (style == KVQ_ROPE_INTERLEAVED ? 2 * i + 1 : i + d / 2);
        const double angle =
            static_cast<double>(t) * std::pow(theta, -2.0 * i / d);
        const double c = std::cos(angle), s = std::sin(angle);
        out[a] = rows[a] * c - rows[b] * s;
        out[b] = rows[a] * s + rows[b] * c;
      }
  return out;
}

/// Largest |x - y| / (1 + |y|).
double maxRelError(const std::vector<float> &x, const std::vector<double> &y) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i)
    e = std::max(e, std::fabs(x[i] - y[i]) / (1.0 + std::fabs(y[i])));
  return e;
}

/// A Metal fp16 cache of one layer with `style`, holding n tokens of
/// fp16-representable keys and values (kv).
struct Fp16Rope {
  Fp16Rope(int style, int heads, int d, int64_t n, double theta)
      : heads(heads), d(d), n(n), theta(theta),
        kv(kvqtest::gaussianKV(91, n, heads, d)) {
    kvq_config cfg = kvqtest::config(KVQ_METHOD_FP16, heads, d);
    cfg.group_size = 8;
    cfg.rope_style = style;
    cfg.rope_theta = static_cast<float>(theta);
    gpu.h = metalCache(cfg);
    // A prefill, then single tokens across the first seam.
    const int64_t prefill = std::min<int64_t>(n, 250);
    EXPECT_EQ(KVQ_OK, kvq_metal_cache_update(gpu.h, 0, kv.k.data(), kv.v.data(),
                                             prefill, KVQ_DTYPE_F32))
        << kvq_last_error();
    for (int64_t t = prefill; t < n; ++t)
      EXPECT_EQ(KVQ_OK, kvq_metal_cache_update(
                            gpu.h, 0, kv.k.data() + t * kv.channels(),
                            kv.v.data() + t * kv.channels(), 1, KVQ_DTYPE_F32));
  }
  void fetch(std::vector<float> &k, std::vector<float> &v) const {
    k.assign(kv.k.size(), 0.0f);
    v.assign(kv.v.size(), 0.0f);
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_fetch(gpu.h, 0, k.data(), v.data(), n,
                                            KVQ_DTYPE_F32))
        << kvq_last_error();
  }
  int heads, d;
  int64_t n;
  double theta;
  kvqtest::KV kv;
  MetalHandle gpu;
};

class MetalRopeStyle : public ::testing::TestWithParam<kvq_rope_style> {};

// Would fail if the kernel did not rotate, paired the channels of the
// other style, took the wrong position or the wrong angle table row.
TEST_P(MetalRopeStyle, FetchReturnsTheStoredKeysRotatedWithTheStylesPairs) {
  const kvq_rope_style style = GetParam();
  const kvq_rope_style other =
      style == KVQ_ROPE_INTERLEAVED ? KVQ_ROPE_HALF : KVQ_ROPE_INTERLEAVED;
  for (int d : {16, 40, 64}) {
    SCOPED_TRACE(testing::Message() << "head_dim " << d);
    Fp16Rope c(style, 2, d, 300, 10000.0);
    std::vector<float> k, v;
    c.fetch(k, v);
    EXPECT_EQ(v, c.kv.v); // values are never rotated
    // Float angle tables: a few float ulps of the element's magnitude.
    EXPECT_LT(maxRelError(k, rotated(c.kv.k, c.n, 2, d, style, c.theta)), 2e-6);
    EXPECT_GT(maxRelError(k, rotated(c.kv.k, c.n, 2, d, other, c.theta)), 0.1);
    EXPECT_GT(maxRelError(k, rotated(c.kv.k, c.n, 2, d, KVQ_ROPE_NONE, 0)),
              0.1);
    // Position 0 is the identity.
    EXPECT_TRUE(std::equal(k.begin(), k.begin() + 2 * d, c.kv.k.begin()));
  }
}

// Attention of the Metal kernel against softmax attention in double over
// the oracle's rotated keys (grouped-query heads, causal, the last 3
// positions).
TEST_P(MetalRopeStyle, AttentionUsesTheRotatedKeys) {
  const kvq_rope_style style = GetParam();
  const int heads = 2, d = 32, qHeads = 4;
  Fp16Rope c(style, heads, d, 270, 10000.0);
  const std::vector<double> k = rotated(c.kv.k, c.n, heads, d, style, c.theta);
  const std::vector<double> unrotated(c.kv.k.begin(), c.kv.k.end());
  const int64_t nq = 3;
  std::vector<float> q(nq * qHeads * d), out(q.size());
  kvqtest::Rng rng(5);
  for (float &x : q)
    x = static_cast<float>(3.0 * rng.normal()); // peaked softmax
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_attend(c.gpu.h, 0, q.data(), nq, qHeads,
                                           out.data()))
      << kvq_last_error();
  auto attention = [&](const std::vector<double> &keys) {
    std::vector<double> o(q.size(), 0.0);
    for (int64_t i = 0; i < nq; ++i)
      for (int h = 0; h < qHeads; ++h) {
        const int64_t last = c.n - nq + i, kvh = h / (qHeads / heads);
        const float *qr = q.data() + (i * qHeads + h) * d;
        std::vector<double> s(static_cast<size_t>(last + 1));
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t <= last; ++t) {
          double dot = 0;
          for (int j = 0; j < d; ++j)
            dot += qr[j] * keys[(t * heads + kvh) * d + j];
          s[t] = dot / std::sqrt(double(d));
          mx = std::max(mx, s[t]);
        }
        for (double &x : s)
          sum += (x = std::exp(x - mx));
        double *orow = o.data() + (i * qHeads + h) * d;
        for (int64_t t = 0; t <= last; ++t)
          for (int j = 0; j < d; ++j)
            orow[j] += s[t] / sum * c.kv.v[(t * heads + kvh) * d + j];
      }
    return o;
  };
  EXPECT_LT(maxRelError(out, attention(k)), 1e-4);
  EXPECT_GT(maxRelError(out, attention(unrotated)), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Styles, MetalRopeStyle,
                         ::testing::Values(KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF),
                         [](const ::testing::TestParamInfo<kvq_rope_style> &i) {
                           return std::string(i.param == KVQ_ROPE_INTERLEAVED
                                                  ? "interleaved"
                                                  : "half");
                         });

//===----------------------------------------------------------------------===//
// Lifecycle and edges
//===----------------------------------------------------------------------===//

// A fork and a truncated cache keep rotating at the right positions (the
// block rows a layer grew stay valid after a cut, and a fork copies them).
TEST(MetalRopeLifecycle, ForkAndTruncateKeepMatchingTheCpuCache) {
  const Config c = {
      "fp16_half", KVQ_METHOD_FP16, KVQ_ROPE_HALF, 2, 8, 8, 0, 0, 2,
      16,          10000.0f};
  Twin twin(c);
  twin.append(0, 300, KVQ_DTYPE_F32, 1);
  ASSERT_EQ(KVQ_OK, kvq_cache_truncate(twin.cpu_, 200));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_truncate(twin.gpu_, 200))
      << kvq_last_error();
  twin.expectSame(0, 2);
  twin.append(0, 80, KVQ_DTYPE_F16, 3); // back across the seam
  twin.expectSame(0, 4);
  kvq_cache_t *cpuFork = nullptr;
  kvq_metal_cache_t *gpuFork = nullptr;
  ASSERT_EQ(KVQ_OK, kvq_cache_fork(twin.cpu_, &cpuFork));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_fork(twin.gpu_, &gpuFork))
      << kvq_last_error();
  std::swap(twin.cpu_, cpuFork);
  std::swap(twin.gpu_, gpuFork);
  kvq_cache_destroy(cpuFork); // the originals: the forks must stand alone
  kvq_metal_cache_destroy(gpuFork);
  twin.append(0, 300, KVQ_DTYPE_F32, 5); // across the next seam
  twin.expectSame(0, 6);
  ASSERT_EQ(KVQ_OK, kvq_cache_truncate(twin.cpu_, 0));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_truncate(twin.gpu_, 0));
  twin.append(0, 5, KVQ_DTYPE_F32, 7);
  twin.expectSame(0, 8);
}

// Two fp16 keys at the top of the fp16 range rotated by 1 radian leave it:
// an fp16 fetch is KVQ_ERR_NON_FINITE on both backends (method fp16 too,
// whose stored rows are fp16), f32 returns the rotated values.
TEST(MetalRopeLifecycle, Fp16FetchOfKeysRotatedPastTheFp16RangeIsAStatus) {
  kvq_config cfg = kvqtest::config(KVQ_METHOD_FP16, 1, 2);
  cfg.group_size = 2;
  cfg.rope_style = KVQ_ROPE_INTERLEAVED;
  kvq_cache_t *cpu = nullptr;
  ASSERT_EQ(KVQ_OK, kvq_cache_create(&cfg, &cpu)) << kvq_last_error();
  MetalHandle gpu;
  gpu.h = metalCache(cfg);
  const float k[] = {1.0f, 1.0f, 65504.0f, 65504.0f}, v[] = {1, 2, 3, 4};
  ASSERT_EQ(KVQ_OK, kvq_cache_update(cpu, 0, k, v, 2, KVQ_DTYPE_F32));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(gpu.h, 0, k, v, 2, KVQ_DTYPE_F32));
  uint16_t kh[4] = {7, 7, 7, 7}, vh[4];
  EXPECT_EQ(KVQ_ERR_NON_FINITE,
            kvq_cache_fetch(cpu, 0, kh, vh, 2, KVQ_DTYPE_F16));
  EXPECT_EQ(KVQ_ERR_NON_FINITE,
            kvq_metal_cache_fetch(gpu.h, 0, kh, vh, 2, KVQ_DTYPE_F16));
  EXPECT_EQ(kh[0], 7); // nothing written
  float kc[4], vc[4], kg[4], vg[4];
  ASSERT_EQ(KVQ_OK, kvq_cache_fetch(cpu, 0, kc, vc, 2, KVQ_DTYPE_F32));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_fetch(gpu.h, 0, kg, vg, 2, KVQ_DTYPE_F32));
  EXPECT_EQ(0, std::memcmp(kc, kg, sizeof kc));
  EXPECT_GT(kg[3], 65520.0f);
  kvq_cache_destroy(cpu);
}

// The CPU rules decide which RoPE configurations exist; the Metal cache
// takes all of them.
TEST(MetalRopeLifecycle, CreateTakesTheCpuRopeRules) {
  auto create = [](int style, float theta, int headDim) {
    kvq_metal_cache_t *c = nullptr;
    kvq_status s = kvq_metal_cache_create_flat(
        KVQ_METHOD_KIVI, 2, 2, 8, 8, 0, 0, 0.01f, 8, 0, 1, 32, 1, 1, headDim,
        KVQ_BACKEND_METAL, style, theta, &c);
    EXPECT_EQ(s == KVQ_OK, c != nullptr);
    kvq_metal_cache_destroy(c);
    return s;
  };
  EXPECT_EQ(KVQ_OK, create(KVQ_ROPE_INTERLEAVED, 10000.0f, 32));
  EXPECT_EQ(KVQ_OK, create(KVQ_ROPE_HALF, 1e9f, 256));
  kvq_config bad = kvqtest::config(KVQ_METHOD_KIVI, 1, 32);
  bad.rope_style = KVQ_ROPE_HALF;
  bad.rope_theta = 1.0f; // outside (1, 1e9]
  EXPECT_EQ(kvq_config_validate(&bad), create(KVQ_ROPE_HALF, 1.0f, 32));
  EXPECT_NE(KVQ_OK, create(KVQ_ROPE_HALF, 1.0f, 32));
  bad.rope_style = 7;
  bad.rope_theta = 10000.0f;
  EXPECT_EQ(kvq_config_validate(&bad), create(7, 10000.0f, 32));
  EXPECT_NE(KVQ_OK, create(7, 10000.0f, 32));
}

} // namespace
