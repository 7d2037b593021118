//===- fp16_pages_test.cpp - The fp16 store's pages -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fp16 store keeps full pages of kFp16PageTokens tokens head-major and
// the tail per token (fp16_store.h). Nothing observable may depend on
// that: attention is compared bit for bit with the same driver run over a
// store in the per-token layout the fp16 store used before (RowsStore
// below, the oracle), post- and pre-RoPE; fetch, stats and saved bytes with
// what the input gives independently of any layout; truncate, fork, load
// and failing allocations (the repack of a filled tail, a cut inside a
// page) with caches built by updates only. Lengths around the page size,
// updates of every size, including ones filling several pages at once.
// The attention comparison runs with the active kernel table and again
// with the reference (Fp16Pages.ReferenceKernels in CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "payload.h"
#include "rope.h"
#include "saved_file_util.h"
#include "store.h"
#include "test_util.h"

#include <algorithm>
#include <string>

using namespace kvqtest;

namespace {

constexpr int64_t kPage = 64;
static_assert(kvq::kFp16PageTokens == kPage, "the lengths below straddle it");

/// The per-token layout (one K row then V row per token), scored with the
/// same ops in the same per-token order as the fp16 store did before pages.
class RowsStore final : public kvq::LayerStore {
public:
  using LayerStore::LayerStore;
  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                    const kvq_parallel &) override {
    for (int64_t t = 0; t < n; ++t) {
      std::vector<uint16_t> row(k + t * channels_, k + (t + 1) * channels_);
      row.insert(row.end(), v + t * channels_, v + (t + 1) * channels_);
      rows_.push_back(row);
    }
    return KVQ_OK;
  }
  int64_t length() const override { return static_cast<int64_t>(rows_.size()); }
  void loadRow(int64_t pos, float *k, float *v) const override {
    const uint16_t *r = rows_[static_cast<size_t>(pos)].data();
    for (int64_t i = 0; i < channels_; ++i) {
      k[i] = fromHalf(r[i]);
      v[i] = fromHalf(r[channels_ + i]);
    }
  }
  void addStats(kvq_stats &) const override {}
  void attendKeys(kvq::AttendJob &job) const override {
    for (int64_t t = job.t0; t < job.t1; ++t)
      for (int64_t h = 0; h < job.heads; ++h)
        job.ops.dotHalf(row(t) + h * job.d, job.query(h), job.nq, job.d,
                        job.scoreRow(t, h));
  }
  void attendValues(kvq::AttendJob &job) const override {
    const int64_t n = job.t1 - job.t0;
    job.halfRows.resize(static_cast<size_t>(n));
    for (int64_t h = 0; h < job.heads; ++h) {
      for (int64_t t = job.t0; t < job.t1; ++t)
        job.halfRows[static_cast<size_t>(t - job.t0)] =
            row(t) + channels_ + h * job.d;
      kvq::HalfRowsAxpy args;
      args.rows = job.halfRows.data();
      args.n = n;
      args.w = job.scoreRow(job.t0, h);
      args.wStride = job.heads * job.nq;
      args.nq = job.nq;
      args.d = job.d;
      args.acc = job.accumulator(h);
      job.ops.axpyHalfRows(args);
    }
  }
  bool halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                   const uint16_t **rows) const override {
    for (int64_t t = t0; t < t1; ++t)
      rows[t - t0] = row(t) + h * cfg_.head_dim;
    return true;
  }
  void releaseAll() override {}
  kvq_status checkTruncate(int64_t) const override { return KVQ_OK; }
  void truncate(int64_t) override {}
  void save(kvq::ByteWriter &) const override {}
  kvq_status load(kvq::ByteReader &) override { return KVQ_OK; }

private:
  const uint16_t *row(int64_t t) const {
    return rows_[static_cast<size_t>(t)].data();
  }
  std::vector<std::vector<uint16_t>> rows_;
};

/// Update sizes: a prefill, then sizes cycling through `steps`, up to total.
std::vector<int64_t> callsOf(int64_t prefill, std::vector<int64_t> steps,
                             int64_t total) {
  std::vector<int64_t> calls;
  int64_t t = std::min(prefill, total);
  if (t > 0)
    calls.push_back(t);
  for (size_t i = 0; t < total; ++i) {
    calls.push_back(std::min(steps[i % steps.size()], total - t));
    t += calls.back();
  }
  return calls;
}

