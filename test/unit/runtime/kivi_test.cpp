//===- kivi_test.cpp - KIVI cache: splits, residual modes, axes -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Prefill + decode equals one prefill for every split (both residual modes),
// kivi_sink with 0 sinks equals kivi bit for bit, the residual window rules,
// and the quantization axes pinned against the stateless kernels.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

using namespace kvqtest;

namespace {

kvq_config kiviConfig(int bits, kvq_residual_mode mode, int heads = 2,
                      int dim = 64) {
  kvq_config c = config(KVQ_METHOD_KIVI, heads, dim);
  c.key_bits = c.value_bits = bits;
  c.residual_mode = mode;
  return c;
}

int64_t keyTarget(const kvq_config &c, int64_t L) {
  if (c.residual_mode == KVQ_RESIDUAL_BLOCK)
    return c.residual_length * (L / c.residual_length);
  return L > c.residual_length
             ? c.group_size * ((L - c.residual_length) / c.group_size)
             : 0;
}

int64_t valueTarget(const kvq_config &c, int64_t L) {
  return L > c.residual_length ? L - c.residual_length : 0;
}

struct Snapshot {
  Fetched f;
  kvq_stats s;
};

Snapshot run(const kvq_config &c, const KV &kv, int64_t prefill) {
  Cache cache(c);
  feed(cache.h, kv, prefill);
  return {fetch(cache.h), stats(cache.h)};
}

} // namespace

class KiviSplits
    : public ::testing::TestWithParam<std::tuple<int, kvq_residual_mode>> {};

TEST_P(KiviSplits, PrefillThenDecodeEqualsOnePrefill) {
  auto [bits, mode] = GetParam();
  kvq_config c = kiviConfig(bits, mode);
  KV kv = gaussianKV(1, 150, 2, 64);
  Snapshot whole = run(c, kv, 150);
  for (int64_t split : {1, 2, 31, 32, 33, 63, 64, 65, 96, 100, 149}) {
    Snapshot s = run(c, kv, split);
    EXPECT_EQ(s.f.kh, whole.f.kh) << "split " << split;
    EXPECT_EQ(s.f.vh, whole.f.vh) << "split " << split;
    EXPECT_TRUE(sameStats(s.s, whole.s)) << "split " << split;
  }
}

TEST_P(KiviSplits, SinkZeroEqualsKiviBitForBitForEverySplit) {
  auto [bits, mode] = GetParam();
  kvq_config c = kiviConfig(bits, mode);
  kvq_config cs = c;
  cs.method = KVQ_METHOD_KIVI_SINK;
  cs.n_sink_tokens = 0;
  KV kv = gaussianKV(2, 130, 2, 64);
  for (int64_t split : {1, 17, 32, 64, 97, 130}) {
    Snapshot a = run(c, kv, split);
    Snapshot b = run(cs, kv, split);
    EXPECT_EQ(a.f.kh, b.f.kh) << "split " << split;
    EXPECT_EQ(a.f.vh, b.f.vh) << "split " << split;
    EXPECT_TRUE(sameStats(a.s, b.s)) << "split " << split;
  }
}

INSTANTIATE_TEST_SUITE_P(
    BitsAndModes, KiviSplits,
    ::testing::Combine(::testing::Values(2, 3, 4, 8),
                       ::testing::Values(KVQ_RESIDUAL_SLIDING,
                                         KVQ_RESIDUAL_BLOCK)));

namespace {

/// The cache's own state after L tokens against the window model above:
/// key rows from keyTarget(L) on and value rows from valueTarget(L) on are
/// the input bit for bit (fp16), earlier rows are quantized (a 2-bit row
/// of 32 Gaussian channels is never exact), and the stats count the same.
void expectWindows(const kvq_cache_t *h, const kvq_config &c, const KV &kv,
                   int64_t L) {
  const int64_t kT = keyTarget(c, L), vT = valueTarget(c, L);
  const int64_t C = kv.channels();
  Fetched f = fetch(h);
  ASSERT_EQ(static_cast<int64_t>(f.k.size()), L * C);
  for (int64_t t = 0; t < L; ++t) {
    bool kExact = std::equal(f.k.begin() + t * C, f.k.begin() + (t + 1) * C,
                             kv.k.begin() + t * C);
    bool vExact = std::equal(f.v.begin() + t * C, f.v.begin() + (t + 1) * C,
                             kv.v.begin() + t * C);
    EXPECT_EQ(kExact, t >= kT) << "L " << L << " key " << t;
    EXPECT_EQ(vExact, t >= vT) << "L " << L << " value " << t;
  }
  kvq_stats s = stats(h);
  EXPECT_EQ(s.compressed_tokens, std::min(kT, vT)) << "L " << L;
  EXPECT_EQ(s.residual_bytes, ((L - kT) + (L - vT)) * C * 2) << "L " << L;
}

} // namespace

