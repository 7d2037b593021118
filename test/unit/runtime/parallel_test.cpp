//===- parallel_test.cpp - Attention through the host's parallel-for ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_cache_set_parallel / kvq_set_default_parallel: the runtime hands
// decode attention to the host's parallel-for in fixed token ranges (a
// call of many query steps in fixed groups of steps), so
// the output has the same bits with no threads, 2, 3 or 8; the host's
// callback is really used (and not below two workers); long caches, where
// the ranges' partial softmaxes are merged, still agree with float64
// attention over the fetched K/V; bad arguments change nothing. KVQuant's
// level fits (prefill and refits) go through the same parallel-for and
// give the same bytes.
//
//===----------------------------------------------------------------------===//
#include "reference_attention.h"
#include "saved_file_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace kvqtest;
using kvq::reference::attention64;

namespace {

/// A test pool: `threads` std::threads take task indices from a shared
/// counter, so tasks really run concurrently and in no fixed order.
struct TestPool {
  int threads = 1;
  std::atomic<int64_t> calls{0}, tasks{0};

  static void parallelFor(void *self, int64_t n, void (*task)(void *, int64_t),
                          void *ctx) {
    auto *pool = static_cast<TestPool *>(self);
    ++pool->calls;
    pool->tasks += n;
    std::atomic<int64_t> next{0};
    auto worker = [&] {
      for (int64_t i; (i = next++) < n;)
        task(ctx, i);
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < pool->threads; ++t)
      ts.emplace_back(worker);
    worker();
    for (std::thread &t : ts)
      t.join();
  }
  kvq_parallel handle() { return {&parallelFor, this, threads}; }
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  const char *name;
  kvq_method method;
  int32_t rope;
};

kvq_config caseConfig(const Case &c) {
  kvq_config cfg = config(c.method, 2, 64);
  cfg.rope_style = c.rope;
  cfg.rope_theta = 10000.0f;
  return cfg;
}

class ParallelAttend : public ::testing::TestWithParam<Case> {};

} // namespace

/// A cache of `tokens` tokens of one configuration (prefill then single
/// tokens, so the quantized methods have left their window several times),
/// and the tasks a call of `queries` steps hands the host.
struct Shape {
  int64_t tokens, queries, tasks;
};

// Ranges of 1024 tokens: 2100 tokens are three tasks. From 33 query steps
// the tasks are groups of 32 steps instead, each over its ranges: with 80
// steps over 1100 tokens, three groups, and the first four steps
// (positions 1020..1023) see no token of the second range, whose maxima
// stay -inf for them (weights 0 in the merge); 64 steps over 300 tokens
// (one range) are two groups.
const Shape kShapes[] = {
    {2100, 1, 3}, {2100, 3, 3}, {1100, 80, 3}, {300, 64, 2}};

TEST_P(ParallelAttend, SameBitsWithAnyThreadCount) {
  const kvq_config cfg = caseConfig(GetParam());
  const int d = 64, qHeads = 4;
  for (const Shape &sh : kShapes) {
    KV kv = gaussianKV(7, sh.tokens, 2, d);
    Cache c(cfg);
    feed(c.h, kv, sh.tokens - 100);
    const std::vector<float> q =
        randomQueries(11 + sh.queries, sh.queries, qHeads, d);
    const std::vector<float> serial =
        attendQueries(c.h, 0, q, sh.queries, qHeads);
    for (int threads : {2, 3, 8}) {
      TestPool pool;
      pool.threads = threads;
      const kvq_parallel p = pool.handle();
      ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK) << kvq_last_error();
      EXPECT_TRUE(
          sameBits(attendQueries(c.h, 0, q, sh.queries, qHeads), serial))
          << threads << " threads, " << sh.tokens << " tokens, " << sh.queries
          << " queries";
      EXPECT_EQ(pool.calls, 1);
      EXPECT_EQ(pool.tasks, sh.tasks);
    }
  }
}