/// Every way the tests split a layer of `total` tokens into updates: one
/// call, one token per call, a prefill then decode steps, and mixed sizes
/// with calls that fill one or several pages at once.
std::vector<std::vector<int64_t>> splits(int64_t total) {
  return {callsOf(total, {1}, total), callsOf(0, {1}, total),
          callsOf(40, {1, 3, 1, 4, 2}, total),
          callsOf(3, {70, 1, 130, 5, 63, 64, 17}, total),
          callsOf(63, {1, 129, 2}, total)};
}

std::vector<uint16_t> halves(const std::vector<float> &x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    h[i] = toHalf(x[i]);
  return h;
}

const int64_t kLengths[] = {1, 2, 63, 64, 65, 127, 128, 129, 200, 300};

} // namespace

//===----------------------------------------------------------------------===//
// Attention: the same bits as the per-token layout.
//===----------------------------------------------------------------------===//

TEST(Fp16Pages, AttentionEqualsThePerTokenLayoutBitForBit) {
  struct Shape {
    int heads, dim;
  };
  for (Shape sh : {Shape{2, 64}, Shape{3, 32}})
    for (int32_t style :
         {KVQ_ROPE_NONE, KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF})
      for (int64_t L : kLengths) {
        kvq_config cfg = config(KVQ_METHOD_FP16, sh.heads, sh.dim);
        cfg.rope_style = style;
        cfg.rope_theta = 10000.0f;
        kvq::Rope rope(cfg);
        KV kv = gaussianKV(static_cast<uint64_t>(L) * 7 + 1, L, sh.heads,
                           sh.dim);
        const std::vector<uint16_t> kh = halves(kv.k), vh = halves(kv.v);
        const int64_t C = kv.channels();
        kvq::Payload payload(kvq_allocator{});
        RowsStore oracle(cfg, payload);
        ASSERT_EQ(oracle.update(kh.data(), vh.data(), L, kvq_parallel{}),
                  KVQ_OK);
        for (const std::vector<int64_t> &calls : splits(L)) {
          SCOPED_TRACE(testing::Message()
                       << "heads " << sh.heads << " style " << style << " L "
                       << L << " calls " << calls.size());
          std::unique_ptr<kvq::LayerStore> store =
              kvq::makeFp16Store(cfg, payload);
          int64_t t = 0;
          for (int64_t n : calls) {
            ASSERT_EQ(store->update(kh.data() + t * C, vh.data() + t * C, n,
                                    kvq_parallel{}),
                      KVQ_OK);
            t += n;
          }
          ASSERT_EQ(store->length(), L);
          // Every row as loadRow decodes it.
          std::vector<float> k(static_cast<size_t>(C)), v(k.size());
          for (int64_t p = 0; p < L; ++p) {
            store->loadRow(p, k.data(), v.data());
            ASSERT_EQ(0, std::memcmp(k.data(), kv.krow(p), 4 * C)) << p;
            ASSERT_EQ(0, std::memcmp(v.data(), kv.vrow(p), 4 * C)) << p;
          }
          for (int qPerKv : {1, 4})
            for (int64_t nQueries : {int64_t{1}, std::min<int64_t>(L, 3)}) {
              const int32_t qHeads = sh.heads * qPerKv;
              Rng rng(static_cast<uint64_t>(L + qPerKv + nQueries));
              std::vector<float> q(
                  static_cast<size_t>(nQueries * qHeads * sh.dim));
              for (float &x : q)
                x = static_cast<float>(2.0 * rng.normal());
              std::vector<float> got(q.size()), want(q.size());
              const kvq_parallel serial{};
              kvq::attendFused(*store, cfg, rope, serial, q.data(), nQueries,
                               qHeads, got.data());
              kvq::attendFused(oracle, cfg, rope, serial, q.data(), nQueries,
                               qHeads, want.data());
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), 4 * q.size()))
                  << "qPerKv " << qPerKv << " nQueries " << nQueries;
            }
          store->releaseAll();
        }
        EXPECT_EQ(payload.liveBytes(), 0);
      }
}

//===----------------------------------------------------------------------===//
// Through the C ABI: fetch, stats, saved bytes, lifecycle, failures.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kHeads = 2, kDim = 32;

kvq_config fp16Config(int32_t layers = 1) {
  kvq_config cfg = config(KVQ_METHOD_FP16, kHeads, kDim);
  cfg.num_layers = layers;
  return cfg;
}

