//===- metal_lifecycle_test.cpp - Metal truncate and fork vs the CPU ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_metal_cache_truncate takes a subset of the CPU cache's exact cuts
// (no rollback history): every cut it takes must also be taken by the CPU
// cache and give the same fetched bits, stats and sinks, and the same
// attention bits as a Metal cache fed only the kept tokens; the cuts among
// tokens held fp16 must be taken. kvq_metal_cache_fork must be independent
// both ways. Through the Linux shim.
//
//===----------------------------------------------------------------------===//
#include "metal_test_util.h"

using namespace kvqtest;
using namespace kvqmetaltest;

namespace {

constexpr int kHeads = 2, kDim = 16;
constexpr int64_t kTokens = 60;

struct Setup {
  kvq_method method;
  int32_t residual, group, refit;
};

kvq_config cpuConfig(const Setup &s) {
  kvq_config c = config(s.method, kHeads, kDim);
  c.residual_length = s.residual;
  c.group_size = s.group;
  c.refit_interval = s.refit;
  if (s.method == KVQ_METHOD_KIVI_SINK)
    c.n_sink_tokens = 3;
  return c;
}

/// Prefill 20, then decode calls of 1 and 3 tokens, cut at n tokens.
template <class Update> void feedCalls(const KV &kv, int64_t n, Update update) {
  int64_t t = 0;
  for (int64_t i = 0; t < n; ++i) {
    const int64_t c = i == 0 ? 20 : (i % 2 ? 1 : 3);
    const int64_t end = std::min(t + c, n);
    ASSERT_EQ(KVQ_OK, update(t, end)) << kvq_last_error();
    t = end;
  }
}

void buildMetal(MetalHandle &m, const kvq_config &c, const KV &kv, int64_t n) {
  m.h = metalCache(c);
  feedCalls(kv, n, [&](int64_t a, int64_t b) {
    return kvq_metal_cache_update(m.h, 0, kv.k.data() + a * kv.channels(),
                                  kv.v.data() + a * kv.channels(), b - a,
                                  KVQ_DTYPE_F32);
  });
}

void buildCpu(Cache &c, const KV &kv, int64_t n) {
  feedCalls(kv, n, [&](int64_t a, int64_t b) { return append(c.h, kv, a, b); });
}

std::vector<float> metalFetch(const kvq_metal_cache_t *m) {
  int64_t n = 0;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_length(m, 0, &n));
  std::vector<float> kv(static_cast<size_t>(2 * n * kHeads * kDim));
  if (n > 0)
    EXPECT_EQ(KVQ_OK,
              kvq_metal_cache_fetch(m, 0, kv.data(), kv.data() + kv.size() / 2,
                                    n, KVQ_DTYPE_F32));
  return kv;
}

std::vector<float> cpuFetch(const kvq_cache_t *c) {
  Fetched f = fetch(c);
  f.k.insert(f.k.end(), f.v.begin(), f.v.end());
  return f.k;
}

std::vector<float> metalAttend(const kvq_metal_cache_t *m) {
  std::vector<float> q(kHeads * kDim), out(q.size());
  Rng rng(5);
  for (float &x : q)
    x = static_cast<float>(rng.normal());
  EXPECT_EQ(KVQ_OK,
            kvq_metal_cache_attend(m, 0, q.data(), 1, kHeads, out.data()));
  return out;
}

kvq_stats metalStats(const kvq_metal_cache_t *m) {
  kvq_stats s;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_stats(m, 0, &s));
  return s;
}

std::vector<int64_t> metalSinks(const kvq_metal_cache_t *m) {
  int64_t count = 0;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_sink_positions(m, 0, nullptr, 0, &count));
  std::vector<int64_t> p(static_cast<size_t>(count));
  if (count)
    EXPECT_EQ(KVQ_OK,
              kvq_metal_cache_sink_positions(m, 0, p.data(), count, &count));
  return p;
}

/// Two Metal caches hold the same tokens the same way.
void expectSameMetal(const kvq_metal_cache_t *a, const kvq_metal_cache_t *b) {
  EXPECT_EQ(metalFetch(a), metalFetch(b));
  EXPECT_TRUE(sameStats(metalStats(a), metalStats(b)));
  EXPECT_EQ(metalSinks(a), metalSinks(b));
  int64_t n = 0;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_length(a, 0, &n));
  if (n > 0)
    EXPECT_EQ(metalAttend(a), metalAttend(b));
}

class MetalLifecycle : public ::testing::TestWithParam<Setup> {};

} // namespace

