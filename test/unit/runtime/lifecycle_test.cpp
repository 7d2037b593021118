//===- lifecycle_test.cpp - truncate, fork, save and load -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The reference for every lifecycle call is a cache built with updates only:
// a truncated cache must equal (fetch bits, attention bits, stats, sinks,
// saved bytes) a fresh cache fed the same update calls cut at the same
// token, a refused cut must change nothing, a fork and a loaded cache must
// equal their source and keep evolving like it. The set of cuts each method
// accepts is derived here from the rule in docs/RUNTIME.md, not read back
// from the runtime. Bad files: every prefix, every flipped byte, tampered
// fields with a recomputed checksum, absurd counts, failing allocations.
//
//===----------------------------------------------------------------------===//
#include "saved_file_util.h"
#include "test_util.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

using namespace kvqtest;

namespace {

constexpr int kHeads = 2, kDim = 32;
constexpr int64_t kHeader = 100; ///< bytes before the first layer section

kvq_status load(const std::vector<uint8_t> &b, kvq_cache_t **out,
                const kvq_allocator *a = nullptr) {
  return kvq_cache_load(b.data(), static_cast<int64_t>(b.size()), a, out);
}

/// The update calls of a cache: sizes of consecutive calls.
using Calls = std::vector<int64_t>;

/// A prefill, then decode calls cycling through 1, 3, 1, 4, 2 tokens.
Calls mixedCalls(int64_t prefill, int64_t total) {
  Calls calls = {prefill};
  const int64_t steps[] = {1, 3, 1, 4, 2};
  for (int64_t t = prefill, i = 0; t < total; ++i) {
    calls.push_back(std::min(steps[i % 5], total - t));
    t += calls.back();
  }
  return calls;
}

/// Two layers (different K/V) fed `calls` restricted to the first n tokens.
struct Built {
  kvq_cache_t *h = nullptr;
  ~Built() { kvq_cache_destroy(h); }
};
void build(Built &b, const kvq_config &cfg, const KV &kv0, const KV &kv1,
           const Calls &calls, int64_t n) {
  ASSERT_EQ(kvq_cache_create(&cfg, &b.h), KVQ_OK) << kvq_last_error();
  int64_t t = 0;
  for (int64_t c : calls) {
    const int64_t end = std::min(t + c, n);
    if (end <= t)
      break;
    ASSERT_EQ(append(b.h, kv0, t, end, 0), KVQ_OK) << kvq_last_error();
    ASSERT_EQ(append(b.h, kv1, t, end, 1), KVQ_OK) << kvq_last_error();
    t = end;
  }
}

std::vector<float> attend(const kvq_cache_t *c, int32_t layer, int64_t nq) {
  return attendQueries(c, layer, randomQueries(77, nq, 2 * kHeads, kDim), nq,
                       2 * kHeads);
}

/// a and b hold the same cache: fetch and attention bits, stats, sinks and
/// saved bytes, layer by layer.
void expectSame(const kvq_cache_t *a, const kvq_cache_t *b) {
  for (int32_t l = 0; l < 2; ++l) {
    SCOPED_TRACE(testing::Message() << "layer " << l);
    int64_t na = 0, nb = 0;
    ASSERT_EQ(kvq_cache_length(a, l, &na), KVQ_OK);
    ASSERT_EQ(kvq_cache_length(b, l, &nb), KVQ_OK);
    ASSERT_EQ(na, nb);
    EXPECT_TRUE(sameStats(stats(a, l), stats(b, l)));
    EXPECT_EQ(sinks(a, l), sinks(b, l));
    if (na == 0)
      continue;
    Fetched fa = fetch(a, l), fb = fetch(b, l);
    EXPECT_EQ(fa.kh, fb.kh);
    EXPECT_EQ(fa.vh, fb.vh);
    EXPECT_EQ(0, std::memcmp(fa.k.data(), fb.k.data(), fa.k.size() * 4));
    EXPECT_EQ(0, std::memcmp(fa.v.data(), fb.v.data(), fa.v.size() * 4));
    const int64_t nq = std::min<int64_t>(na, 3);
    std::vector<float> oa = attend(a, l, nq), ob = attend(b, l, nq);
    EXPECT_EQ(0, std::memcmp(oa.data(), ob.data(), oa.size() * 4));
  }
  EXPECT_TRUE(sameStats(stats(a, -1), stats(b, -1)));
  EXPECT_EQ(saveBytes(a), saveBytes(b));
}

kvq_config cfgFor(kvq_method m) { return config(m, kHeads, kDim); }

struct Scenario {
  kvq_config cfg;
  Calls calls;
  int64_t total;
};

/// Truncate the cache built from `s` to every n in [0, total]: each accepted
/// cut equals the fresh cache; each refused one is KVQ_ERR_NOT_EXACT and
/// changes nothing. Returns the accepted cuts.
void truncationsInto(const Scenario &s, std::set<int64_t> &ok) {
  KV kv0 = gaussianKV(1, s.total, kHeads, kDim);
  KV kv1 = laplaceKV(2, s.total, kHeads, kDim);
  for (int64_t n = 0; n <= s.total + 1; ++n) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    Built full;
    build(full, s.cfg, kv0, kv1, s.calls, s.total);
    const std::vector<uint8_t> before = saveBytes(full.h);
    kvq_status st = kvq_cache_truncate(full.h, n);
    if (st != KVQ_OK) {
      EXPECT_EQ(st, KVQ_ERR_NOT_EXACT) << kvq_last_error();
      EXPECT_NE(std::string(kvq_last_error()).find("kvq_cache_truncate"),
                std::string::npos);
      EXPECT_EQ(saveBytes(full.h), before);
      continue;
    }
    ok.insert(n);
    Built fresh;
    build(fresh, s.cfg, kv0, kv1, s.calls, n);
    expectSame(full.h, fresh.h);
    // And both keep evolving alike: the rest of the tokens, one call.
    if (n < s.total) {
      ASSERT_EQ(append(full.h, kv0, n, s.total, 0), KVQ_OK);
      ASSERT_EQ(append(full.h, kv1, n, s.total, 1), KVQ_OK);
      ASSERT_EQ(append(fresh.h, kv0, n, s.total, 0), KVQ_OK);
      ASSERT_EQ(append(fresh.h, kv1, n, s.total, 1), KVQ_OK);
      expectSame(full.h, fresh.h);
    }
  }
}

