//===- cache_test.cpp - Cache lifecycle, bad input, allocator, attend -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Configuration statuses, failed calls leaving the cache exactly unchanged,
// payload bytes equal to what the allocator handed out, allocation failure at
// every call, decode attention against attention on fetched K/V, and
// separate caches on separate threads.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <cstdlib>
#include <cstring>
#include <thread>

using namespace kvqtest;

namespace {

const kvq_method kMethods[] = {KVQ_METHOD_FP16, KVQ_METHOD_KIVI,
                               KVQ_METHOD_KIVI_SINK, KVQ_METHOD_KVQUANT};

struct Snapshot {
  Fetched f;
  kvq_stats s;
  bool operator==(const Snapshot &o) const {
    return f.kh == o.f.kh && f.vh == o.f.vh && sameStats(s, o.s);
  }
};

Snapshot snapshot(const kvq_cache_t *c) { return {fetch(c), stats(c, -1)}; }

kvq_config small(kvq_method m) {
  kvq_config c = config(m, 2, 32);
  c.group_size = 16;
  c.residual_length = 16;
  c.num_layers = 2;
  return c;
}

} // namespace

TEST(CacheConfig, EachProblemHasItsOwnStatus) {
  kvq_cache_t *h = nullptr;
  kvq_config c = small(KVQ_METHOD_KIVI);
  EXPECT_EQ(kvq_cache_create(nullptr, &h), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_cache_create(&c, nullptr), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_config_validate(nullptr), KVQ_ERR_NULL_POINTER);
  EXPECT_EQ(kvq_config_validate(&c), KVQ_OK);
  auto expect = [&](kvq_config bad, kvq_status status, const char *word) {
    EXPECT_EQ(kvq_config_validate(&bad), status) << word;
    EXPECT_EQ(kvq_cache_create(&bad, &h), status) << word;
    EXPECT_EQ(h, nullptr);
    EXPECT_NE(std::string(kvq_last_error()).find(word), std::string::npos)
        << kvq_last_error();
  };
  kvq_config b = c;
  b.method = 9;
  expect(b, KVQ_ERR_UNKNOWN_METHOD, "method");
  b = c;
  b.key_bits = 5;
  expect(b, KVQ_ERR_UNSUPPORTED_BITS, "2, 3, 4 and 8");
  b = c;
  b.value_bits = 1;
  expect(b, KVQ_ERR_UNSUPPORTED_BITS, "value_bits");
  b = c;
  b.group_size = 12;
  expect(b, KVQ_ERR_BAD_GROUP_SIZE, "does not divide");
  b = c;
  b.num_layers = 0;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "num_layers");
  b = c;
  b.n_sink_tokens = 3;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "kivi_sink");
  b = c;
  b.residual_mode = 4;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "residual_mode");
  b = c;
  b.backend = KVQ_BACKEND_METAL;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "backend");
  b = c;
  b.allocator.alloc = &CountingAllocator::alloc;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "allocator");
  b = small(KVQ_METHOD_KVQUANT);
  b.outlier_fraction = 1.0f;
  expect(b, KVQ_ERR_INVALID_ARGUMENT, "outlier_fraction");
  // fp16 ignores the quantization fields.
  b = small(KVQ_METHOD_FP16);
  b.key_bits = 7;
  EXPECT_EQ(kvq_config_validate(&b), KVQ_OK);
  // Defaults are the seeds', but for kvquant's refit_interval (the seeds'
  // 0 freezes key levels that post-RoPE decode keys leave; docs/RUNTIME.md).
  kvq_config d;
  kvq_config_init(&d, KVQ_METHOD_KIVI_SINK);
  EXPECT_EQ(d.key_bits, 2);
  EXPECT_EQ(d.group_size, 32);
  EXPECT_EQ(d.residual_length, 32);
  EXPECT_EQ(d.n_sink_tokens, 5);
  kvq_config_init(&d, KVQ_METHOD_KVQUANT);
  EXPECT_EQ(d.key_bits, 3);
  EXPECT_EQ(d.lloyd_iters, 8);
  EXPECT_EQ(d.kvquant_n_sink, 1);
  EXPECT_FLOAT_EQ(d.outlier_fraction, 0.01f);
  EXPECT_EQ(d.refit_interval, 128);
  EXPECT_EQ(KVQ_DEFAULT_REFIT_INTERVAL, 128);
  kvq_config_init(&d, KVQ_METHOD_KIVI); // same value for every method
  EXPECT_EQ(d.refit_interval, KVQ_DEFAULT_REFIT_INTERVAL);
  kvq_config_init(nullptr, KVQ_METHOD_KIVI); // no-op
}

