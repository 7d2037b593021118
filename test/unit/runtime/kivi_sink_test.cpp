//===- kivi_sink_test.cpp - KIVI-Sink: the seed's Evidence ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Planted 25x-norm sinks (S = 128, b = 2, position 90) are found and kept
// bit-exact, protection lowers key MSE, dynamic selection beats
// Preserve-First-N, calibration exclusion matters, and the running top-k's
// decision rules (decided once, prefill-dominant).
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <algorithm>

using namespace kvqtest;

namespace {

/// S = 128 Gaussian tokens, with the K and V rows at `positions` scaled 25x.
KV plantedSinks(std::vector<int64_t> positions, int64_t tokens = 128,
                int heads = 2, int dim = 64, uint64_t seed = 90) {
  KV kv = gaussianKV(seed, tokens, heads, dim);
  for (int64_t p : positions)
    for (int64_t i = 0; i < kv.channels(); ++i) {
      kv.krow(p)[i] = fromHalf(toHalf(25.0f * kv.krow(p)[i]));
      kv.vrow(p)[i] = fromHalf(toHalf(25.0f * kv.vrow(p)[i]));
    }
  return kv;
}

kvq_config sinkConfig(int nSinks, int heads = 2, int dim = 64) {
  kvq_config c = config(KVQ_METHOD_KIVI_SINK, heads, dim);
  c.key_bits = c.value_bits = 2;
  c.n_sink_tokens = nSinks;
  return c;
}

bool rowEqual(const std::vector<float> &a, const std::vector<float> &b,
              int64_t t, int64_t C) {
  return std::equal(a.begin() + t * C, a.begin() + (t + 1) * C,
                    b.begin() + t * C);
}

/// Per-channel uniform quantization of a [S, C] key matrix in groups of G
/// tokens, with `protect` rows kept fp16; `exclude` says whether protected
/// rows are left out of the groups' min/max (calibration exclusion).
std::vector<float> kernelKivi(const KV &kv, const std::vector<int64_t> &protect,
                              bool exclude, int32_t G = 32, int bits = 2) {
  const int64_t S = kv.tokens, C = kv.channels();
  std::vector<uint8_t> mask(S * C, 0), codes(S * C);
  for (int64_t p : protect)
    std::fill(mask.begin() + p * C, mask.begin() + (p + 1) * C, 1);
  std::vector<uint16_t> scale(S / G * C), zero(S / G * C);
  std::vector<float> out(S * C);
  EXPECT_EQ(kvq_group_quant(kv.k.data(), KVQ_DTYPE_F32, S, C,
                            KVQ_AXIS_PER_CHANNEL, G, bits,
                            exclude ? mask.data() : nullptr, KVQ_CODES_UNPACKED,
                            codes.data(), scale.data(), zero.data()),
            KVQ_OK);
  EXPECT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, scale.data(),
                              zero.data(), S, C, KVQ_AXIS_PER_CHANNEL, G, bits,
                              out.data(), KVQ_DTYPE_F32),
            KVQ_OK);
  for (int64_t p : protect) // protected rows are restored from fp16
    std::copy(kv.k.begin() + p * C, kv.k.begin() + (p + 1) * C,
              out.begin() + p * C);
  return out;
}

std::vector<int64_t> dynamicSinks(const KV &kv, int32_t k) {
  std::vector<float> norms(kv.tokens);
  EXPECT_EQ(kvq_key_norm(kv.k.data(), KVQ_DTYPE_F32, kv.tokens, kv.heads,
                         kv.dim, norms.data()),
            KVQ_OK);
  std::vector<int64_t> pos(k);
  EXPECT_EQ(kvq_sink_select(norms.data(), kv.tokens, k, pos.data()), KVQ_OK);
  return pos;
}

} // namespace