std::set<int64_t> truncations(const Scenario &s) {
  std::set<int64_t> ok;
  truncationsInto(s, ok);
  return ok;
}

std::set<int64_t> range(int64_t a, int64_t b) { // [a, b)
  std::set<int64_t> r;
  for (int64_t i = a; i < b; ++i)
    r.insert(i);
  return r;
}

} // namespace

//===----------------------------------------------------------------------===//
// Truncate
//===----------------------------------------------------------------------===//

TEST(LifecycleTruncate, Fp16EveryCutIsExact) {
  Scenario s{cfgFor(KVQ_METHOD_FP16), mixedCalls(9, 40), 40};
  s.cfg.num_layers = 2;
  EXPECT_EQ(truncations(s), range(0, 42));
}

TEST(LifecycleTruncate, KvquantFrozenExactAfterThePrefillFit) {
  Scenario s{cfgFor(KVQ_METHOD_KVQUANT), mixedCalls(20, 50), 50};
  s.cfg.num_layers = 2;
  s.cfg.refit_interval = 0;
  // kvquant_n_sink = 1: n <= 1 keeps only the sink; a cut inside the
  // prefill [1, 20) would need the key levels refit.
  std::set<int64_t> want = range(0, 2), rest = range(20, 52);
  want.insert(rest.begin(), rest.end());
  EXPECT_EQ(truncations(s), want);
}

TEST(LifecycleTruncate, KvquantRefitExactOnBatchBoundaries) {
  Scenario s{cfgFor(KVQ_METHOD_KVQUANT), mixedCalls(20, 63), 63};
  s.cfg.num_layers = 2;
  s.cfg.refit_interval = 8;
  // Refit batches [20, 28), ..., [52, 60); [60, 63) waits fp16. Cuts on a
  // boundary, among the waiting tokens, or inside the last batch (its fp16
  // rows are the rollback history) are exact.
  std::set<int64_t> want = range(0, 2), tail = range(52, 65);
  want.insert(tail.begin(), tail.end());
  for (int64_t b = 20; b < 52; b += 8)
    want.insert(b);
  EXPECT_EQ(truncations(s), want);
}

namespace {
/// The cuts docs/RUNTIME.md promises for a plain KIVI layer of L tokens:
/// n = 0, n >= L, or every kept row that is quantized here but fp16 in a
/// layer of n tokens lies in the rollback history (the last R + G keys, or
/// 2R in block mode, and the last R values that left fp16).
std::set<int64_t> kiviCuts(const kvq_config &c, int64_t L) {
  const int64_t R = c.residual_length, G = c.group_size;
  const bool block = c.residual_mode == KVQ_RESIDUAL_BLOCK;
  auto kT = [&](int64_t n) -> int64_t {
    return block ? R * (n / R) : n > R ? G * ((n - R) / G) : 0;
  };
  auto vT = [&](int64_t n) { return std::max<int64_t>(0, n - R); };
  const int64_t kDone = kT(L), vDone = vT(L);
  const int64_t k0 = std::max<int64_t>(0, kDone - (R + (block ? R : G)));
  const int64_t v0 = std::max<int64_t>(0, vDone - R);
  std::set<int64_t> cuts;
  for (int64_t n = 0; n <= L + 1; ++n) {
    const bool keys = kT(n) >= std::min(kDone, n) || kT(n) >= k0;
    const bool values = vT(n) >= std::min(vDone, n) || vT(n) >= v0;
    if (n == 0 || n >= L || (keys && values))
      cuts.insert(n);
  }
  return cuts;
}
} // namespace

TEST(LifecycleTruncate, KiviExactWithinTheRollbackHistory) {
  // Everything still fp16 (L <= R): every cut is exact.
  Scenario s{cfgFor(KVQ_METHOD_KIVI), mixedCalls(5, 30), 30};
  s.cfg.num_layers = 2;
  EXPECT_EQ(truncations(s), range(0, 32));
  // R = 0: values are quantized on arrival (no history needed), keys in
  // groups of G = 32 with the last G in the history.
  Scenario r{cfgFor(KVQ_METHOD_KIVI), mixedCalls(20, 70), 70};
  r.cfg.num_layers = 2;
  r.cfg.residual_length = 0;
  std::set<int64_t> want = range(32, 72);
  want.insert(0);
  EXPECT_EQ(truncations(r), want);
  EXPECT_EQ(kiviCuts(r.cfg, 70), want);
  // Steady decode, sliding and block: the speculative-decoding rollback of
  // up to R tokens is always exact; deeper cuts as far as the history goes.
  for (int32_t mode : {KVQ_RESIDUAL_SLIDING, KVQ_RESIDUAL_BLOCK}) {
    SCOPED_TRACE(testing::Message() << "residual_mode " << mode);
    Scenario d{cfgFor(KVQ_METHOD_KIVI), mixedCalls(40, 150), 150};
    d.cfg.num_layers = 2;
    d.cfg.residual_length = 16;
    d.cfg.group_size = 16;
    d.cfg.residual_mode = mode;
    const std::set<int64_t> got = truncations(d);
    EXPECT_EQ(got, kiviCuts(d.cfg, 150));
    for (int64_t n = 150 - 16; n <= 150; ++n)
      EXPECT_TRUE(got.count(n)) << n;
    EXPECT_FALSE(got.count(100)); // deeper than the history
  }
}