TEST(KiviResidual, SlidingKeysLeaveInWholeGroupsValuesTokenByToken) {
  // R = G = 32: at every length the cache holds R .. R+G-1 fp16 keys once
  // R tokens arrived, and exactly R fp16 values.
  kvq_config c = kiviConfig(2, KVQ_RESIDUAL_SLIDING, 1, 32);
  KV kv = gaussianKV(3, 140, 1, 32);
  Cache cache(c);
  for (int64_t L = 1; L <= kv.tokens; ++L) {
    ASSERT_EQ(append(cache.h, kv, L - 1, L), KVQ_OK);
    expectWindows(cache.h, c, kv, L);
  }
  // Hand-computed: at 140 tokens keys [0, 96) and values [0, 108) are coded.
  EXPECT_EQ(keyTarget(c, 140), 96);
  EXPECT_EQ(valueTarget(c, 140), 108);
}

TEST(KiviResidual, BlockModeFlushesRKeysAtATime) {
  // R = 64, G = 32: keys stay fp16 until R accumulate, then all R leave at
  // once, at every length (a flush one token late shows at L = 64k).
  kvq_config c = kiviConfig(2, KVQ_RESIDUAL_BLOCK, 1, 32);
  c.residual_length = 64; // a multiple of G = 32
  KV kv = gaussianKV(4, 200, 1, 32);
  Cache cache(c);
  for (int64_t L = 1; L <= kv.tokens; ++L) {
    ASSERT_EQ(append(cache.h, kv, L - 1, L), KVQ_OK);
    expectWindows(cache.h, c, kv, L);
  }
  EXPECT_EQ(keyTarget(c, 63), 0);
  EXPECT_EQ(keyTarget(c, 64), 64);
  EXPECT_EQ(keyTarget(c, 200), 192);
  // Block mode needs R to be a positive multiple of G.
  c.residual_length = 48;
  kvq_cache_t *bad = nullptr;
  EXPECT_EQ(kvq_cache_create(&c, &bad), KVQ_ERR_BAD_GROUP_SIZE);
  EXPECT_EQ(bad, nullptr);
}

TEST(KiviResidual, BlockModeWindowsForEveryPrefillLength) {
  // The same rule when the tokens arrive in one prefill of each length.
  kvq_config c = kiviConfig(2, KVQ_RESIDUAL_BLOCK, 1, 32);
  KV kv = gaussianKV(8, 100, 1, 32);
  for (int64_t L = 1; L <= kv.tokens; ++L) {
    Cache cache(c);
    ASSERT_EQ(append(cache.h, kv, 0, L), KVQ_OK);
    expectWindows(cache.h, c, kv, L);
  }
}