TEST(KiviSink, PlantedSinkDetectedAndKeptBitExactNeighboursQuantized) {
  KV kv = plantedSinks({90});
  for (int nSinks : {1, 5}) {
    Cache cache(sinkConfig(nSinks));
    ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
    std::vector<int64_t> s = sinks(cache.h);
    ASSERT_EQ(static_cast<int>(s.size()), nSinks);
    EXPECT_TRUE(std::count(s.begin(), s.end(), 90)) << "k = " << nSinks;
    Fetched f = fetch(cache.h);
    const int64_t C = kv.channels();
    EXPECT_TRUE(rowEqual(f.k, kv.k, 90, C));
    EXPECT_TRUE(rowEqual(f.v, kv.v, 90, C));
    for (int64_t t : {88, 89, 91}) {
      if (std::count(s.begin(), s.end(), t))
        continue;
      EXPECT_FALSE(rowEqual(f.k, kv.k, t, C)) << "token " << t;
      EXPECT_FALSE(rowEqual(f.v, kv.v, t, C)) << "token " << t;
    }
    kvq_stats st = stats(cache.h);
    EXPECT_EQ(st.sink_tokens, nSinks);
    EXPECT_EQ(st.sink_bytes, nSinks * 2 * C * 2);
    EXPECT_EQ(st.compressed_tokens + st.sink_tokens + st.residual_tokens, 128);
    EXPECT_EQ(st.residual_tokens, 32);
  }
}

TEST(KiviSink, LowerKeyMseThanPlainKivi) {
  KV kv = plantedSinks({90});
  kvq_config plain = config(KVQ_METHOD_KIVI, 2, 64);
  Cache a(plain), b(sinkConfig(5));
  ASSERT_EQ(append(a.h, kv, 0, 128), KVQ_OK);
  ASSERT_EQ(append(b.h, kv, 0, 128), KVQ_OK);
  double plainMse = mse(kv.k, fetch(a.h).k), sinkMse = mse(kv.k, fetch(b.h).k);
  EXPECT_LT(sinkMse, 0.2 * plainMse);
  // Values are per token: the sink only hurts its own row, and is exact.
  EXPECT_LT(mse(kv.v, fetch(b.h).v), mse(kv.v, fetch(a.h).v));
}

TEST(KiviSink, DynamicSelectionBeatsPreserveFirstNAtEqualBudget) {
  // Sinks not all at the front: 3, 40 and 90. Budget 3 fp16 rows.
  KV kv = plantedSinks({3, 40, 90});
  std::vector<int64_t> dynamic = dynamicSinks(kv, 3);
  EXPECT_EQ(dynamic, (std::vector<int64_t>{3, 40, 90}));
  double dyn = mse(kv.k, kernelKivi(kv, dynamic, true));
  double firstN = mse(kv.k, kernelKivi(kv, {0, 1, 2}, true));
  EXPECT_LT(dyn, 0.2 * firstN);
  // The cache makes the same choice at equal budget.
  Cache cache(sinkConfig(3));
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  EXPECT_EQ(sinks(cache.h), dynamic);
  // When the sinks are at the front both choices coincide.
  KV front = plantedSinks({0, 1, 2});
  EXPECT_EQ(dynamicSinks(front, 3), (std::vector<int64_t>{0, 1, 2}));
}

TEST(KiviSink, OmittingCalibrationExclusionReproducesTheFailure) {
  // Restoring the sink row alone is not enough: if it stays in its group's
  // min/max, the inflated scale ruins every neighbour in the group.
  KV kv = plantedSinks({90});
  const int64_t C = kv.channels();
  std::vector<float> with = kernelKivi(kv, {90}, true);
  std::vector<float> without = kernelKivi(kv, {90}, false);
  // Neighbours: the rest of the sink's group [64, 96).
  double nWith = mse(kv.k, with, 64 * C, 96 * C);
  double nWithout = mse(kv.k, without, 64 * C, 96 * C);
  EXPECT_GT(nWithout, 10.0 * nWith);
  // Other groups are unaffected either way.
  EXPECT_EQ(mse(kv.k, with, 0, 64 * C), mse(kv.k, without, 0, 64 * C));
  // The cache implements the exclusion: its keys in the sink's group equal
  // the kernel with exclusion (the group lies outside the residual window).
  Cache cache(sinkConfig(1));
  ASSERT_EQ(append(cache.h, kv, 0, 128), KVQ_OK);
  Fetched f = fetch(cache.h);
  EXPECT_TRUE(std::equal(f.k.begin() + 64 * C, f.k.begin() + 96 * C,
                         with.begin() + 64 * C));
}