class CacheBadInput : public ::testing::TestWithParam<kvq_method> {};

TEST_P(CacheBadInput, EveryFailedCallLeavesTheCacheUnchanged) {
  kvq_config c = small(GetParam());
  Cache cache(c);
  KV kv = gaussianKV(1, 50, 2, 32);
  feed(cache.h, kv, 40);
  ASSERT_EQ(append(cache.h, kv, 0, 20, 1), KVQ_OK);
  const Snapshot before = snapshot(cache.h);
  auto check = [&](kvq_status got, kvq_status want, const char *what) {
    EXPECT_EQ(got, want) << what;
    EXPECT_STRNE(kvq_last_error(), "") << what;
    EXPECT_TRUE(snapshot(cache.h) == before) << what;
  };
  std::vector<float> k(kv.k.begin(), kv.k.begin() + 3 * 64),
      v(kv.v.begin(), kv.v.begin() + 3 * 64);
  check(kvq_cache_update(nullptr, 0, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_NULL_POINTER, "null cache");
  check(kvq_cache_update(cache.h, 0, nullptr, v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_NULL_POINTER, "null keys");
  check(kvq_cache_update(cache.h, 0, k.data(), nullptr, 3, KVQ_DTYPE_F32),
        KVQ_ERR_NULL_POINTER, "null values");
  check(kvq_cache_update(cache.h, 2, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_LAYER_OUT_OF_RANGE, "layer 2");
  check(kvq_cache_update(cache.h, -1, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_LAYER_OUT_OF_RANGE, "layer -1");
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), 0, KVQ_DTYPE_F32),
        KVQ_ERR_EMPTY_INPUT, "zero tokens");
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), -2, KVQ_DTYPE_F32),
        KVQ_ERR_INVALID_ARGUMENT, "negative tokens");
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), 3,
                         static_cast<kvq_dtype>(3)),
        KVQ_ERR_INVALID_ARGUMENT, "dtype");
  k.back() = NAN;
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_NON_FINITE, "NaN key");
  k.back() = 0.5f;
  v[70] = -INFINITY;
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_NON_FINITE, "-inf value");
  v[70] = 70000.0f; // finite, but not an fp16 value
  check(kvq_cache_update(cache.h, 0, k.data(), v.data(), 3, KVQ_DTYPE_F32),
        KVQ_ERR_NON_FINITE, "beyond fp16");
  std::vector<uint16_t> kh(3 * 64, 0x3c00), vh(3 * 64, 0x3c00);
  vh[5] = 0x7e00; // fp16 NaN
  check(kvq_cache_update(cache.h, 1, kh.data(), vh.data(), 3, KVQ_DTYPE_F16),
        KVQ_ERR_NON_FINITE, "fp16 NaN");
  std::vector<float> out(64 * 64), out2(64 * 64);
  check(kvq_cache_fetch(cache.h, 0, out.data(), out2.data(), 49, KVQ_DTYPE_F32),
        KVQ_ERR_BUFFER_TOO_SMALL, "capacity");
  check(kvq_cache_fetch(cache.h, 5, out.data(), out2.data(), 64, KVQ_DTYPE_F32),
        KVQ_ERR_LAYER_OUT_OF_RANGE, "fetch layer");
  check(kvq_cache_fetch(cache.h, 0, nullptr, out2.data(), 64, KVQ_DTYPE_F32),
        KVQ_ERR_NULL_POINTER, "fetch null");
  kvq_stats s;
  check(kvq_cache_stats(cache.h, 3, &s), KVQ_ERR_LAYER_OUT_OF_RANGE,
        "stats layer");
  check(kvq_cache_stats(cache.h, 0, nullptr), KVQ_ERR_NULL_POINTER,
        "stats null");
  int64_t n;
  check(kvq_cache_length(cache.h, 2, &n), KVQ_ERR_LAYER_OUT_OF_RANGE,
        "length layer");
  check(kvq_cache_sink_positions(cache.h, 0, nullptr, 4, &n),
        KVQ_ERR_NULL_POINTER, "sink positions null");
  // Each failure also left the fetch output buffers alone.
  EXPECT_TRUE(
      std::all_of(out.begin(), out.end(), [](float f) { return f == 0.0f; }));
  // f16 input equals f32 input of the same values.
  std::vector<float> k32(3 * 64, 1.0f), v32(3 * 64, 1.0f);
  vh[5] = 0x3c00;
  Cache c16(c), c32(c);
  ASSERT_EQ(kvq_cache_update(c16.h, 0, kh.data(), vh.data(), 3, KVQ_DTYPE_F16),
            KVQ_OK);
  ASSERT_EQ(
      kvq_cache_update(c32.h, 0, k32.data(), v32.data(), 3, KVQ_DTYPE_F32),
      KVQ_OK);
  EXPECT_TRUE(snapshot(c16.h) == snapshot(c32.h));
}

