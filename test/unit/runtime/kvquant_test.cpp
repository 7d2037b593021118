//===- kvquant_test.cpp - KVQuant cache: the seed's Evidence --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Sinks exact and excluded from the fit, never applied at decode, decode keys
// keep outlier protection, frozen key levels across decode (and refit), the
// key/value axes, realised-outlier accounting and determinism. These pin the
// seed's frozen configuration (refit_interval 0), requested explicitly; the
// library's default (refit_interval 128) is pinned on real keys in
// real_kv_test.cpp.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <algorithm>
#include <set>

using namespace kvqtest;

namespace {

/// The seed's configuration: key levels fit at prefill and frozen
/// (refit_interval 0, not the library's default), which is what the seed's
/// Evidence describes; tests of refitting set refit_interval themselves.
kvq_config kvqConfig(int heads = 2, int dim = 64, int nSink = 1,
                     float fraction = 0.01f) {
  kvq_config c = config(KVQ_METHOD_KVQUANT, heads, dim);
  c.kvquant_n_sink = nSink;
  c.outlier_fraction = fraction;
  c.refit_interval = 0;
  return c;
}

bool rowEqual(const std::vector<float> &a, const std::vector<float> &b,
              int64_t t, int64_t C, int64_t tb = -1) {
  if (tb < 0)
    tb = t;
  return std::equal(a.begin() + t * C, a.begin() + (t + 1) * C,
                    b.begin() + tb * C);
}

} // namespace

TEST(Kvquant, AttentionSinkTokensAreBitExact) {
  KV kv = laplaceKV(1, 128, 2, 64);
  for (int64_t i = 0; i < kv.channels(); ++i)
    kv.krow(0)[i] = fromHalf(toHalf(30.0f * kv.krow(0)[i]));
  Cache cache(kvqConfig(2, 64, 4));
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  Fetched f = fetch(cache.h);
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_TRUE(rowEqual(f.k, kv.k, t, kv.channels()));
    EXPECT_TRUE(rowEqual(f.v, kv.v, t, kv.channels()));
  }
  EXPECT_FALSE(rowEqual(f.k, kv.k, 4, kv.channels()));
  EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{0, 1, 2, 3}));
  kvq_stats s = stats(cache.h);
  EXPECT_EQ(s.sink_tokens, 4);
  EXPECT_EQ(s.sink_bytes, 4 * 2 * kv.channels() * 2);
}

TEST(Kvquant, SinkTokensAreExcludedFromTheLevelFit) {
  // Cache A holds [sink; X] with 1 sink; cache B holds X alone with no
  // sinks. If the sink is out of every fit and threshold, A's rows 1.. are
  // bit-identical to B's rows 0.. .
  KV x = laplaceKV(2, 129, 2, 64);
  for (int64_t i = 0; i < x.channels(); ++i) { // a huge first token
    x.krow(0)[i] = fromHalf(toHalf(40.0f * x.krow(0)[i]));
    x.vrow(0)[i] = fromHalf(toHalf(40.0f * x.vrow(0)[i]));
  }
  Cache a(kvqConfig(2, 64, 1)), b(kvqConfig(2, 64, 0));
  ASSERT_EQ(append(a.h, x, 0, 129), KVQ_OK);
  ASSERT_EQ(append(b.h, x, 1, 129), KVQ_OK);
  Fetched fa = fetch(a.h), fb = fetch(b.h);
  const int64_t C = x.channels();
  for (int64_t t = 1; t < 129; ++t) {
    ASSERT_TRUE(rowEqual(fa.k, fb.k, t, C, t - 1)) << "token " << t;
    ASSERT_TRUE(rowEqual(fa.v, fb.v, t, C, t - 1)) << "token " << t;
  }
  // Including the sink in the fit (n_sink = 0 on the same data) changes the
  // other tokens' keys.
  Cache c(kvqConfig(2, 64, 0));
  ASSERT_EQ(append(c.h, x, 0, 129), KVQ_OK);
  Fetched fc = fetch(c.h);
  EXPECT_FALSE(std::equal(fc.k.begin() + C, fc.k.end(), fa.k.begin() + C));
}