/// Layer l of a cache fed `calls` (restricted to the first n tokens);
/// layer l gets kv shifted by l tokens' worth of seed.
void feedCalls(kvq_cache_t *c, const std::vector<KV> &kvs,
               const std::vector<int64_t> &calls, int64_t from, int64_t n) {
  int64_t t = 0;
  for (int64_t size : calls) {
    const int64_t a = std::max(t, from), b = std::min(t + size, n);
    t += size;
    if (b <= a)
      continue;
    for (size_t l = 0; l < kvs.size(); ++l)
      ASSERT_EQ(append(c, kvs[l], a, b, static_cast<int32_t>(l)), KVQ_OK)
          << kvq_last_error();
  }
}

std::vector<KV> layersKV(int32_t layers, int64_t total) {
  std::vector<KV> kvs;
  for (int32_t l = 0; l < layers; ++l)
    kvs.push_back(gaussianKV(100 + static_cast<uint64_t>(l), total, kHeads,
                             kDim));
  return kvs;
}

std::vector<float> attendAll(const kvq_cache_t *c, int32_t layer, int64_t nq) {
  return attendQueries(c, layer, randomQueries(77, nq, 2 * kHeads, kDim), nq,
                       2 * kHeads);
}

/// The same cache: length, fetch, stats, attention bits and saved bytes.
void expectSame(const kvq_cache_t *a, const kvq_cache_t *b, int32_t layers) {
  for (int32_t l = 0; l < layers; ++l) {
    SCOPED_TRACE(testing::Message() << "layer " << l);
    int64_t na = -1, nb = -2;
    ASSERT_EQ(kvq_cache_length(a, l, &na), KVQ_OK);
    ASSERT_EQ(kvq_cache_length(b, l, &nb), KVQ_OK);
    ASSERT_EQ(na, nb);
    EXPECT_TRUE(sameStats(stats(a, l), stats(b, l)));
    if (na == 0)
      continue;
    Fetched fa = fetch(a, l), fb = fetch(b, l);
    EXPECT_EQ(fa.kh, fb.kh);
    EXPECT_EQ(fa.vh, fb.vh);
    for (int64_t nq : {int64_t{1}, std::min<int64_t>(na, 3)}) {
      std::vector<float> oa = attendAll(a, l, nq), ob = attendAll(b, l, nq);
      EXPECT_EQ(0, std::memcmp(oa.data(), ob.data(), oa.size() * 4));
    }
  }
  EXPECT_EQ(saveBytes(a), saveBytes(b));
}

/// The saved bytes of a one-layer fp16 cache holding the first n tokens of
/// kv, from the format's definition (docs/RUNTIME.md): per token its K row
/// then its V row, whatever the store's layout.
std::vector<uint8_t> expectedLayer(const KV &kv, int64_t n) {
  std::vector<uint8_t> out(8);
  put(out, 0, static_cast<uint64_t>(n), 8);
  for (int64_t t = 0; t < n; ++t)
    for (const float *row : {kv.k.data() + t * kv.channels(),
                             kv.v.data() + t * kv.channels()})
      for (int64_t c = 0; c < kv.channels(); ++c) {
        const uint16_t h = toHalf(row[c]);
        out.push_back(static_cast<uint8_t>(h));
        out.push_back(static_cast<uint8_t>(h >> 8));
      }
  return out;
}

} // namespace