TEST(KiviSink, ProtectionIsDecidedOnceAndIsPrefillDominant) {
  // Budget 1: the prefill's planted sink at 10 takes it. A stronger key at
  // decode position 140 is not protected (the budget is spent), and token 10
  // stays protected even though it is no longer the top-1.
  KV late = plantedSinks({10, 140}, 200, 2, 64, 90);
  for (int64_t i = 0; i < late.channels(); ++i) // make 140 the strongest
    late.krow(140)[i] = fromHalf(toHalf(2.0f * late.krow(140)[i]));
  Cache cache(sinkConfig(1));
  feed(cache.h, late, 128);
  EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{10}));
  Fetched f = fetch(cache.h);
  EXPECT_FALSE(rowEqual(f.k, late.k, 140, late.channels()));
  // A sink that first appears during decode is protected when it leaves the
  // window, if budget remains. Key norms grow with position so that no
  // earlier token is ever the top-1 when it leaves the window.
  KV decodeSink = gaussianKV(91, 200, 2, 64);
  for (int64_t t = 0; t < 200; ++t)
    for (int64_t i = 0; i < decodeSink.channels(); ++i)
      decodeSink.krow(t)[i] = fromHalf(
          toHalf(decodeSink.k[i] * (t == 150 ? 25.0f : 1.0f + 0.01f * t)));
  Cache c2(sinkConfig(1));
  feed(c2.h, decodeSink, 100);
  EXPECT_EQ(sinks(c2.h), (std::vector<int64_t>{150}));
  EXPECT_TRUE(
      rowEqual(fetch(c2.h).k, decodeSink.k, 150, decodeSink.channels()));
}

TEST(KiviSink, SinkRowsLeaveTheirKeyGroupCodes) {
  // A key group with a sink stores codes for its G - 1 other rows only.
  KV kv = plantedSinks({90});
  Cache a(config(KVQ_METHOD_KIVI, 2, 64)), b(sinkConfig(1));
  ASSERT_EQ(append(a.h, kv, 0, 128), KVQ_OK);
  ASSERT_EQ(append(b.h, kv, 0, 128), KVQ_OK);
  kvq_stats sa = stats(a.h), sb = stats(b.h);
  const int64_t C = kv.channels();
  // One key row (C 2-bit codes) and one value row (codes + scales) fewer.
  EXPECT_EQ(sa.code_bytes - sb.code_bytes, C * 2 / 8 + C * 2 / 8);
  EXPECT_EQ(sa.scale_zero_bytes - sb.scale_zero_bytes, 4 * C / 32);
  EXPECT_EQ(sb.sink_bytes, 4 * C);
  EXPECT_EQ(sb.total_bytes - sa.total_bytes,
            4 * C - (C * 2 / 8) * 2 - 4 * C / 32);
}

namespace {

/// Small KIVI-Sink geometry for state tests: 1 KV head of 32, G = R = 16.
kvq_config smallSink(int nSinks) {
  kvq_config c = sinkConfig(nSinks, 1, 32);
  c.group_size = 16;
  c.residual_length = 16;
  return c;
}

/// Gaussian K/V at 1/10 scale with key row `from` copied (bit for bit) to
/// each of `to` and scaled by `gain`: equal norms, far above the rest.
KV tiedKeys(int64_t tokens, int64_t from, std::vector<int64_t> to,
            float gain = 20.0f) {
  KV kv = gaussianKV(93, tokens, 1, 32);
  for (float &x : kv.k)
    x = fromHalf(toHalf(0.1f * x));
  for (int64_t i = 0; i < kv.channels(); ++i)
    kv.krow(from)[i] = fromHalf(toHalf(gain * kv.krow(from)[i]));
  for (int64_t p : to)
    std::copy(kv.krow(from), kv.krow(from) + kv.channels(), kv.krow(p));
  return kv;
}

} // namespace

TEST(KiviSinkState, EqualNormsGoToTheEarlierPositionInTheCache) {
  // Positions 20 and 50 have the same key row (so the same norm), far above
  // every other; one sink. The documented rule (ties to the earlier
  // position, as kvq_sink_select) makes 20 the sink, whether both arrive in
  // one prefill or token by token, and 50 is then quantized like any row.
  KV kv = tiedKeys(120, 20, {50});
  for (int64_t prefill : {120, 60, 1}) {
    Cache cache(smallSink(1));
    feed(cache.h, kv, prefill);
    EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{20})) << prefill;
    Fetched f = fetch(cache.h);
    EXPECT_TRUE(rowEqual(f.k, kv.k, 20, kv.channels())) << prefill;
    EXPECT_FALSE(rowEqual(f.k, kv.k, 50, kv.channels())) << prefill;
    EXPECT_EQ(stats(cache.h).sink_tokens, 1);
  }
}