TEST(LifecycleTruncate, SpeculativeRollbackAfterEveryDraft) {
  // Decode in drafts of 4 tokens; after each draft, reject its last k
  // tokens (k = 1..4) on a fork and compare with a cache that only ever
  // saw the accepted tokens. fp16, KIVI and KVQuant (frozen, or refitting
  // every 8 tokens so that drafts complete batches) always accept.
  const std::pair<kvq_method, int32_t> setups[] = {{KVQ_METHOD_FP16, 0},
                                                   {KVQ_METHOD_KIVI, 0},
                                                   {KVQ_METHOD_KVQUANT, 0},
                                                   {KVQ_METHOD_KVQUANT, 8}};
  for (const auto &[m, refit] : setups) {
    SCOPED_TRACE(testing::Message() << "method " << m << " refit " << refit);
    kvq_config cfg = cfgFor(m);
    cfg.num_layers = 2;
    cfg.residual_length = 8;
    cfg.group_size = 8;
    cfg.refit_interval = refit;
    Calls calls = {24};
    for (int i = 0; i < 12; ++i)
      calls.push_back(4);
    KV kv0 = gaussianKV(40, 72, kHeads, kDim),
       kv1 = laplaceKV(41, 72, kHeads, kDim);
    for (int64_t end = 28; end <= 72; end += 4)
      for (int64_t k = 1; k <= 4; ++k) {
        // The rollback runs on a fork (which carries the history along).
        Built src, a;
        build(src, cfg, kv0, kv1, calls, end);
        ASSERT_EQ(kvq_cache_fork(src.h, &a.h), KVQ_OK);
        ASSERT_EQ(kvq_cache_truncate(a.h, end - k), KVQ_OK)
            << end << " " << k << ": " << kvq_last_error();
        Built ref;
        build(ref, cfg, kv0, kv1, calls, end - k);
        expectSame(a.h, ref.h);
      }
  }
}

namespace {
/// The latest position in the top-k of key norms (mean over heads of the L2
/// norm of the K rows; ties to the earlier position) of [0, L), plus one.
int64_t topKEnd(const KV &kv, int64_t L, int k) {
  std::vector<std::pair<double, int64_t>> norms;
  for (int64_t t = 0; t < L; ++t) {
    double n = 0;
    for (int h = 0; h < kHeads; ++h) {
      double q = 0;
      for (int d = 0; d < kDim; ++d) {
        const double x = kv.k[static_cast<size_t>((t * kHeads + h) * kDim + d)];
        q += x * x;
      }
      n += std::sqrt(q);
    }
    norms.emplace_back(-n / kHeads, t);
  }
  std::sort(norms.begin(), norms.end());
  int64_t end = 0;
  for (int i = 0; i < k && i < L; ++i)
    end = std::max(end, norms[static_cast<size_t>(i)].second + 1);
  return end;
}
} // namespace

TEST(LifecycleTruncate, KiviSinkExactWhenTheTopKStaysBelowTheCut) {
  // kivi_sink adds one condition to kivi's: the running top-5 of key norms
  // must not hold a dropped token (its positions computed here).
  for (int64_t L : {30, 150}) {
    SCOPED_TRACE(testing::Message() << "tokens " << L);
    Scenario s{cfgFor(KVQ_METHOD_KIVI_SINK), mixedCalls(L / 3, L), L};
    s.cfg.num_layers = 2;
    s.cfg.residual_length = 16;
    s.cfg.group_size = 16;
    KV kv0 = gaussianKV(1, L, kHeads, kDim),
       kv1 = laplaceKV(2, L, kHeads, kDim);
    const int64_t top = std::max(topKEnd(kv0, L, 5), topKEnd(kv1, L, 5));
    std::set<int64_t> want;
    for (int64_t n : kiviCuts(s.cfg, L))
      if (n == 0 || n >= L || n >= top)
        want.insert(n);
    EXPECT_EQ(truncations(s), want);
  }
}

TEST(LifecycleTruncate, AllocationFailureLeavesTheCacheUnchanged) {
  // Restoring rows from the history allocates (both layers): fail each
  // allocation in turn, then succeed. kivi cuts back into quantized values
  // and keys; kvquant (refit every 8) into its last refit batch [48, 56).
  for (kvq_method m : {KVQ_METHOD_KIVI, KVQ_METHOD_KVQUANT}) {
    SCOPED_TRACE(testing::Message() << "method " << m);
    CountingAllocator counter;
    kvq_config cfg = cfgFor(m);
    cfg.num_layers = 2;
    cfg.residual_length = 8;
    cfg.group_size = 8;
    cfg.refit_interval = 8;
    cfg.allocator = counter.handle();
    Cache c(cfg);
    KV kv = gaussianKV(42, 60, kHeads, kDim);
    for (int32_t l = 0; l < 2; ++l) {
      ASSERT_EQ(append(c.h, kv, 0, 40, l), KVQ_OK);
      for (int64_t t = 40; t < 60; ++t)
        ASSERT_EQ(append(c.h, kv, t, t + 1, l), KVQ_OK);
    }
    const std::vector<uint8_t> before = saveBytes(c.h);
    const int64_t live = counter.live;
    int64_t failures = 0;
    for (int64_t n = 1;; ++n) {
      counter.failAt = counter.calls + n;
      kvq_status s = kvq_cache_truncate(c.h, 53);
      if (s == KVQ_OK)
        break;
      ++failures;
      ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
      EXPECT_EQ(saveBytes(c.h), before);
      EXPECT_EQ(counter.live, live);
      ASSERT_LT(n, 1000);
    }
    counter.failAt = -1;
    EXPECT_GT(failures, 2); // rows of two layers were restored
    EXPECT_EQ(counter.live, stats(c.h, -1).total_bytes);
    Cache ref(cfg);
    for (int32_t l = 0; l < 2; ++l) {
      ASSERT_EQ(append(ref.h, kv, 0, 40, l), KVQ_OK);
      for (int64_t t = 40; t < 53; ++t)
        ASSERT_EQ(append(ref.h, kv, t, t + 1, l), KVQ_OK);
    }
    EXPECT_EQ(saveBytes(c.h), saveBytes(ref.h));
  }
}