// The merged ranges are still attention: float64 attention over what
// kvq_cache_fetch returns (the same keys the scores used), finite even
// where a range is masked for some query steps.
TEST_P(ParallelAttend, MergedRangesAgreeWithFloat64AttentionOverFetch) {
  const kvq_config cfg = caseConfig(GetParam());
  const int d = 64, qHeads = 2;
  for (const Shape &sh : {Shape{2600, 1, 3}, Shape{1100, 80, 3}}) {
    KV kv = laplaceKV(3, sh.tokens, 2, d);
    Cache c(cfg);
    feed(c.h, kv, sh.tokens - 10);
    TestPool pool;
    pool.threads = 2;
    const kvq_parallel p = pool.handle();
    ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
    const std::vector<float> q =
        randomQueries(5 + sh.queries, sh.queries, qHeads, d);
    const std::vector<float> got = attendQueries(c.h, 0, q, sh.queries, qHeads);
    Fetched f = fetch(c.h);
    const std::vector<double> want =
        attention64(f.k, f.v, sh.tokens, 2, d, q, sh.queries, qHeads);
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i]))
          << "output " << i << ", " << sh.queries << " queries";
      worst = std::max(worst, std::fabs(got[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
    EXPECT_LE(worst, 2e-5 * scale) << sh.queries << " queries";
    EXPECT_EQ(pool.tasks, sh.tasks);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Methods, ParallelAttend,
    ::testing::Values(Case{"fp16", KVQ_METHOD_FP16, KVQ_ROPE_NONE},
                      Case{"kivi", KVQ_METHOD_KIVI, KVQ_ROPE_NONE},
                      Case{"kivi_sink", KVQ_METHOD_KIVI_SINK, KVQ_ROPE_NONE},
                      Case{"kvquant", KVQ_METHOD_KVQUANT, KVQ_ROPE_NONE},
                      Case{"kivi_rope_half", KVQ_METHOD_KIVI, KVQ_ROPE_HALF},
                      Case{"kvquant_rope_interleaved", KVQ_METHOD_KVQUANT,
                           KVQ_ROPE_INTERLEAVED}),
    [](const ::testing::TestParamInfo<Case> &i) { return i.param.name; });

TEST(Parallel, OneRangeOrOneWorkerNeverCallsTheHost) {
  const int d = 64;
  KV kv = gaussianKV(1, 1024, 2, d);
  Cache c(config(KVQ_METHOD_KIVI, 2, d));
  feed(c.h, kv, 1024);
  TestPool pool;
  pool.threads = 4;
  kvq_parallel p = pool.handle();
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
  const std::vector<float> q = randomQueries(2, 1, 2, d);
  attendQueries(c.h, 0, q, 1, 2); // 1024 tokens: one range
  EXPECT_EQ(pool.calls, 0);
  ASSERT_EQ(append(c.h, kv, 0, 1), KVQ_OK);
  p.workers = 1;
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
  attendQueries(c.h, 0, q, 1, 2); // two ranges, but one worker
  EXPECT_EQ(pool.calls, 0);
  p.workers = 2;
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
  attendQueries(c.h, 0, q, 1, 2);
  EXPECT_EQ(pool.calls, 1);
}

TEST(Parallel, BadArgumentsChangeNothing) {
  const int d = 64;
  KV kv = gaussianKV(4, 2048 + 5, 2, d);
  Cache c(config(KVQ_METHOD_FP16, 2, d));
  feed(c.h, kv, 2048 + 5);
  TestPool pool;
  pool.threads = 2;
  kvq_parallel good = pool.handle();
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &good), KVQ_OK);
  for (int32_t workers : {0, -1, KVQ_MAX_WORKERS + 1}) {
    kvq_parallel bad = good;
    bad.workers = workers;
    EXPECT_EQ(kvq_cache_set_parallel(c.h, &bad), KVQ_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvq_last_error()).find("workers"), std::string::npos)
        << kvq_last_error();
    EXPECT_EQ(kvq_set_default_parallel(&bad), KVQ_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(kvq_cache_set_parallel(nullptr, &good), KVQ_ERR_NULL_POINTER);
  // The cache still uses the good setting.
  const std::vector<float> q = randomQueries(9, 1, 2, d);
  attendQueries(c.h, 0, q, 1, 2);
  EXPECT_EQ(pool.calls, 1);
  // Without a parallel-for, workers are not looked at.
  kvq_parallel none{nullptr, nullptr, 0};
  EXPECT_EQ(kvq_cache_set_parallel(c.h, &none), KVQ_OK);
  attendQueries(c.h, 0, q, 1, 2);
  EXPECT_EQ(pool.calls, 1);
}

TEST(Parallel, ForksInheritTheCachesSettingAndOthersTheDefault) {
  const int d = 64;
  KV kv = gaussianKV(6, 3000, 2, d);
  TestPool own, shared;
  own.threads = shared.threads = 2;
  const kvq_parallel p = own.handle(), dflt = shared.handle();
  ASSERT_EQ(kvq_set_default_parallel(&dflt), KVQ_OK);
  Cache c(config(KVQ_METHOD_KIVI_SINK, 2, d));
  feed(c.h, kv, 3000);
  const std::vector<float> q = randomQueries(3, 1, 2, d);
  const std::vector<float> viaDefault = attendQueries(c.h, 0, q, 1, 2);
  EXPECT_EQ(shared.calls, 1);
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
  kvq_cache_t *fork = nullptr;
  ASSERT_EQ(kvq_cache_fork(c.h, &fork), KVQ_OK);
  EXPECT_TRUE(sameBits(attendQueries(fork, 0, q, 1, 2), viaDefault));
  EXPECT_EQ(own.calls, 1);
  kvq_cache_destroy(fork);
  ASSERT_EQ(kvq_cache_set_parallel(c.h, nullptr), KVQ_OK); // the default
  attendQueries(c.h, 0, q, 1, 2);
  EXPECT_EQ(shared.calls, 2);
  ASSERT_EQ(kvq_set_default_parallel(nullptr), KVQ_OK);
  EXPECT_TRUE(sameBits(attendQueries(c.h, 0, q, 1, 2), viaDefault));
  EXPECT_EQ(shared.calls, 2);
}

// KVQuant's fits (the prefill's, each refit batch's keys per channel, every
// value row's) run in fixed tasks through the host's parallel-for: the same
// saved bytes as on one thread, with any thread count, frozen or refitting
// keys, with and without RoPE, and a channel count (48) and a prefill (300
// rows) that leave partial tasks.
TEST(ParallelUpdate, KvquantFitsGiveTheSameBytesWithAnyThreadCount) {
  for (int32_t refit : {128, 0})
    for (int32_t rope : {KVQ_ROPE_NONE, KVQ_ROPE_INTERLEAVED}) {
      kvq_config cfg = config(KVQ_METHOD_KVQUANT, 2, 24);
      cfg.refit_interval = refit;
      cfg.rope_style = rope;
      cfg.rope_theta = 10000.0f;
      const KV kv = laplaceKV(17, 300 + 2 * 128 + 5, 2, 24);
      Cache serial(cfg);
      feed(serial.h, kv, 300);
      const std::vector<uint8_t> want = saveBytes(serial.h);
      for (int threads : {2, 3, 8}) {
        SCOPED_TRACE(testing::Message() << "refit " << refit << " rope " << rope
                                        << ", " << threads << " threads");
        TestPool pool;
        pool.threads = threads;
        const kvq_parallel p = pool.handle();
        Cache c(cfg);
        ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
        ASSERT_EQ(append(c.h, kv, 0, 300), KVQ_OK) << kvq_last_error();
        EXPECT_GT(pool.calls, 0); // the prefill's fits
        // A decode token calls the pool exactly when it completes a refit
        // batch (a frozen token fits one value row: too little to split).
        for (int64_t t = 300; t < kv.tokens; ++t) {
          const int64_t before = pool.calls;
          ASSERT_EQ(append(c.h, kv, t, t + 1), KVQ_OK) << kvq_last_error();
          const bool refits = refit && (t + 1 - 300) % refit == 0;
          EXPECT_EQ(pool.calls > before, refits) << "token " << t;
        }
        EXPECT_EQ(saveBytes(c.h), want);
      }
    }
}

// A refit batch whose allocation fails after its fits ran on the host's
// workers leaves the cache as it was.
TEST(ParallelUpdate, KvquantRefitThatRunsOutOfMemoryChangesNothing) {
  CountingAllocator counter;
  kvq_config cfg = config(KVQ_METHOD_KVQUANT, 2, 32);
  cfg.allocator = counter.handle();
  const KV kv = gaussianKV(23, 200 + 128, 2, 32);
  Cache c(cfg);
  TestPool pool;
  pool.threads = 2;
  const kvq_parallel p = pool.handle();
  ASSERT_EQ(kvq_cache_set_parallel(c.h, &p), KVQ_OK);
  ASSERT_EQ(append(c.h, kv, 0, 200), KVQ_OK) << kvq_last_error();
  for (int64_t t = 200; t < 327; ++t) // one token short of a refit batch
    ASSERT_EQ(append(c.h, kv, t, t + 1), KVQ_OK) << kvq_last_error();
  const std::vector<uint8_t> before = saveBytes(c.h);
  const int64_t calls = pool.calls;
  counter.failAt = counter.calls + 5; // inside the batch's value rows
  EXPECT_EQ(append(c.h, kv, 327, 328), KVQ_ERR_OUT_OF_MEMORY);
  EXPECT_GT(pool.calls, calls); // the fits did run through the pool
  EXPECT_EQ(saveBytes(c.h), before);
  counter.failAt = -1;
  ASSERT_EQ(append(c.h, kv, 327, 328), KVQ_OK) << kvq_last_error();
}