TEST(KiviAxes, KeysPerChannelValuesPerTokenMatchTheKernels) {
  // The first key group (tokens 0..G-1) must equal kvq_group_quant over the
  // [G, C] block with per-channel groups of G; each value row must equal
  // per-token groups of G channels.
  kvq_config c = kiviConfig(3, KVQ_RESIDUAL_SLIDING, 2, 64);
  KV kv = gaussianKV(5, 128, 2, 64);
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  Fetched f = fetch(cache.h);
  const int64_t C = kv.channels(), G = c.group_size;
  std::vector<uint8_t> codes(G * C);
  std::vector<uint16_t> scale(C), zero(C);
  std::vector<float> deq(G * C);
  ASSERT_EQ(kvq_group_quant(kv.k.data(), KVQ_DTYPE_F32, G, C,
                            KVQ_AXIS_PER_CHANNEL, static_cast<int32_t>(G), 3,
                            nullptr, KVQ_CODES_PACKED, codes.data(),
                            scale.data(), zero.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_PACKED, scale.data(),
                              zero.data(), G, C, KVQ_AXIS_PER_CHANNEL,
                              static_cast<int32_t>(G), 3, deq.data(),
                              KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_TRUE(std::equal(deq.begin(), deq.end(), f.k.begin()));
  for (int64_t t : {0, 50, 95}) {
    std::vector<uint16_t> vs(C / G), vz(C / G);
    std::vector<float> vd(C);
    ASSERT_EQ(kvq_group_quant(kv.vrow(t), KVQ_DTYPE_F32, 1, C,
                              KVQ_AXIS_PER_TOKEN, static_cast<int32_t>(G), 3,
                              nullptr, KVQ_CODES_UNPACKED, codes.data(),
                              vs.data(), vz.data()),
              KVQ_OK);
    ASSERT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, vs.data(),
                                vz.data(), 1, C, KVQ_AXIS_PER_TOKEN,
                                static_cast<int32_t>(G), 3, vd.data(),
                                KVQ_DTYPE_F32),
              KVQ_OK);
    EXPECT_TRUE(std::equal(vd.begin(), vd.end(), f.v.begin() + t * C))
        << "token " << t;
  }
}

TEST(KiviAxes, PerChannelKeysHandleAnOutlierChannel) {
  // A key channel offset by +20 (the KIVI observation): per-channel groups
  // keep the other channels' error small, per-token groups would not.
  KV kv = gaussianKV(6, 96, 1, 32);
  for (int64_t t = 0; t < 96; ++t)
    kv.krow(t)[7] = fromHalf(toHalf(kv.krow(t)[7] + 20.0f));
  kvq_config c = kiviConfig(2, KVQ_RESIDUAL_SLIDING, 1, 32);
  c.residual_length = 0;
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 96), KVQ_OK);
  Fetched f = fetch(cache.h);
  std::vector<uint8_t> codes(96 * 32);
  std::vector<uint16_t> s(96), z(96);
  std::vector<float> perToken(96 * 32);
  ASSERT_EQ(kvq_group_quant(
                kv.k.data(), KVQ_DTYPE_F32, 96, 32, KVQ_AXIS_PER_TOKEN, 32, 2,
                nullptr, KVQ_CODES_UNPACKED, codes.data(), s.data(), z.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, s.data(),
                              z.data(), 96, 32, KVQ_AXIS_PER_TOKEN, 32, 2,
                              perToken.data(), KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_LT(mse(kv.k, f.k), 0.25 * mse(kv.k, perToken));
}

TEST(KiviBytes, LayoutOfAPrefill) {
  // 128 tokens, sliding, G = R = 32: keys of 96 tokens in 3 groups, values
  // of 96 tokens quantized, 32 tokens fp16 (K and V).
  kvq_config c = kiviConfig(2, KVQ_RESIDUAL_SLIDING, 2, 64);
  KV kv = gaussianKV(7, 128, 2, 64);
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  kvq_stats s = stats(cache.h);
  const int64_t C = 128;
  EXPECT_EQ(s.tokens, 128);
  EXPECT_EQ(s.compressed_tokens, 96);
  EXPECT_EQ(s.residual_tokens, 32);
  EXPECT_EQ(s.sink_tokens, 0);
  EXPECT_EQ(s.code_bytes, 3 * (32 * C * 2 / 8) + 96 * (C * 2 / 8));
  EXPECT_EQ(s.scale_zero_bytes, 3 * (4 * C) + 96 * (4 * C / 32));
  EXPECT_EQ(s.residual_bytes, 32 * 2 * C * 2);
  EXPECT_EQ(s.level_table_bytes, 0);
  EXPECT_EQ(s.outlier_bytes, 0);
  // By hand: 6144 code + 3072 scale/zero + 16384 fp16 bytes, over 128
  // tokens of 2 x 128 elements: 8 * 25600 / 32768 = 6.25 bits.
  EXPECT_EQ(s.total_bytes, 25600);
  EXPECT_EQ(s.fp16_bytes, 128 * C * 2 * 2);
  EXPECT_DOUBLE_EQ(s.effective_bits, 6.25);
}