TEST(Kvquant, SinkDisabledAtZeroAndNeverAppliedToDecodeTokens) {
  KV kv = laplaceKV(3, 80, 1, 64);
  {
    Cache cache(kvqConfig(1, 64, 0));
    feed(cache.h, kv, 40);
    EXPECT_TRUE(sinks(cache.h).empty());
    EXPECT_EQ(stats(cache.h).sink_tokens, 0);
  }
  {
    Cache cache(kvqConfig(1, 64, 3));
    feed(cache.h, kv, 40);
    EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{0, 1, 2}));
    kvq_stats s = stats(cache.h);
    EXPECT_EQ(s.sink_tokens, 3);
    EXPECT_EQ(s.compressed_tokens, 77);
    Fetched f = fetch(cache.h);
    for (int64_t t = 40; t < 80; ++t) // decode tokens are quantized
      EXPECT_FALSE(rowEqual(f.v, kv.v, t, kv.channels())) << "token " << t;
  }
  {
    // A prefill shorter than n_sink: only its tokens are sinks.
    Cache cache(kvqConfig(1, 64, 3));
    feed(cache.h, kv, 2);
    EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{0, 1}));
  }
}

TEST(Kvquant, DecodeKeysKeepOutlierProtection) {
  KV kv = laplaceKV(4, 129, 1, 64);
  const int64_t C = kv.channels();
  // Decode token 128 carries extreme values in channels 5 and 9.
  kv.krow(128)[5] = 60.0f;
  kv.krow(128)[9] = -45.0f;
  Cache cache(kvqConfig(1, 64, 1));
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  kvq_stats before = stats(cache.h);
  ASSERT_EQ(append(cache.h, kv, 128, 129), KVQ_OK);
  kvq_stats after = stats(cache.h);
  Fetched f = fetch(cache.h);
  EXPECT_EQ(f.k[128 * C + 5], 60.0f);
  EXPECT_EQ(f.k[128 * C + 9], -45.0f);
  // At least those two (plus the value row's own ceil(0.01 * 64) = 1).
  EXPECT_GE(after.outlier_count - before.outlier_count, 3);
  // The screen is |x| >= the per-channel threshold frozen at prefill: feed
  // exactly the threshold (the k-th largest prefill |x| of the channel).
  std::vector<float> col(127);
  for (int64_t t = 1; t < 128; ++t)
    col[t - 1] = std::fabs(kv.krow(t)[3]);
  std::sort(col.rbegin(), col.rend());
  const float thr = col[1]; // k = ceil(0.01 * 127) = 2
  std::vector<float> krow(C, 0.0f), vrow(C, 0.0f);
  krow[3] = -thr;
  ASSERT_EQ(
      kvq_cache_update(cache.h, 0, krow.data(), vrow.data(), 1, KVQ_DTYPE_F32),
      KVQ_OK);
  Fetched g = fetch(cache.h);
  EXPECT_EQ(g.k[129 * C + 3], -thr);
}

TEST(Kvquant, FrozenKeyLevelsAcrossDecodeAndCorrectAccumulation) {
  KV kv = laplaceKV(5, 160, 1, 64);
  // Decode keys come from a shifted distribution: frozen levels must not move.
  for (int64_t t = 128; t < 160; ++t)
    for (int64_t i = 0; i < kv.channels(); ++i)
      kv.krow(t)[i] = fromHalf(toHalf(0.5f * kv.krow(t)[i] + 0.3f));
  kvq_config c = kvqConfig(1, 64, 1, 0.0f); // no outliers: codes only
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  Fetched pre = fetch(cache.h);
  const int64_t C = kv.channels();
  std::vector<std::set<float>> levels(C);
  for (int64_t t = 1; t < 128; ++t)
    for (int64_t i = 0; i < C; ++i)
      levels[i].insert(pre.k[t * C + i]);
  for (int64_t t = 128; t < 160; ++t)
    ASSERT_EQ(append(cache.h, kv, t, t + 1), KVQ_OK);
  Fetched post = fetch(cache.h);
  // Earlier rows are untouched, length accumulates, and every decode key
  // sits on a prefill level of its channel.
  EXPECT_TRUE(std::equal(pre.kh.begin(), pre.kh.end(), post.kh.begin()));
  EXPECT_TRUE(std::equal(pre.vh.begin(), pre.vh.end(), post.vh.begin()));
  int64_t n = 0;
  ASSERT_EQ(kvq_cache_length(cache.h, 0, &n), KVQ_OK);
  EXPECT_EQ(n, 160);
  for (int64_t t = 128; t < 160; ++t)
    for (int64_t i = 0; i < C; ++i)
      ASSERT_TRUE(levels[i].count(post.k[t * C + i]))
          << "token " << t << " channel " << i;
  // Key tables are stored once (per channel 8 levels + a threshold).
  kvq_stats s = stats(cache.h);
  EXPECT_EQ(s.level_table_bytes, C * 8 * 2 + C * 2 + 159 * 8 * 2);
}

