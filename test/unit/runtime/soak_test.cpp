//===- soak_test.cpp - a long decode through every lifecycle call ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// 100,000 decode tokens (KVQ_SOAK_TOKENS sets another count: the sanitizer
// suite runs this default, a longer opt-in run sets more) on one KIVI cache
// whose memory comes from a counting allocator, with a fork, a
// truncate-and-refeed and a save-and-load every few thousand tokens. At each
// of them the cache must attend bit for bit like its fork; at the end like a
// fresh cache fed the same tokens with updates only, holding the same number
// of bytes; and once everything is destroyed no byte may be left.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <cstdlib>

using namespace kvqtest;

namespace {

constexpr int kHeads = 2, kDim = 32, kQHeads = 4;
constexpr int64_t kPrefill = 64, kEvery = 2500, kCut = 8;

int64_t soakTokens() {
  const char *env = std::getenv("KVQ_SOAK_TOKENS");
  return env ? std::atoll(env) : 100000;
}

/// Token t's K and V (one token), the same on every call.
KV tokenKV(int64_t t) { return gaussianKV(1000 + static_cast<uint64_t>(t), 1, kHeads, kDim); }

kvq_status feedToken(kvq_cache_t *c, int64_t t) {
  KV kv = tokenKV(t);
  return append(c, kv, 0, 1);
}

std::vector<float> attendOnce(const kvq_cache_t *c) {
  return attendQueries(c, 0, randomQueries(77, 1, kQHeads, kDim), 1, kQHeads);
}

TEST(Soak, LongDecodeWithForkTruncateSaveLoadMatchesAFreshCache) {
  const int64_t total = soakTokens();
  ASSERT_GT(total, kPrefill + kEvery);
  CountingAllocator counted;
  kvq_allocator handle = counted.handle();
  kvq_config cfg = config(KVQ_METHOD_KIVI, kHeads, kDim);
  cfg.allocator = handle;
  {
    kvq_cache_t *cache = nullptr;
    ASSERT_EQ(kvq_cache_create(&cfg, &cache), KVQ_OK) << kvq_last_error();
    KV prefill = gaussianKV(7, kPrefill, kHeads, kDim);
    ASSERT_EQ(append(cache, prefill, 0, kPrefill), KVQ_OK) << kvq_last_error();
    for (int64_t t = kPrefill; t < total; ++t) {
      ASSERT_EQ(feedToken(cache, t), KVQ_OK) << "token " << t << ": "
                                             << kvq_last_error();
      if ((t + 1) % kEvery != 0)
        continue;
      SCOPED_TRACE(testing::Message() << "after token " << t);
      const int64_t round = (t + 1) / kEvery;
      // A fork attends like its source.
      kvq_cache_t *fork = nullptr;
      ASSERT_EQ(kvq_cache_fork(cache, &fork), KVQ_OK) << kvq_last_error();
      const std::vector<float> want = attendOnce(cache);
      EXPECT_EQ(attendOnce(fork), want);
      if (round % 2 == 0) {
        // Drop the last kCut tokens (inside the fp16 residual window: an
        // exact cut) and feed them again: back to the fork's state.
        ASSERT_LE(kCut, cfg.residual_length);
        ASSERT_EQ(kvq_cache_truncate(cache, t + 1 - kCut), KVQ_OK)
            << kvq_last_error();
        for (int64_t u = t + 1 - kCut; u <= t; ++u)
          ASSERT_EQ(feedToken(cache, u), KVQ_OK) << kvq_last_error();
        EXPECT_EQ(attendOnce(cache), want);
      } else {
        // Save and continue from the loaded copy.
        int64_t size = 0;
        ASSERT_EQ(kvq_cache_save(cache, nullptr, 0, &size), KVQ_OK);
        std::vector<uint8_t> bytes(static_cast<size_t>(size));
        ASSERT_EQ(kvq_cache_save(cache, bytes.data(), size, &size), KVQ_OK);
        kvq_cache_t *loaded = nullptr;
        ASSERT_EQ(kvq_cache_load(bytes.data(), size, &handle, &loaded), KVQ_OK)
            << kvq_last_error();
        kvq_cache_destroy(cache);
        cache = loaded;
        EXPECT_EQ(attendOnce(cache), want);
      }
      kvq_cache_destroy(fork);
    }
    // A fresh cache fed the same tokens with updates only.
    const int64_t soakedBytes = counted.live;
    kvq_cache_t *fresh = nullptr;
    ASSERT_EQ(kvq_cache_create(&cfg, &fresh), KVQ_OK) << kvq_last_error();
    ASSERT_EQ(append(fresh, prefill, 0, kPrefill), KVQ_OK);
    for (int64_t t = kPrefill; t < total; ++t)
      ASSERT_EQ(feedToken(fresh, t), KVQ_OK) << kvq_last_error();
    const int64_t freshBytes = counted.live - soakedBytes;
    EXPECT_EQ(attendOnce(cache), attendOnce(fresh));
    EXPECT_EQ(stats(cache).total_bytes, stats(fresh).total_bytes);
    // The soaked cache holds what a fresh one does, give or take the
    // rollback history a loaded cache rebuilds (at most one residual window
    // of fp16 rows per layer and K/V).
    const int64_t slack = int64_t{2} * cfg.residual_length * kHeads * kDim *
                          int64_t{sizeof(uint16_t)} * 2; // K and V, fp16
    EXPECT_LE(soakedBytes, freshBytes + slack)
        << "soaked cache holds " << soakedBytes << " bytes where a fresh one "
        << "holds " << freshBytes;
    EXPECT_GT(soakedBytes, freshBytes / 2);
    kvq_cache_destroy(fresh);
    kvq_cache_destroy(cache);
  }
  EXPECT_EQ(counted.live, 0) << "bytes left after every cache was destroyed";
}

} // namespace