// A K/V buffer that is not aligned to its elements (an fp16 buffer at an
// odd address, an f32 one at 2 mod 4) is refused by update and fetch with
// a message naming it, and the cache and the caller's buffers are left as
// they were; the same values, aligned, are accepted.
TEST_P(CacheBadInput, MisalignedBuffersAreRefusedAndChangeNothing) {
  const kvq_config c = small(GetParam());
  const KV kv = gaussianKV(41, 40, 2, 32);
  const int64_t C = kv.channels();
  Cache cache(c);
  ASSERT_EQ(append(cache.h, kv, 0, 30), KVQ_OK) << kvq_last_error();
  const Snapshot before = snapshot(cache.h);
  std::vector<uint16_t> kh(static_cast<size_t>(10 * C));
  for (size_t i = 0; i < kh.size(); ++i)
    kh[i] = toHalf(kv.k[static_cast<size_t>(30 * C) + i]);
  std::vector<uint8_t> raw(static_cast<size_t>(10 * C * 4 + 16));
  uint8_t *base =
      raw.data() + (8 - reinterpret_cast<uintptr_t>(raw.data()) % 8);
  std::memcpy(base + 1, kh.data(), kh.size() * 2); // fp16 at an odd address
  std::memcpy(base + 2, kv.k.data() + 30 * C, 10 * C * 4); // f32 at 2 mod 4
  const std::vector<uint8_t> rawBefore = raw;
  struct Bad {
    const void *k, *v;
    kvq_dtype dtype;
    const char *name;
  };
  const uint16_t *alignedH = kh.data();
  for (const Bad &b : {Bad{base + 1, alignedH, KVQ_DTYPE_F16, "keys"},
                       Bad{alignedH, base + 1, KVQ_DTYPE_F16, "values"},
                       Bad{base + 2, base + 2, KVQ_DTYPE_F32, "keys"}}) {
    EXPECT_EQ(kvq_cache_update(cache.h, 0, b.k, b.v, 10, b.dtype),
              KVQ_ERR_INVALID_ARGUMENT);
    const std::string msg = kvq_last_error();
    EXPECT_NE(msg.find(b.name), std::string::npos) << msg;
    EXPECT_NE(msg.find("aligned"), std::string::npos) << msg;
  }
  std::vector<uint8_t> out(static_cast<size_t>(64 * C * 4 + 8));
  EXPECT_EQ(kvq_cache_fetch(cache.h, 0, out.data() + 1, out.data() + 1, 64,
                            KVQ_DTYPE_F16),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvq_last_error()).find("keys_out"), std::string::npos);
  EXPECT_TRUE(
      std::all_of(out.begin(), out.end(), [](uint8_t x) { return x == 0; }));
  EXPECT_TRUE(snapshot(cache.h) == before);
  EXPECT_EQ(raw, rawBefore);
  ASSERT_EQ(kvq_cache_update(cache.h, 0, alignedH, alignedH, 10, KVQ_DTYPE_F16),
            KVQ_OK)
      << kvq_last_error();
}

TEST_P(CacheBadInput, PayloadBytesEqualWhatTheAllocatorHandedOut) {
  CountingAllocator counter;
  kvq_config c = small(GetParam());
  c.allocator = counter.handle();
  {
    Cache cache(c);
    KV kv = gaussianKV(2, 120, 2, 32);
    ASSERT_EQ(append(cache.h, kv, 0, 37), KVQ_OK);
    EXPECT_EQ(stats(cache.h, -1).total_bytes, counter.live);
    for (int64_t t = 37; t < 120; ++t) {
      ASSERT_EQ(append(cache.h, kv, t, t + 1), KVQ_OK);
      ASSERT_EQ(stats(cache.h, -1).total_bytes, counter.live) << "t " << t;
    }
    ASSERT_EQ(append(cache.h, kv, 0, 90, 1), KVQ_OK);
    kvq_stats all = stats(cache.h, -1), l0 = stats(cache.h, 0),
              l1 = stats(cache.h, 1);
    EXPECT_EQ(all.total_bytes, counter.live);
    EXPECT_EQ(all.total_bytes, l0.total_bytes + l1.total_bytes);
    EXPECT_EQ(all.tokens, 210);
  }
  EXPECT_EQ(counter.live, 0); // destroy released everything
}