TEST(Kvquant, RefitIntervalRefitsKeyLevelsEveryNDecodeSteps) {
  KV kv = laplaceKV(6, 128 + 20, 1, 64);
  kvq_config c = kvqConfig(1, 64, 1);
  c.refit_interval = 8;
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  const int64_t C = kv.channels();
  for (int64_t t = 128; t < 148; ++t) {
    ASSERT_EQ(append(cache.h, kv, t, t + 1), KVQ_OK);
    kvq_stats s = stats(cache.h);
    const int64_t waiting = (t + 1 - 128) % 8; // fp16 until their refit
    EXPECT_EQ(s.residual_tokens, waiting) << "t " << t;
    EXPECT_EQ(s.compressed_tokens, t + 1 - 1 - waiting) << "t " << t;
  }
  // Two refits happened: three key tables (no thresholds in refit mode).
  kvq_stats s = stats(cache.h);
  EXPECT_EQ(s.level_table_bytes, 3 * C * 8 * 2 + 143 * 8 * 2);
  // Waiting tokens are held exactly.
  Fetched f = fetch(cache.h);
  for (int64_t t = 144; t < 148; ++t)
    EXPECT_TRUE(rowEqual(f.k, kv.k, t, C));
}

TEST(Kvquant, KeyLevelsPerChannelValueLevelsPerToken) {
  KV kv = laplaceKV(7, 256, 2, 64);
  Cache cache(kvqConfig(2, 64, 0, 0.0f));
  ASSERT_EQ(append(cache.h, kv, 0, 256), KVQ_OK);
  Fetched f = fetch(cache.h);
  const int64_t C = kv.channels(), D = 64;
  // A key channel (over tokens) takes at most 2^3 values; a key row (over
  // channels) takes many.
  for (int64_t i = 0; i < C; ++i) {
    std::set<float> col;
    for (int64_t t = 0; t < 256; ++t)
      col.insert(f.k[t * C + i]);
    ASSERT_LE(col.size(), 8u) << "channel " << i;
  }
  std::set<float> row(f.k.begin(), f.k.begin() + C);
  EXPECT_GT(row.size(), 8u);
  // A value (token, head) vector takes at most 2^3 values; a value channel
  // over tokens takes many.
  for (int64_t t = 0; t < 256; ++t)
    for (int64_t h = 0; h < 2; ++h) {
      std::set<float> vec(f.v.begin() + t * C + h * D,
                          f.v.begin() + t * C + (h + 1) * D);
      ASSERT_LE(vec.size(), 8u) << "token " << t << " head " << h;
    }
  std::set<float> vcol;
  for (int64_t t = 0; t < 256; ++t)
    vcol.insert(f.v[t * C]);
  EXPECT_GT(vcol.size(), 8u);
}