TEST(LifecycleTruncate, ArgumentsAndNoOps) {
  kvq_config cfg = cfgFor(KVQ_METHOD_FP16);
  EXPECT_EQ(kvq_cache_truncate(nullptr, 0), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(KVQ_ERR_NOT_EXACT, 13); // appended after the existing statuses
  EXPECT_STREQ(kvq_status_string(KVQ_ERR_NOT_EXACT), "truncation not exact");
  Cache c(cfg);
  EXPECT_EQ(kvq_cache_truncate(c.h, -1), KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_cache_truncate(c.h, 0), KVQ_OK); // empty stays empty
  KV kv = gaussianKV(3, 4, kHeads, kDim);
  ASSERT_EQ(append(c.h, kv, 0, 4), KVQ_OK);
  EXPECT_EQ(kvq_cache_truncate(c.h, 100), KVQ_OK);
  EXPECT_EQ(stats(c.h).tokens, 4);
}

TEST(LifecycleTruncate, RefusalLeavesEveryLayerUnchanged) {
  // Layer 0 could be cut exactly (L <= R), layer 1 could not: all or nothing.
  kvq_config cfg = cfgFor(KVQ_METHOD_KIVI);
  cfg.num_layers = 2;
  Cache c(cfg);
  KV kv = gaussianKV(4, 200, kHeads, kDim);
  ASSERT_EQ(append(c.h, kv, 0, 10, 0), KVQ_OK);
  ASSERT_EQ(append(c.h, kv, 0, 200, 1), KVQ_OK); // beyond the history
  const std::vector<uint8_t> before = saveBytes(c.h);
  EXPECT_EQ(kvq_cache_truncate(c.h, 5), KVQ_ERR_NOT_EXACT);
  EXPECT_NE(std::string(kvq_last_error()).find("layer 1"), std::string::npos)
      << kvq_last_error();
  EXPECT_EQ(saveBytes(c.h), before);
}

//===----------------------------------------------------------------------===//
// Fork
//===----------------------------------------------------------------------===//

TEST(LifecycleFork, IndependentBothWays) {
  for (kvq_method m : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI, KVQ_METHOD_KIVI_SINK,
                       KVQ_METHOD_KVQUANT}) {
    SCOPED_TRACE(testing::Message() << "method " << m);
    kvq_config cfg = cfgFor(m);
    cfg.num_layers = 2;
    KV kv0 = gaussianKV(5, 90, kHeads, kDim),
       kv1 = laplaceKV(6, 90, kHeads, kDim);
    // Branch X appends tokens [50, 70) of kv*, branch Y tokens [70, 90)
    // (as positions 50..69): two different continuations of one prefix.
    Built a;
    build(a, cfg, kv0, kv1, mixedCalls(30, 50), 50);
    kvq_cache_t *b = nullptr;
    ASSERT_EQ(kvq_cache_fork(a.h, &b), KVQ_OK) << kvq_last_error();
    Built bOwn;
    bOwn.h = b;
    expectSame(a.h, b);
    const std::vector<uint8_t> prefix = saveBytes(a.h);
    for (int64_t t = 50; t < 70; ++t) {
      ASSERT_EQ(append(a.h, kv0, t, t + 1, 0), KVQ_OK);
      ASSERT_EQ(append(a.h, kv1, t, t + 1, 1), KVQ_OK);
    }
    EXPECT_EQ(saveBytes(b), prefix); // appending to a left b alone
    const std::vector<uint8_t> aAfter = saveBytes(a.h);
    for (int64_t t = 70; t < 90; ++t) {
      ASSERT_EQ(append(b, kv0, t, t + 1, 0), KVQ_OK);
      ASSERT_EQ(append(b, kv1, t, t + 1, 1), KVQ_OK);
    }
    EXPECT_EQ(saveBytes(a.h), aAfter); // and appending to b left a alone
    // Each branch equals a cache that never forked.
    Built refA, refB;
    build(refA, cfg, kv0, kv1, mixedCalls(30, 50), 50);
    build(refB, cfg, kv0, kv1, mixedCalls(30, 50), 50);
    for (int64_t t = 50; t < 70; ++t) {
      ASSERT_EQ(append(refA.h, kv0, t, t + 1, 0), KVQ_OK);
      ASSERT_EQ(append(refA.h, kv1, t, t + 1, 1), KVQ_OK);
      ASSERT_EQ(append(refB.h, kv0, t + 20, t + 21, 0), KVQ_OK);
      ASSERT_EQ(append(refB.h, kv1, t + 20, t + 21, 1), KVQ_OK);
    }
    expectSame(a.h, refA.h);
    expectSame(b, refB.h);
    // Destroying the source leaves the fork whole.
    kvq_cache_destroy(a.h);
    a.h = nullptr;
    expectSame(b, refB.h);
  }
}