TEST_P(CacheBadInput, AllocationFailureAtAnyCallLeavesTheCacheUnchanged) {
  CountingAllocator counter;
  kvq_config c = small(GetParam());
  c.refit_interval = GetParam() == KVQ_METHOD_KVQUANT ? 4 : 0;
  c.allocator = counter.handle();
  Cache cache(c);
  KV kv = gaussianKV(3, 80, 2, 32);
  feed(cache.h, kv, 47);
  int failures = 0;
  // Failing the Nth allocation of a prefill (another layer) and of a decode
  // step that flushes a key group.
  for (int layerCase = 0; layerCase < 2; ++layerCase) {
    const int32_t layer = layerCase;
    const int64_t from = layerCase ? 0 : 79, to = layerCase ? 60 : 80;
    if (!layerCase)
      ASSERT_EQ(append(cache.h, kv, 47, 79), KVQ_OK);
    for (int64_t n = 1;; ++n) {
      const Snapshot before = snapshot(cache.h);
      const int64_t live = counter.live;
      counter.calls = 0;
      counter.failAt = n;
      kvq_status s = append(cache.h, kv, from, to, layer);
      counter.failAt = -1;
      if (s == KVQ_OK)
        break;
      ++failures;
      ASSERT_EQ(s, KVQ_ERR_OUT_OF_MEMORY) << kvq_last_error();
      ASSERT_TRUE(snapshot(cache.h) == before) << "n " << n;
      ASSERT_EQ(counter.live, live) << "n " << n;
    }
  }
  EXPECT_GT(failures, 1);
  EXPECT_EQ(stats(cache.h, -1).total_bytes, counter.live);
}

INSTANTIATE_TEST_SUITE_P(Methods, CacheBadInput, ::testing::ValuesIn(kMethods));

namespace {
/// Causal GQA attention of the last n queries over fetched K/V.
std::vector<float> referenceAttention(const Fetched &f, int64_t length,
                                      const std::vector<float> &q, int64_t nq,
                                      int qHeads, int kvHeads, int d) {
  std::vector<float> out(nq * qHeads * d);
  const int64_t C = int64_t{kvHeads} * d;
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t pos = length - nq + i;
    for (int h = 0; h < qHeads; ++h) {
      const int kvh = h / (qHeads / kvHeads);
      std::vector<double> w(pos + 1);
      double mx = -1e300;
      for (int64_t t = 0; t <= pos; ++t) {
        double dot = 0;
        for (int j = 0; j < d; ++j)
          dot += double(q[(i * qHeads + h) * d + j]) * f.k[t * C + kvh * d + j];
        w[t] = dot / std::sqrt(double(d));
        mx = std::max(mx, w[t]);
      }
      double sum = 0;
      for (double &x : w)
        sum += (x = std::exp(x - mx));
      for (int j = 0; j < d; ++j) {
        double o = 0;
        for (int64_t t = 0; t <= pos; ++t)
          o += w[t] * f.v[t * C + kvh * d + j];
        out[(i * qHeads + h) * d + j] = static_cast<float>(o / sum);
      }
    }
  }
  return out;
}
} // namespace

TEST(CacheAttend, MatchesAttentionOnFetchedKV) {
  for (kvq_method m : kMethods) {
    kvq_config c = small(m);
    Cache cache(c);
    KV kv = gaussianKV(4, 90, 2, 32);
    feed(cache.h, kv, 70);
    Fetched f = fetch(cache.h);
    Rng rng(5);
    const int qHeads = 4;
    const int64_t nq = 3;
    std::vector<float> q(nq * qHeads * 32), out(q.size());
    for (float &x : q)
      x = static_cast<float>(rng.normal());
    ASSERT_EQ(kvq_cache_attend(cache.h, 0, q.data(), nq, qHeads, out.data()),
              KVQ_OK);
    std::vector<float> ref = referenceAttention(f, 90, q, nq, qHeads, 2, 32);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])))
          << "method " << m << " element " << i;
  }
}