TEST(Kvquant, FractionZeroCacheIsPureNuqOfTheKernels) {
  // With no outliers and no sinks, each value vector in the cache equals
  // kvq_nuq_fit/quant/dequant of that vector, bit for bit.
  KV kv = laplaceKV(8, 64, 2, 64);
  Cache cache(kvqConfig(2, 64, 0, 0.0f));
  ASSERT_EQ(append(cache.h, kv, 0, 64), KVQ_OK);
  Fetched f = fetch(cache.h);
  EXPECT_EQ(stats(cache.h).outlier_count, 0);
  const int64_t S = kvq_nuq_fit_scratch_size(64, 3);
  std::vector<float> scratch(static_cast<size_t>(S)), out(64 * 128);
  std::vector<uint16_t> levels(128 * 8);
  std::vector<uint8_t> codes(64 * 128);
  ASSERT_EQ(kvq_nuq_fit(kv.v.data(), KVQ_DTYPE_F32, 64, 128, KVQ_AXIS_PER_TOKEN,
                        64, 3, 8, nullptr, scratch.data(), S, levels.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_nuq_quant(kv.v.data(), KVQ_DTYPE_F32, 64, 128,
                          KVQ_AXIS_PER_TOKEN, 64, 3, levels.data(),
                          KVQ_CODES_UNPACKED, codes.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, levels.data(), 64,
                            128, KVQ_AXIS_PER_TOKEN, 64, 3, out.data(),
                            KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_EQ(out, f.v);
  // Keys: per-channel fit over all 64 tokens.
  std::vector<uint16_t> klevels(128 * 8);
  ASSERT_EQ(kvq_nuq_fit(kv.k.data(), KVQ_DTYPE_F32, 64, 128,
                        KVQ_AXIS_PER_CHANNEL, 64, 3, 8, nullptr, scratch.data(),
                        S, klevels.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_nuq_quant(kv.k.data(), KVQ_DTYPE_F32, 64, 128,
                          KVQ_AXIS_PER_CHANNEL, 64, 3, klevels.data(),
                          KVQ_CODES_UNPACKED, codes.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, klevels.data(),
                            64, 128, KVQ_AXIS_PER_CHANNEL, 64, 3, out.data(),
                            KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_EQ(out, f.k);
}

TEST(Kvquant, AccountingTracksRealisedOutliersAndSinks) {
  const int64_t S = 300, C = 128, D = 64;
  KV kv = laplaceKV(9, S, 2, 64);
  Cache cache(kvqConfig(2, 64, 2, 0.02f));
  ASSERT_EQ(append(cache.h, kv, 0, S), KVQ_OK);
  kvq_stats s = stats(cache.h);
  const int64_t m = S - 2;
  const int64_t keyOut = C * 6;       // ceil(0.02 * 298) = 6 per channel
  const int64_t valueOut = m * 2 * 2; // ceil(0.02 * 64) = 2 per vector
  EXPECT_EQ(s.outlier_count, keyOut + valueOut);
  EXPECT_EQ(s.outlier_bytes, 4 * s.outlier_count);
  EXPECT_EQ(s.sink_tokens, 2);
  EXPECT_EQ(s.sink_bytes, 2 * 2 * C * 2);
  EXPECT_EQ(s.code_bytes, m * 2 * (C * 3 / 8));
  EXPECT_EQ(s.level_table_bytes, C * 8 * 2 + C * 2 + m * 2 * 8 * 2);
  EXPECT_EQ(s.compressed_tokens, m);
  EXPECT_EQ(s.residual_tokens, 0);
  (void)D;
}

TEST(Kvquant, DeterministicBytes) {
  KV kv = laplaceKV(10, 200, 2, 64);
  Cache a(kvqConfig()), b(kvqConfig());
  feed(a.h, kv, 150);
  feed(b.h, kv, 150);
  Fetched fa = fetch(a.h), fb = fetch(b.h);
  EXPECT_EQ(fa.kh, fb.kh);
  EXPECT_EQ(fa.vh, fb.vh);
  EXPECT_TRUE(sameStats(stats(a.h), stats(b.h)));
}

TEST(Kvquant, GroupSizeOtherThanDefaultIsRejected) {
  kvq_config c = kvqConfig();
  c.kvquant_group_size = 64;
  kvq_cache_t *h = nullptr;
  EXPECT_EQ(kvq_cache_create(&c, &h), KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("kvquant_group_size"),
            std::string::npos);
}