TEST(Fp16Pages, FetchStatsAndSavedBytesDoNotDependOnTheLayout) {
  const int64_t C = int64_t{kHeads} * kDim;
  for (int64_t L : kLengths) {
    std::vector<KV> kvs = layersKV(1, L);
    std::vector<uint8_t> first;
    for (const std::vector<int64_t> &calls : splits(L)) {
      SCOPED_TRACE(testing::Message() << "L " << L << " calls " << calls.size());
      CountingAllocator counter;
      kvq_config cfg = fp16Config();
      cfg.allocator = counter.handle();
      Cache c(cfg);
      feedCalls(c.h, kvs, calls, 0, L);
      Fetched f = fetch(c.h);
      for (int64_t i = 0; i < L * C; ++i) {
        ASSERT_EQ(f.kh[static_cast<size_t>(i)], toHalf(kvs[0].k[static_cast<size_t>(i)]));
        ASSERT_EQ(f.vh[static_cast<size_t>(i)], toHalf(kvs[0].v[static_cast<size_t>(i)]));
      }
      const kvq_stats s = stats(c.h);
      EXPECT_EQ(s.tokens, L);
      EXPECT_EQ(s.residual_tokens, L);
      EXPECT_EQ(s.residual_bytes, L * 4 * C);
      EXPECT_EQ(s.total_bytes, L * 4 * C);
      EXPECT_EQ(counter.live, s.total_bytes);
      const std::vector<uint8_t> bytes = saveBytes(c.h);
      ASSERT_EQ(bytes.size(), static_cast<size_t>(100 + 8 + 8 + L * 4 * C + 8));
      const std::vector<uint8_t> layer(bytes.begin() + 108, bytes.end() - 8);
      EXPECT_EQ(layer, expectedLayer(kvs[0], L));
      if (first.empty())
        first = bytes;
      EXPECT_EQ(bytes, first);
      // Loaded back: the same cache, the same bytes.
      kvq_cache_t *loaded = nullptr;
      ASSERT_EQ(kvq_cache_load(bytes.data(), static_cast<int64_t>(bytes.size()),
                               nullptr, &loaded),
                KVQ_OK)
          << kvq_last_error();
      expectSame(c.h, loaded, 1);
      kvq_cache_destroy(loaded);
    }
  }
}

TEST(Fp16Pages, TruncateThenUpdateEqualsADirectBuild) {
  const int32_t layers = 2;
  const int64_t total = 200;
  std::vector<KV> kvs = layersKV(layers, total);
  for (const std::vector<int64_t> &calls : splits(total))
    for (int64_t n : {0, 1, 2, 63, 64, 65, 100, 127, 128, 129, 150, 191, 192,
                      193, 199}) {
      SCOPED_TRACE(testing::Message() << "cut " << n << " calls "
                                      << calls.size());
      CountingAllocator counter;
      kvq_config cfg = fp16Config(layers);
      cfg.allocator = counter.handle();
      Cache full(cfg), direct(fp16Config(layers));
      feedCalls(full.h, kvs, calls, 0, total);
      ASSERT_EQ(kvq_cache_truncate(full.h, n), KVQ_OK) << kvq_last_error();
      feedCalls(direct.h, kvs, calls, 0, n);
      expectSame(full.h, direct.h, layers);
      EXPECT_EQ(counter.live, stats(full.h, -1).total_bytes);
      // Both grow alike again: the rest in other splits than before.
      const std::vector<int64_t> again = callsOf(n + 1, {1, 66, 2}, total);
      feedCalls(full.h, kvs, again, n, total);
      feedCalls(direct.h, kvs, again, n, total);
      expectSame(full.h, direct.h, layers);
      EXPECT_EQ(counter.live, stats(full.h, -1).total_bytes);
    }
}

TEST(Fp16Pages, ForkEqualsItsSourceAndEvolvesAlike) {
  const int64_t total = 260;
  std::vector<KV> kvs = layersKV(1, total);
  for (int64_t at : {1, 63, 64, 100, 128, 130}) {
    SCOPED_TRACE(testing::Message() << "fork at " << at);
    Cache src(fp16Config());
    feedCalls(src.h, kvs, callsOf(at, {1}, at), 0, at);
    kvq_cache_t *fork = nullptr;
    ASSERT_EQ(kvq_cache_fork(src.h, &fork), KVQ_OK) << kvq_last_error();
    expectSame(src.h, fork, 1);
    // The fork grows in one call, the source token by token, and the fork
    // is cut back inside a page: neither touches the other.
    feedCalls(fork, kvs, {total}, at, total);
    feedCalls(src.h, kvs, callsOf(0, {1}, total), at, total);
    expectSame(src.h, fork, 1);
    ASSERT_EQ(kvq_cache_truncate(fork, at / 2 + 1), KVQ_OK);
    Cache cut(fp16Config());
    feedCalls(cut.h, kvs, {total}, 0, at / 2 + 1);
    expectSame(fork, cut.h, 1);
    Cache ref(fp16Config());
    feedCalls(ref.h, kvs, {total}, 0, total);
    expectSame(src.h, ref.h, 1);
    kvq_cache_destroy(fork);
  }
}