TEST(CacheAttend, BadArguments) {
  Cache cache(small(KVQ_METHOD_KIVI));
  KV kv = gaussianKV(6, 10, 2, 32);
  ASSERT_EQ(append(cache.h, kv, 0, 10), KVQ_OK);
  std::vector<float> q(11 * 4 * 32, 0.1f), out(q.size(), -3.0f);
  EXPECT_EQ(kvq_cache_attend(cache.h, 0, q.data(), 1, 3, out.data()),
            KVQ_ERR_SHAPE_MISMATCH);
  EXPECT_EQ(kvq_cache_attend(cache.h, 0, q.data(), 11, 4, out.data()),
            KVQ_ERR_SHAPE_MISMATCH);
  EXPECT_EQ(kvq_cache_attend(cache.h, 0, q.data(), 0, 4, out.data()),
            KVQ_ERR_EMPTY_INPUT);
  EXPECT_EQ(kvq_cache_attend(cache.h, 2, q.data(), 1, 4, out.data()),
            KVQ_ERR_LAYER_OUT_OF_RANGE);
  EXPECT_EQ(kvq_cache_attend(cache.h, 0, nullptr, 1, 4, out.data()),
            KVQ_ERR_NULL_POINTER);
  q[3] = NAN;
  EXPECT_EQ(kvq_cache_attend(cache.h, 0, q.data(), 1, 4, out.data()),
            KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(
      std::all_of(out.begin(), out.end(), [](float f) { return f == -3.0f; }));
}

TEST(CacheThreads, SeparateCachesOnSeparateThreads) {
  KV kv = gaussianKV(7, 200, 2, 32);
  // Each run records its first failing status; a run that fails compares
  // as failed, never as two equal empty snapshots.
  auto work = [&](kvq_method m, Snapshot *out, kvq_status *status) {
    kvq_config c = small(m);
    Cache cache(c);
    *status = KVQ_OK;
    for (int64_t t = 0; t < kv.tokens && *status == KVQ_OK; t += 7)
      *status = append(cache.h, kv, t, std::min<int64_t>(t + 7, kv.tokens));
    *out = snapshot(cache.h);
  };
  Snapshot serial[4], parallel[4];
  kvq_status serialStatus[4], parallelStatus[4];
  for (int i = 0; i < 4; ++i)
    work(kMethods[i], &serial[i], &serialStatus[i]);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back(work, kMethods[i], &parallel[i], &parallelStatus[i]);
  for (auto &t : threads)
    t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(serialStatus[i], KVQ_OK) << "method " << i;
    EXPECT_EQ(parallelStatus[i], KVQ_OK) << "method " << i;
    EXPECT_EQ(parallel[i].s.tokens, kv.tokens) << "method " << i;
    EXPECT_EQ(static_cast<int64_t>(parallel[i].f.k.size()),
              kv.tokens * kv.channels())
        << "method " << i;
    EXPECT_TRUE(serial[i] == parallel[i]) << "method " << i;
  }
}

class CacheInput : public ::testing::TestWithParam<kvq_method> {};

TEST_P(CacheInput, F32InputStoresWhatItsFp16RoundingStores) {
  // One cache fed f32 values that fp16 does not represent (rounded by
  // kvq_cache_update), one fed the reference rounding of the same values as
  // fp16: the same cache, through a prefill larger than the per-thread
  // conversion buffer (8 x 128 channels, 300 tokens), single tokens and a
  // 64-token call.
  kvq_config c = config(GetParam(), 8, 128);
  Cache a(c), b(c);
  const int64_t C = 8 * 128, T = 300 + 40 + 64;
  Rng rng(31);
  std::vector<float> k(static_cast<size_t>(T * C)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(rng.normal());
    v[i] = static_cast<float>(rng.laplace() * 3);
  }
  std::vector<uint16_t> kh(k.size()), vh(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    kh[i] = toHalf(k[i]);
    vh[i] = toHalf(v[i]);
  }
  auto feedBoth = [&](int64_t from, int64_t n) {
    ASSERT_EQ(kvq_cache_update(a.h, 0, &k[from * C], &v[from * C], n,
                               KVQ_DTYPE_F32),
              KVQ_OK)
        << kvq_last_error();
    ASSERT_EQ(kvq_cache_update(b.h, 0, &kh[from * C], &vh[from * C], n,
                               KVQ_DTYPE_F16),
              KVQ_OK)
        << kvq_last_error();
  };
  feedBoth(0, 300);
  for (int64_t t = 300; t < 340; ++t)
    feedBoth(t, 1);
  feedBoth(340, 64);
  EXPECT_TRUE(snapshot(a.h) == snapshot(b.h));
}

INSTANTIATE_TEST_SUITE_P(Methods, CacheInput, ::testing::ValuesIn(kMethods));