TEST(LifecycleFork, SameAllocatorAndAllocationFailureLeaksNothing) {
  CountingAllocator counter;
  kvq_config cfg = cfgFor(KVQ_METHOD_KIVI_SINK);
  cfg.allocator = counter.handle();
  Cache c(cfg);
  KV kv = gaussianKV(7, 80, kHeads, kDim);
  feed(c.h, kv, 50);
  const int64_t live = counter.live;
  EXPECT_EQ(live, stats(c.h).total_bytes);
  for (int64_t n = 1;; ++n) {
    counter.failAt = counter.calls + n;
    kvq_cache_t *f = nullptr;
    kvq_status s = kvq_cache_fork(c.h, &f);
    if (s == KVQ_OK) {
      counter.failAt = -1;
      EXPECT_EQ(counter.live, 2 * live); // the fork's blocks: same allocator
      kvq_cache_destroy(f);
      EXPECT_EQ(counter.live, live);
      break;
    }
    ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
    EXPECT_EQ(f, nullptr);
    EXPECT_EQ(counter.live, live); // nothing of the failed fork remains
    ASSERT_LT(n, 10000);
  }
  EXPECT_EQ(kvq_cache_fork(nullptr, nullptr), KVQ_ERR_NULL_POINTER);
}

//===----------------------------------------------------------------------===//
// Save and load
//===----------------------------------------------------------------------===//

TEST(LifecycleSave, RoundTripThenBothEvolveAlike) {
  for (kvq_method m : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI, KVQ_METHOD_KIVI_SINK,
                       KVQ_METHOD_KVQUANT})
    for (int32_t refit : {0, 8}) {
      SCOPED_TRACE(testing::Message() << "method " << m << " refit " << refit);
      kvq_config cfg = cfgFor(m);
      cfg.num_layers = 2;
      cfg.refit_interval = refit;
      KV kv0 = gaussianKV(8, 120, kHeads, kDim);
      KV kv1 = laplaceKV(9, 120, kHeads, kDim);
      Built a;
      build(a, cfg, kv0, kv1, mixedCalls(40, 100), 100);
      const std::vector<uint8_t> file = saveBytes(a.h);
      Built b;
      ASSERT_EQ(load(file, &b.h), KVQ_OK) << kvq_last_error();
      expectSame(a.h, b.h);
      for (int64_t t = 100; t < 120; ++t)
        for (kvq_cache_t *c : {a.h, b.h}) {
          ASSERT_EQ(append(c, kv0, t, t + 1, 0), KVQ_OK);
          ASSERT_EQ(append(c, kv1, t, t + 1, 1), KVQ_OK);
        }
      expectSame(a.h, b.h);
    }
}

TEST(LifecycleSave, SizeIsPayloadPlusStatedOverhead) {
  // docs/RUNTIME.md: 108 bytes of header and checksum, 8 per layer section,
  // and per layer fp16 8, kivi 16 + 8 per sink + 12 per top-k entry,
  // kvquant 32 + 4 per quantized token.
  for (kvq_method m : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI, KVQ_METHOD_KIVI_SINK,
                       KVQ_METHOD_KVQUANT}) {
    SCOPED_TRACE(testing::Message() << "method " << m);
    kvq_config cfg = cfgFor(m);
    cfg.num_layers = 2;
    KV kv0 = gaussianKV(10, 100, kHeads, kDim),
       kv1 = laplaceKV(11, 100, kHeads, kDim);
    Built a;
    build(a, cfg, kv0, kv1, mixedCalls(60, 100), 100);
    const kvq_stats s = stats(a.h, -1);
    int64_t perLayer = 8;
    if (m == KVQ_METHOD_KIVI || m == KVQ_METHOD_KIVI_SINK)
      perLayer = 16 + 12 * std::min<int64_t>(cfg.n_sink_tokens, 100);
    if (m == KVQ_METHOD_KVQUANT)
      perLayer = 32;
    int64_t expected = s.total_bytes + 108 + 2 * (8 + perLayer) +
                       8 * s.sink_tokens * (m == KVQ_METHOD_KIVI_SINK);
    if (m == KVQ_METHOD_KVQUANT)
      expected += 4 * s.compressed_tokens;
    int64_t size = 0;
    ASSERT_EQ(kvq_cache_save(a.h, nullptr, 0, &size), KVQ_OK);
    EXPECT_EQ(size, expected);
    EXPECT_LT(size, s.total_bytes + s.total_bytes / 10); // overhead < 10%
  }
}