TEST(Fp16Pages, FailedRepackLeavesTheCacheUnchanged) {
  // Appends that fill the tail (63 + 1), several pages at once (40 + 150)
  // and a page plus a new tail (63 + 66): fail each allocation in turn,
  // then succeed; the result equals a cache that never failed.
  struct Case {
    int64_t before, added;
  };
  for (Case cs : {Case{63, 1}, Case{40, 150}, Case{63, 66}, Case{0, 64},
                  Case{64, 64}}) {
    SCOPED_TRACE(testing::Message() << cs.before << " + " << cs.added);
    const int64_t total = cs.before + cs.added;
    std::vector<KV> kvs = layersKV(1, total);
    CountingAllocator counter;
    kvq_config cfg = fp16Config();
    cfg.allocator = counter.handle();
    Cache c(cfg);
    feedCalls(c.h, kvs, callsOf(0, {1}, cs.before), 0, cs.before);
    const std::vector<uint8_t> before = saveBytes(c.h);
    const kvq_stats s0 = stats(c.h);
    const Fetched f0 = fetch(c.h);
    const int64_t live = counter.live;
    int64_t failures = 0;
    for (int64_t n = 1;; ++n) {
      counter.failAt = counter.calls + n;
      kvq_status s = append(c.h, kvs[0], cs.before, total);
      if (s == KVQ_OK)
        break;
      ++failures;
      ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
      EXPECT_EQ(counter.live, live);
      EXPECT_TRUE(sameStats(stats(c.h), s0));
      EXPECT_EQ(saveBytes(c.h), before);
      if (cs.before > 0) {
        const Fetched f = fetch(c.h);
        EXPECT_EQ(f.kh, f0.kh);
        EXPECT_EQ(f.vh, f0.vh);
      }
      ASSERT_LT(n, 1000);
    }
    counter.failAt = -1;
    // One page per 64 tokens reached, one block per token of the new tail.
    EXPECT_EQ(failures, total / kPage - cs.before / kPage + total % kPage);
    EXPECT_EQ(counter.live, stats(c.h).total_bytes);
    Cache ref(fp16Config());
    feedCalls(ref.h, kvs, {total}, 0, total);
    expectSame(c.h, ref.h, 1);
  }
}

TEST(Fp16Pages, FailedTruncateInsideAPageLeavesTheCacheUnchanged) {
  // Cutting inside a page returns its kept tokens to per-token blocks
  // (both layers): fail each allocation in turn, then succeed.
  const int32_t layers = 2;
  const int64_t total = 200;
  std::vector<KV> kvs = layersKV(layers, total);
  for (int64_t cut : {1, 63, 100, 129, 191}) {
    SCOPED_TRACE(testing::Message() << "cut " << cut);
    CountingAllocator counter;
    kvq_config cfg = fp16Config(layers);
    cfg.allocator = counter.handle();
    Cache c(cfg);
    feedCalls(c.h, kvs, callsOf(70, {1, 3}, total), 0, total);
    const std::vector<uint8_t> before = saveBytes(c.h);
    const int64_t live = counter.live;
    int64_t failures = 0;
    for (int64_t n = 1;; ++n) {
      counter.failAt = counter.calls + n;
      kvq_status s = kvq_cache_truncate(c.h, cut);
      if (s == KVQ_OK)
        break;
      ++failures;
      ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
      EXPECT_NE(std::string(kvq_last_error()).find("kvq_cache_truncate"),
                std::string::npos)
          << kvq_last_error();
      EXPECT_EQ(counter.live, live);
      EXPECT_EQ(saveBytes(c.h), before);
      ASSERT_LT(n, 1000);
    }
    counter.failAt = -1;
    EXPECT_EQ(failures, layers * (cut % kPage));
    EXPECT_EQ(counter.live, stats(c.h, -1).total_bytes);
    Cache ref(fp16Config(layers));
    feedCalls(ref.h, kvs, {total}, 0, cut);
    expectSame(c.h, ref.h, layers);
  }
  // A cut at a page boundary or in the tail allocates nothing.
  for (int64_t cut : {0, 64, 128, 192, 195}) {
    CountingAllocator counter;
    kvq_config cfg = fp16Config(layers);
    cfg.allocator = counter.handle();
    Cache c(cfg);
    feedCalls(c.h, kvs, {total}, 0, total);
    counter.failAt = counter.calls + 1;
    EXPECT_EQ(kvq_cache_truncate(c.h, cut), KVQ_OK) << cut;
    counter.failAt = -1;
    Cache ref(fp16Config(layers));
    feedCalls(ref.h, kvs, {total}, 0, cut);
    expectSame(c.h, ref.h, layers);
  }
}