TEST(KiviSinkState, AStrongerKeyEvictsTheLatestOfTheTiedWeakest) {
  // Two sinks. 10 and 11 tie (same row); 40 is stronger than both and
  // arrives later in the same prefill: it evicts the weakest entry, and of
  // equal weakest entries the later position (11), so the sinks are
  // {10, 40}. Checked against kvq_sink_select over the same norms, the
  // stateless rule the cache's running top-k must agree with on a prefill.
  KV kv = tiedKeys(100, 10, {11});
  for (int64_t i = 0; i < kv.channels(); ++i)
    kv.krow(40)[i] = fromHalf(toHalf(2.0f * kv.krow(10)[i]));
  Cache cache(smallSink(2));
  ASSERT_EQ(append(cache.h, kv, 0, 100), KVQ_OK);
  EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{10, 40}));
  std::vector<int64_t> stateless = dynamicSinks(kv, 2);
  std::sort(stateless.begin(), stateless.end());
  EXPECT_EQ(stateless, (std::vector<int64_t>{10, 40}));
}

TEST(KiviSinkState, FailedUpdateLeavesTheRunningTopKAndRetryDecodesOn) {
  // Two sinks; keys at 30 (x20), 25 (x5) and 40 (x25 + 0.5). The prefill
  // [0, 32) decides only [0, 16) (none in its top-2 {30, 25}); the update
  // [32, 52) carrying 40 fails at its Nth allocation, for every N, and is
  // retried. Correctly, 40 evicts 25 and the sinks become {30, 40}. Had the
  // failed update kept its norms in the running top-k, the retry would
  // fold 40 again over the weaker 30 ({40, 40}) and 30 would never be
  // protected. After the retry the cache decodes on to 140 tokens and must
  // equal, at every step, a cache given the same calls that never failed.
  KV kv = tiedKeys(140, 30, {});
  for (int64_t i = 0; i < kv.channels(); ++i) {
    kv.krow(25)[i] = fromHalf(toHalf(0.25f * kv.krow(30)[i] + 0.01f));
    kv.krow(40)[i] = fromHalf(toHalf(1.25f * kv.krow(30)[i] + 0.5f));
  }
  CountingAllocator counter;
  kvq_config c = smallSink(2);
  c.allocator = counter.handle();
  int failures = 0;
  for (int64_t n = 1;; ++n) {
    Cache cache(c);
    ASSERT_EQ(append(cache.h, kv, 0, 32), KVQ_OK);
    counter.calls = 0;
    counter.failAt = n;
    kvq_status s = append(cache.h, kv, 32, 52);
    counter.failAt = -1;
    if (s == KVQ_OK)
      break;
    ++failures;
    ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
    ASSERT_EQ(append(cache.h, kv, 32, 52), KVQ_OK) << "retry after n " << n;
    Cache ref(smallSink(2)); // the same calls, none failing
    ASSERT_EQ(append(ref.h, kv, 0, 32), KVQ_OK);
    ASSERT_EQ(append(ref.h, kv, 32, 52), KVQ_OK);
    for (int64_t t = 52; t < kv.tokens; ++t) {
      ASSERT_EQ(append(cache.h, kv, t, t + 1), KVQ_OK);
      ASSERT_EQ(append(ref.h, kv, t, t + 1), KVQ_OK);
      ASSERT_EQ(sinks(cache.h), sinks(ref.h)) << "n " << n << " t " << t;
    }
    EXPECT_EQ(sinks(cache.h), (std::vector<int64_t>{30, 40})) << "n " << n;
    Fetched a = fetch(cache.h), b = fetch(ref.h);
    EXPECT_EQ(a.kh, b.kh) << "n " << n;
    EXPECT_EQ(a.vh, b.vh) << "n " << n;
    EXPECT_TRUE(sameStats(stats(cache.h), stats(ref.h))) << "n " << n;
  }
  EXPECT_GT(failures, 1);
}