TEST_P(MetalLifecycle, TruncationsAreExactAndTakenByTheCpuToo) {
  const kvq_config cfg = cpuConfig(GetParam());
  KV kv = gaussianKV(11, kTokens, kHeads, kDim);
  int64_t taken = 0;
  for (int64_t n = 0; n <= kTokens; ++n) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    MetalHandle m;
    buildMetal(m, cfg, kv, kTokens);
    const std::vector<float> before = metalFetch(m.h);
    kvq_status s = kvq_metal_cache_truncate(m.h, n);
    if (s != KVQ_OK) {
      EXPECT_EQ(KVQ_ERR_NOT_EXACT, s) << kvq_last_error();
      EXPECT_EQ(metalFetch(m.h), before); // refused: unchanged
      continue;
    }
    ++taken;
    Cache cpu(cfg);
    buildCpu(cpu, kv, kTokens);
    ASSERT_EQ(KVQ_OK, kvq_cache_truncate(cpu.h, n)) << kvq_last_error();
    EXPECT_EQ(metalFetch(m.h), cpuFetch(cpu.h));
    EXPECT_TRUE(sameStats(metalStats(m.h), stats(cpu.h)));
    EXPECT_EQ(metalSinks(m.h), sinks(cpu.h));
    MetalHandle fresh;
    buildMetal(fresh, cfg, kv, n);
    expectSameMetal(m.h, fresh.h);
    // Both keep evolving alike.
    if (n < kTokens) {
      for (kvq_metal_cache_t *c : {m.h, fresh.h})
        ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(c, 0, kv.krow(n), kv.vrow(n),
                                                 kTokens - n, KVQ_DTYPE_F32));
      expectSameMetal(m.h, fresh.h);
    }
  }
  // Cuts that only drop fp16 tokens must be taken: all of them for fp16 and
  // for kivi with everything in the window, at least 0 and L otherwise.
  if (cfg.method == KVQ_METHOD_FP16 ||
      (cfg.method == KVQ_METHOD_KIVI && cfg.residual_length > kTokens))
    EXPECT_EQ(taken, kTokens + 1);
  else
    EXPECT_GE(taken, 2);
}

TEST_P(MetalLifecycle, ForkIsIndependentBothWays) {
  const kvq_config cfg = cpuConfig(GetParam());
  KV kv = gaussianKV(12, 2 * kTokens, kHeads, kDim);
  MetalHandle a, b;
  buildMetal(a, cfg, kv, 30);
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_fork(a.h, &b.h)) << kvq_last_error();
  expectSameMetal(a.h, b.h);
  const std::vector<float> prefix = metalFetch(b.h);
  // a continues with tokens [30, 60), b with [60, 90) (as positions 30..59).
  for (int64_t t = 30; t < 60; ++t)
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(a.h, 0, kv.krow(t), kv.vrow(t), 1,
                                             KVQ_DTYPE_F32));
  EXPECT_EQ(metalFetch(b.h), prefix);
  const std::vector<float> aAfter = metalFetch(a.h);
  for (int64_t t = 60; t < 90; ++t)
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(b.h, 0, kv.krow(t), kv.vrow(t), 1,
                                             KVQ_DTYPE_F32));
  EXPECT_EQ(metalFetch(a.h), aAfter);
  MetalHandle refA, refB;
  buildMetal(refA, cfg, kv, 30);
  buildMetal(refB, cfg, kv, 30);
  for (int64_t t = 30; t < 60; ++t) {
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(refA.h, 0, kv.krow(t), kv.vrow(t),
                                             1, KVQ_DTYPE_F32));
    ASSERT_EQ(KVQ_OK,
              kvq_metal_cache_update(refB.h, 0, kv.krow(t + 30),
                                     kv.vrow(t + 30), 1, KVQ_DTYPE_F32));
  }
  expectSameMetal(a.h, refA.h);
  expectSameMetal(b.h, refB.h);
  kvq_metal_cache_destroy(a.h);
  a.h = nullptr;
  expectSameMetal(b.h, refB.h);
}

const Setup kSetups[] = {
    {KVQ_METHOD_FP16, 8, 8, 0},      {KVQ_METHOD_KIVI, 8, 8, 0},
    {KVQ_METHOD_KIVI_SINK, 8, 8, 0}, {KVQ_METHOD_KVQUANT, 8, 8, 8},
    {KVQ_METHOD_KVQUANT, 8, 8, 0},   {KVQ_METHOD_KIVI, 64, 8, 0},
    {KVQ_METHOD_KIVI_SINK, 64, 8, 0}};

std::string setupName(const ::testing::TestParamInfo<Setup> &i) {
  static const char *names[] = {"fp16", "kivi", "kivi_sink", "kvquant"};
  return std::string(names[i.param.method]) + (i.param.refit ? "_refit" : "") +
         (i.param.residual > kTokens ? "_all_fp16" : "");
}

INSTANTIATE_TEST_SUITE_P(Methods, MetalLifecycle, ::testing::ValuesIn(kSetups),
                         setupName);

TEST(MetalLifecycleErrors, Arguments) {
  EXPECT_EQ(KVQ_ERR_NULL_POINTER, kvq_metal_cache_truncate(nullptr, 0));
  EXPECT_EQ(KVQ_ERR_NULL_POINTER, kvq_metal_cache_fork(nullptr, nullptr));
  kvq_metal_cache_t *m = metalCache(cpuConfig({KVQ_METHOD_KIVI, 8, 8, 0}));
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT, kvq_metal_cache_truncate(m, -1));
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_truncate(m, 0));
  kvq_metal_cache_destroy(m);
}