TEST(LifecycleSave, BufferConventions) {
  kvq_config cfg = cfgFor(KVQ_METHOD_KIVI);
  Cache c(cfg);
  KV kv = gaussianKV(12, 40, kHeads, kDim);
  feed(c.h, kv, 40);
  int64_t size = 0, again = 0;
  ASSERT_EQ(kvq_cache_save(c.h, nullptr, 0, &size), KVQ_OK);
  std::vector<uint8_t> buf(static_cast<size_t>(size) + 4, 0xAB);
  EXPECT_EQ(kvq_cache_save(c.h, buf.data(), size - 1, &again),
            KVQ_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(again, size);  // the size is reported so the caller can retry
  EXPECT_EQ(buf[0], 0xAB); // and nothing was written
  EXPECT_EQ(kvq_cache_save(c.h, buf.data(), size + 4, &again), KVQ_OK);
  EXPECT_EQ(buf[static_cast<size_t>(size)], 0xAB); // nothing past *size
  EXPECT_EQ(0, std::memcmp(buf.data(), "KVQCACHE", 8));
  EXPECT_EQ(kvq_cache_save(nullptr, nullptr, 0, &size), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_cache_save(c.h, nullptr, 0, nullptr), KVQ_ERR_NULL_POINTER);
  kvq_cache_t *out = nullptr;
  EXPECT_EQ(kvq_cache_load(nullptr, 10, nullptr, &out), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_cache_load(buf.data(), -1, nullptr, &out),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_cache_load(buf.data(), size, nullptr, nullptr),
            KVQ_ERR_NULL_POINTER);
  kvq_allocator half = {&CountingAllocator::alloc, nullptr, nullptr};
  EXPECT_EQ(kvq_cache_load(buf.data(), size, &half, &out),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
}

TEST(LifecycleSave, LoadUsesTheGivenAllocatorAndLeaksNothingOnFailure) {
  kvq_config cfg = cfgFor(KVQ_METHOD_KVQUANT);
  cfg.refit_interval = 8;
  Cache c(cfg);
  KV kv = gaussianKV(13, 60, kHeads, kDim);
  feed(c.h, kv, 30);
  const std::vector<uint8_t> file = saveBytes(c.h);
  CountingAllocator counter;
  kvq_allocator a = counter.handle();
  for (int64_t n = 1;; ++n) {
    counter.failAt = counter.calls + n;
    kvq_cache_t *out = nullptr;
    kvq_status s = load(file, &out, &a);
    if (s == KVQ_OK) {
      EXPECT_EQ(counter.live, stats(out).total_bytes);
      kvq_cache_destroy(out);
      break;
    }
    ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(counter.live, 0);
    ASSERT_LT(n, 10000);
  }
  EXPECT_EQ(counter.live, 0);
}

//===----------------------------------------------------------------------===//
// Bad files
//===----------------------------------------------------------------------===//

namespace {

/// A small saved cache of configuration cfg (one layer, 40 tokens).
std::vector<uint8_t> smallFile(kvq_config cfg) {
  cfg.refit_interval = 8;
  cfg.residual_length = 16;
  cfg.group_size = 16;
  Cache c(cfg);
  KV kv = gaussianKV(14, 40, kHeads, kDim);
  feed(c.h, kv, 20);
  return saveBytes(c.h);
}
std::vector<uint8_t> smallFile(kvq_method m) { return smallFile(cfgFor(m)); }

/// Where a kvquant smallFile's first quantized token (position 1) starts
/// (its outlier counts, then its key row): after the layer's section size,
/// 32 bytes of counts, 3 key tables (20-token prefill fit, refits at 20 and
/// 28; 40 - 36 wait) and the sink's fp16 K and V rows.
constexpr size_t kKvquantToken1 = static_cast<size_t>(
    kHeader + 8 + 32 + 3 * (2 * kHeads * kDim * 8) + 4 * kHeads * kDim);

void expectCorrupt(const std::vector<uint8_t> &b, const char *needle) {
  kvq_cache_t *out = nullptr;
  EXPECT_EQ(load(b, &out), KVQ_ERR_CORRUPT_DATA) << kvq_last_error();
  EXPECT_EQ(out, nullptr);
  const std::string msg = kvq_last_error();
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  kvq_cache_destroy(out);
}

const kvq_method kMethods[] = {KVQ_METHOD_FP16, KVQ_METHOD_KIVI,
                               KVQ_METHOD_KIVI_SINK, KVQ_METHOD_KVQUANT};

} // namespace

TEST(LifecycleBadFile, EveryPrefixIsRejected) {
  for (kvq_method m : kMethods) {
    const std::vector<uint8_t> file = smallFile(m);
    for (size_t n = 0; n < file.size(); ++n) {
      // An exact-size copy, so that a read past n is an ASan error.
      std::vector<uint8_t> prefix(file.begin(),
                                  file.begin() + static_cast<long>(n));
      kvq_cache_t *out = nullptr;
      ASSERT_EQ(kvq_cache_load(prefix.empty() ? nullptr : prefix.data(),
                               static_cast<int64_t>(n), nullptr, &out),
                KVQ_ERR_CORRUPT_DATA)
          << "method " << m << " prefix " << n;
    }
  }
}

TEST(LifecycleBadFile, EveryFlippedByteIsRejected) {
  for (kvq_method m : kMethods) {
    const std::vector<uint8_t> file = smallFile(m);
    for (size_t i = 0; i < file.size(); ++i)
      for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = file;
        bad[i] ^= bit;
        kvq_cache_t *out = nullptr;
        ASSERT_EQ(load(bad, &out), KVQ_ERR_CORRUPT_DATA)
            << "method " << m << " byte " << i;
      }
  }
}

TEST(LifecycleBadFile, HeaderFields) {
  const std::vector<uint8_t> file = smallFile(KVQ_METHOD_KIVI);
  std::vector<uint8_t> b = file;
  b[0] = 'X';
  expectCorrupt(b, "magic");
  b = file;
  put(b, 8, 1, 4); // format version 1 (before the RoPE fields)
  reseal(b);
  expectCorrupt(b, "format version 1");
  b = file;
  put(b, 8, 3, 4);
  reseal(b);
  expectCorrupt(b, "format version 3");
  b = file;
  put(b, 18, 1, 2); // the reserved field after the kvq version
  reseal(b);
  expectCorrupt(b, "reserved");
  b = file;
  b.push_back(0); // one byte more than the header announces
  expectCorrupt(b, "truncated or extended");
  b = file;
  b[b.size() - 1] ^= 1;
  expectCorrupt(b, "checksum");
}

// The backend field (offset 80: 0 CPU, 1 Metal) records the backend of the
// cache that saved the file. Either loads into either cache; a re-save
// writes the saving cache's backend, so a Metal file re-saved by a CPU cache
// changes in that field and the checksum only (docs/RUNTIME.md, "Saved
// cache format"). Values other than 0 and 1 are refused (above).
TEST(LifecycleSaveLoad, BackendFieldIsTheSaversOnly) {
  const size_t kBackendField = 20 + 4 * 15;
  for (kvq_method m : kMethods) {
    SCOPED_TRACE(m);
    const std::vector<uint8_t> cpu = smallFile(m);
    uint32_t saved = 0;
    std::memcpy(&saved, cpu.data() + kBackendField, 4);
    EXPECT_EQ(saved, 0u);
    std::vector<uint8_t> metal = cpu;
    put(metal, kBackendField, 1, 4);
    reseal(metal);
    kvq_cache_t *out = nullptr;
    ASSERT_EQ(load(metal, &out), KVQ_OK) << kvq_last_error();
    const std::vector<uint8_t> again = saveBytes(out);
    kvq_cache_destroy(out);
    EXPECT_EQ(again, cpu);
    ASSERT_EQ(again.size(), metal.size());
    for (size_t i = 0; i < again.size(); ++i)
      if (again[i] != metal[i])
        EXPECT_TRUE((i >= kBackendField && i < kBackendField + 4) ||
                    i >= again.size() - 8)
            << "byte " << i << " differs";
  }
}

TEST(LifecycleBadFile, TamperedConfigurationWithValidChecksum) {
  // Config fields start at byte 20, 4 bytes each, in kvq_config order.
  auto field = [](int i) { return static_cast<size_t>(20 + 4 * i); };
  const std::vector<uint8_t> file = smallFile(KVQ_METHOD_KIVI);
  struct Case {
    int field;
    uint32_t value;
    const char *needle;
  } cases[] = {
      {0, 9, "configuration"},            // unknown method
      {1, 5, "configuration"},            // key_bits 5
      {3, 7, "configuration"},            // group_size does not divide
      {12, 0, "configuration"},           // num_layers 0
      {12, 3, "layer 1"},                 // layers the file does not hold
      {14, 64, "layer 0"},                // head_dim: rows no longer fit
      {15, 7, "backend"},                 // unknown backend
      {1, 4, "layer 0"},                  // key_bits 4: block sizes change
      {4, 8, "layer 0"},                  // residual_length 8: fp16 rows move
      {13, 0x80000000u, "configuration"}, // num_kv_heads negative
      {16, 3, "configuration"},           // unknown rope_style
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(testing::Message() << "field " << c.field);
    std::vector<uint8_t> b = file;
    put(b, field(c.field), c.value, 4);
    reseal(b);
    expectCorrupt(b, c.needle);
  }
  // A RoPE cache's theta is checked (rope_style 1 = interleaved).
  for (uint32_t theta : {0x7fc00000u /* NaN */, 0x3f800000u /* 1.0 */}) {
    std::vector<uint8_t> b = file;
    put(b, field(16), 1, 4);
    put(b, field(17), theta, 4);
    reseal(b);
    expectCorrupt(b, "rope theta");
  }
}

TEST(LifecycleBadFile, AbsurdCountsAndValues) {
  const size_t layer = kHeader + 8; // after the section size
  // fp16: a token count the file cannot hold, and a NaN in a row.
  std::vector<uint8_t> fp = smallFile(KVQ_METHOD_FP16);
  std::vector<uint8_t> b = fp;
  put(b, layer, uint64_t{1} << 40, 8);
  reseal(b);
  expectCorrupt(b, "tokens do not fit");
  b = fp;
  put(b, layer + 8, 0x7e00, 2);
  reseal(b);
  expectCorrupt(b, "not finite");
  b = fp;
  put(b, kHeader, uint64_t{1} << 62, 8); // section size
  reseal(b);
  expectCorrupt(b, "section size");
  // kivi_sink: sink count beyond the budget, top-k size, a negative scale.
  std::vector<uint8_t> ks = smallFile(KVQ_METHOD_KIVI_SINK);
  b = ks;
  put(b, layer + 8, 1000000, 4);
  reseal(b);
  expectCorrupt(b, "sinks for a budget");
  // kivi: the first value block (tokens < 40 - R = 24 are quantized) starts
  // after the top-k (empty) with token 0: no fp16 K row (key group 0 is
  // quantized), so its first scale is at layer + 16.
  std::vector<uint8_t> kv = smallFile(KVQ_METHOD_KIVI);
  b = kv;
  put(b, layer + 16, 0xbc00, 2); // scale -1.0
  reseal(b);
  expectCorrupt(b, "bad scale/zero");
  b = kv;
  put(b, layer + 16, 0x7bff, 2); // scale 65504: range far past fp16
  reseal(b);
  expectCorrupt(b, "bad scale/zero");
  // kvquant: counts that contradict each other, and outlier counts.
  std::vector<uint8_t> kq = smallFile(KVQ_METHOD_KVQUANT);
  b = kq;
  put(b, layer + 8, 7, 8); // 7 sinks > kvquant_n_sink
  reseal(b);
  expectCorrupt(b, "inconsistent counts");
  b = kq;
  put(b, layer + 24, 39, 8); // quantized end not on a refit boundary
  reseal(b);
  expectCorrupt(b, "inconsistent counts");
  b = kq;
  put(b, kKvquantToken1, 0xffff, 2); // key outliers > channels
  reseal(b);
  expectCorrupt(b, "bad outlier counts");
}

/// A row's outlier channels must be strictly ascending, as the stores write
/// them (outlierAxpy takes distinct channels):
/// two entries of token 1's key row swapped, or one repeated, are refused.
TEST(LifecycleBadFile, OutlierChannelsOutOfOrder) {
  kvq_config cfg = cfgFor(KVQ_METHOD_KVQUANT);
  cfg.outlier_fraction = 0.05f; // 4 of a row's 64 channels
  const std::vector<uint8_t> file = smallFile(cfg);
  kvq_cache_t *ok = nullptr;
  ASSERT_EQ(load(file, &ok), KVQ_OK) << kvq_last_error();
  kvq_cache_destroy(ok);
  // Token 1's counts, then its key row: codes, then the entries.
  const size_t tok1 = kKvquantToken1;
  const size_t kOut = file[tok1] | (size_t{file[tok1 + 1]} << 8);
  ASSERT_GE(kOut, 2u);
  const size_t entries =
      tok1 + 4 + (size_t{kHeads} * kDim * cfg.key_bits + 7) / 8;
  std::vector<uint8_t> b = file;
  std::swap_ranges(b.begin() + static_cast<long>(entries),
                   b.begin() + static_cast<long>(entries + 4),
                   b.begin() + static_cast<long>(entries + 4));
  reseal(b);
  expectCorrupt(b, "bad key outlier");
  b = file;
  std::copy(file.begin() + static_cast<long>(entries + 2),
            file.begin() + static_cast<long>(entries + 4),
            b.begin() + static_cast<long>(entries + 6)); // same channel twice
  reseal(b);
  expectCorrupt(b, "bad key outlier");
}

//===----------------------------------------------------------------------===//
// Across architectures
//===----------------------------------------------------------------------===//

#ifdef KVQ_LIFECYCLE_DATA
namespace {
/// The cache stored in test/data/lifecycle/<name>.kvqc, rebuilt here.
void buildGolden(kvq_method m, Built &b) {
  kvq_config cfg = cfgFor(m);
  cfg.num_layers = 2;
  cfg.residual_length = 16; // quantized blocks of every kind at 48 tokens
  cfg.group_size = 16;
  cfg.refit_interval = 8;
  KV kv0 = gaussianKV(21, 48, kHeads, kDim),
     kv1 = laplaceKV(22, 48, kHeads, kDim);
  build(b, cfg, kv0, kv1, mixedCalls(24, 48), 48);
}
const char *goldenName(kvq_method m) {
  static const char *names[] = {"fp16", "kivi", "kivi_sink", "kvquant"};
  return names[m];
}
} // namespace

// The files were written by kvq_cache_save on x86_64 (KVQ_WRITE_GOLDEN=1
// rewrites them). On every architecture, loading one must give the same
// fetch and attention bits as the same cache built from the K/V on this
// architecture, and saving that cache must give the same bytes.
TEST(LifecycleCrossArch, CheckedInFilesLoadToTheSameBits) {
  for (kvq_method m : kMethods) {
    SCOPED_TRACE(goldenName(m));
    const std::string path =
        std::string(KVQ_LIFECYCLE_DATA) + "/" + goldenName(m) + ".kvqc";
    Built fresh;
    buildGolden(m, fresh);
    if (std::getenv("KVQ_WRITE_GOLDEN")) {
      std::vector<uint8_t> bytes = saveBytes(fresh.h);
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char *>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << path;
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    Built loaded;
    ASSERT_EQ(load(file, &loaded.h), KVQ_OK) << kvq_last_error();
    expectSame(loaded.h, fresh.h);
    EXPECT_EQ(saveBytes(fresh.h), file);
  }
}
#endif

#ifdef KVQ_FUZZ_CORPUS
// The seeds of the loader fuzzer (test/fuzz/cache_load): small saved caches
// of every method, and damaged copies. They must stay valid (or invalid) as
// the format evolves; KVQ_WRITE_GOLDEN=1 rewrites them.
TEST(LifecycleFuzzCorpus, SeedsLoadOrFailAsNamed) {
  struct Seed {
    const char *name;
    kvq_method method;
    int32_t refit;
  } seeds[] = {{"fp16", KVQ_METHOD_FP16, 0},
               {"kivi", KVQ_METHOD_KIVI, 0},
               {"kivi_sink", KVQ_METHOD_KIVI_SINK, 0},
               {"kvquant_frozen", KVQ_METHOD_KVQUANT, 0},
               {"kvquant_refit", KVQ_METHOD_KVQUANT, 4}};
  const bool write = std::getenv("KVQ_WRITE_GOLDEN") != nullptr;
  auto path = [](const std::string &name) {
    return std::string(KVQ_FUZZ_CORPUS) + "/" + name + ".kvqc";
  };
  auto writeFile = [](const std::string &p, const std::vector<uint8_t> &b) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char *>(b.data()),
               static_cast<std::streamsize>(b.size()));
  };
  auto readFile = [](const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    EXPECT_TRUE(in.good()) << p;
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  };
  for (const Seed &s : seeds) {
    SCOPED_TRACE(s.name);
    kvq_config cfg = config(s.method, 1, 16);
    cfg.num_layers = 2;
    cfg.group_size = 8;
    cfg.residual_length = 4;
    cfg.refit_interval = s.refit;
    if (s.method == KVQ_METHOD_KIVI_SINK)
      cfg.n_sink_tokens = 2;
    Cache c(cfg);
    KV kv = laplaceKV(30, 14, 1, 16);
    for (int32_t l = 0; l < 2; ++l) {
      ASSERT_EQ(append(c.h, kv, 0, 6, l), KVQ_OK);
      for (int64_t t = 6; t < 14 - l; ++t)
        ASSERT_EQ(append(c.h, kv, t, t + 1, l), KVQ_OK);
    }
    const std::vector<uint8_t> bytes = saveBytes(c.h);
    if (write) {
      writeFile(path(s.name), bytes);
      std::vector<uint8_t> cut(
          bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
      writeFile(path(std::string("bad_truncated_") + s.name), cut);
      std::vector<uint8_t> flip = bytes;
      flip[bytes.size() / 2] ^= 0x10;
      writeFile(path(std::string("bad_flipped_") + s.name), flip);
    }
    EXPECT_EQ(readFile(path(s.name)), bytes);
    for (const char *bad : {"bad_truncated_", "bad_flipped_"}) {
      kvq_cache_t *out = nullptr;
      EXPECT_EQ(load(readFile(path(std::string(bad) + s.name)), &out),
                KVQ_ERR_CORRUPT_DATA);
      kvq_cache_destroy(out);
    }
  }
}
#endif
