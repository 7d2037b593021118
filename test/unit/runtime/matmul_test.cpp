//===- matmul_test.cpp - kvq_matmul and its kernels -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The expected outputs come from this file, not from the runtime: a plain
// loop over the documented order (32 partial sums by std::fma, then the
// pairwise tree) must give the bits of every kernel table (reference, AVX2,
// AVX-512 or NEON), for every weight type and for sizes around each tile
// and chunk edge; a float64 dot product bounds the result's error. Through
// the C ABI: any thread count (a pool whose workers really run tasks
// concurrently) gives the same bits, y is accumulated into, strides are
// honoured, and bad arguments are one error that leaves y alone.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "kernels.h"
#include "matmul.h"

#include "kvq/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Weights of one type as bytes, and their exact float values.
struct Weights {
  kvq_weight_type type;
  std::vector<uint16_t> half;
  std::vector<float> f32, value;
  const void *data() const {
    return type == KVQ_WEIGHT_F32 ? static_cast<const void *>(f32.data())
                                  : static_cast<const void *>(half.data());
  }
};

Weights makeWeights(kvq_weight_type type, int64_t count, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Weights w{type, {}, {}, {}};
  w.value.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    float v = normal(rng);
    if (type == KVQ_WEIGHT_F16) {
      w.half.push_back(kvq::floatToHalf(v));
      v = kvq::halfToFloat(w.half.back());
    } else if (type == KVQ_WEIGHT_BF16) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      w.half.push_back(static_cast<uint16_t>(bits >> 16)); // truncated: exact
      bits = uint32_t(w.half.back()) << 16;
      std::memcpy(&v, &bits, 4);
    } else {
      w.f32.push_back(v);
    }
    w.value[i] = v;
  }
  return w;
}

/// The documented order, written out plainly.
float documentedDot(const float *x, const float *w, int64_t k) {
  float s[32];
  for (float &v : s)
    v = 0.0f;
  for (int64_t i = 0; i < k; ++i)
    s[i % 32] = std::fma(x[i], w[i], s[i % 32]);
  for (int half = 16; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l)
      s[l] = s[l] + s[l + half];
  return s[0];
}

double exactDot(const float *x, const float *w, int64_t k, double *mag) {
  double d = 0;
  *mag = 0;
  for (int64_t i = 0; i < k; ++i) {
    d += double(x[i]) * double(w[i]);
    *mag += std::fabs(double(x[i]) * double(w[i]));
  }
  return d;
}

struct Shape {
  int64_t m, n, k;
};

/// Sizes around every edge: k around the 32-element chunk, n around the
/// tiles (1-4 weight rows) and task quanta, m around the 4-row tiles and
/// the 32 input rows from which prefill packs its weights; in the last
/// two, f32 rows of 56 KB make each of the two pieces of 13 weight rows
/// below two of matmul_body.h's weight blocks (9 rows, then 4), read as
/// they lie and packed.
const Shape kShapes[] = {{1, 1, 1},     {1, 7, 31},     {1, 13, 32},
                         {1, 12, 33},   {1, 5, 64},     {1, 17, 172},
                         {2, 3, 1},     {3, 11, 95},    {4, 12, 96},
                         {5, 13, 100},  {9, 25, 257},   {17, 7, 64},
                         {31, 7, 40},   {32, 8, 31},    {34, 25, 257},
                         {1, 600, 512}, {5, 26, 14000}, {33, 26, 14000}};

const kvq_weight_type kTypes[] = {KVQ_WEIGHT_F32, KVQ_WEIGHT_F16,
                                  KVQ_WEIGHT_BF16};

std::string typeName(kvq_weight_type t) {
  return t == KVQ_WEIGHT_F32 ? "f32" : t == KVQ_WEIGHT_F16 ? "f16" : "bf16";
}

/// Every table this CPU runs: the reference and each SIMD variant.
std::vector<const kvq::KernelTable *> tables() {
  std::vector<const kvq::KernelTable *> out = {&kvq::referenceKernels()};
  for (const kvq::KernelTable *t : kvq::simdKernelVariants())
    out.push_back(t);
  return out;
}

TEST(Matmul, EveryTableGivesTheDocumentedOrdersBits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape &s : kShapes)
    for (kvq_weight_type type : kTypes) {
      // Strides longer than the rows: padding the kernels must skip.
      const int64_t xs = s.k + 3, ws = s.k + 5, ys = s.n + 2;
      std::vector<float> x(s.m * xs);
      for (float &v : x)
        v = normal(rng);
      Weights w = makeWeights(type, s.n * ws, rng);
      std::vector<float> init(s.m * ys);
      for (float &v : init)
        v = normal(rng);
      std::vector<float> expected = init;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          float dot = documentedDot(&x[i * xs], &w.value[j * ws], s.k);
          expected[i * ys + j] = init[i * ys + j] + dot;
          double mag;
          double exact = exactDot(&x[i * xs], &w.value[j * ws], s.k, &mag);
          // A float sum of k products is within k * 2^-24 * sum|terms|.
          ASSERT_NEAR(dot, exact, (s.k + 1) * 0x1p-24 * mag + 1e-30);
        }
      for (const kvq::KernelTable *t : tables()) {
        std::vector<float> y = init;
        kvq::MatmulArgs a{x.data(), xs,       w.data(), type, ws,
                          y.data(), ys,       s.m,      s.n,  s.k};
        // In two pieces, as tasks would split it.
        t->matmul(a, 0, s.n / 2);
        t->matmul(a, s.n / 2, s.n);
        ASSERT_EQ(0, std::memcmp(y.data(), expected.data(),
                                 y.size() * sizeof(float)))
            << t->name << " " << typeName(type) << " m " << s.m << " n "
            << s.n << " k " << s.k;
      }
    }
}

TEST(Matmul, SpecialValuesPropagateAlike) {
  // Infinities, NaN and signed zeros go through the same operations on
  // every table.
  const int64_t k = 70, n = 4;
  std::vector<float> x(k, 1.0f), w(n * k, 0.5f);
  x[3] = INFINITY;
  w[1 * k + 40] = NAN;
  w[2 * k + 3] = 0.0f; // inf * 0 = NaN
  x[65] = -0.0f;
  std::vector<float> expected(n);
  for (int64_t j = 0; j < n; ++j)
    expected[j] = 0.0f + documentedDot(x.data(), &w[j * k], k);
  EXPECT_TRUE(std::isinf(expected[0]));
  EXPECT_TRUE(std::isnan(expected[1]));
  EXPECT_TRUE(std::isnan(expected[2]));
  // Products that are all -0 sum to +0 (the partial sums start at +0).
  std::vector<float> ones(k, 1.0f), negativeZeros(k, -0.0f);
  for (const kvq::KernelTable *t : tables()) {
    std::vector<float> y(n, 0.0f);
    kvq::MatmulArgs a{x.data(), k, w.data(), KVQ_WEIGHT_F32, k,
                      y.data(), n, 1,        n,              k};
    t->matmul(a, 0, n);
    EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), n * sizeof(float)))
        << t->name;
    float z = -0.0f;
    kvq::MatmulArgs b{ones.data(), k, negativeZeros.data(), KVQ_WEIGHT_F32,
                      k,           &z, 1, 1, 1, k};
    t->matmul(b, 0, 1);
    EXPECT_EQ(0.0f, z) << t->name;
    EXPECT_FALSE(std::signbit(z)) << t->name << ": -0 + (+0) is +0";
  }
}

/// Tasks really run concurrently and in no fixed order.
struct TestPool {
  int threads = 1;
  std::atomic<int64_t> calls{0};
  static void parallelFor(void *self, int64_t n, void (*task)(void *, int64_t),
                          void *ctx) {
    auto *pool = static_cast<TestPool *>(self);
    ++pool->calls;
    std::atomic<int64_t> next{0};
    auto worker = [&] {
      for (int64_t i; (i = next++) < n;)
        task(ctx, n - 1 - i); // last task first
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

TEST(Matmul, SameBitsForAnyThreadCount) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Large enough to be split into tasks: decode, a small prefill, and one
  // whose tasks pack their weights (each thread its own buffer).
  for (Shape s : {Shape{1, 1000, 777}, Shape{6, 300, 1000},
                  Shape{40, 200, 300}})
    for (kvq_weight_type type : kTypes) {
      std::vector<float> x(s.m * s.k);
      for (float &v : x)
        v = normal(rng);
      Weights w = makeWeights(type, s.n * s.k, rng);
      std::vector<float> one(s.m * s.n, 0.0f);
      ASSERT_EQ(KVQ_OK, kvq_set_default_parallel(nullptr));
      ASSERT_EQ(KVQ_OK, kvq_matmul(x.data(), s.k, w.data(), type, s.k,
                                   one.data(), s.n, s.m, s.n, s.k));
      for (int threads : {2, 3, 8}) {
        TestPool pool;
        pool.threads = threads;
        kvq_parallel p = pool.handle();
        ASSERT_EQ(KVQ_OK, kvq_set_default_parallel(&p));
        std::vector<float> y(s.m * s.n, 0.0f);
        ASSERT_EQ(KVQ_OK, kvq_matmul(x.data(), s.k, w.data(), type, s.k,
                                     y.data(), s.n, s.m, s.n, s.k));
        ASSERT_EQ(KVQ_OK, kvq_set_default_parallel(nullptr));
        EXPECT_GT(pool.calls.load(), 0) << "the pool was not used";
        EXPECT_EQ(0, std::memcmp(y.data(), one.data(),
                                 y.size() * sizeof(float)))
            << threads << " threads, " << typeName(type);
      }
      // And the documented order.
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          ASSERT_EQ(one[i * s.n + j], 0.0f + documentedDot(&x[i * s.k],
                                                           &w.value[j * s.k],
                                                           s.k));
    }
}

TEST(Matmul, BadArgumentsAreOneErrorAndLeaveYAlone) {
  std::vector<float> x(64, 1.0f), w(64, 1.0f), y(8, 5.0f);
  const std::vector<float> before = y;
  struct Case {
    const char *what;
    kvq_status status;
    kvq_status got;
  };
  const Case cases[] = {
      {"null x", KVQ_ERR_NULL_POINTER,
       kvq_matmul(nullptr, 8, w.data(), KVQ_WEIGHT_F32, 8, y.data(), 4, 2, 4,
                  8)},
      {"null w", KVQ_ERR_NULL_POINTER,
       kvq_matmul(x.data(), 8, nullptr, KVQ_WEIGHT_F32, 8, y.data(), 4, 2, 4,
                  8)},
      {"null y", KVQ_ERR_NULL_POINTER,
       kvq_matmul(x.data(), 8, w.data(), KVQ_WEIGHT_F32, 8, nullptr, 4, 2, 4,
                  8)},
      {"negative m", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), 8, w.data(), KVQ_WEIGHT_F32, 8, y.data(), 4, -1,
                  4, 8)},
      {"short x stride", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), 7, w.data(), KVQ_WEIGHT_F32, 8, y.data(), 4, 2, 4,
                  8)},
      {"short y stride", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), 8, w.data(), KVQ_WEIGHT_F32, 8, y.data(), 3, 2, 4,
                  8)},
      {"unknown weight type", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), 8, w.data(), static_cast<kvq_weight_type>(7), 8,
                  y.data(), 4, 2, 4, 8)},
      {"misaligned f32 weights", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), 8,
                  reinterpret_cast<const char *>(w.data()) + 2,
                  KVQ_WEIGHT_F32, 8, y.data(), 4, 2, 4, 8)},
      {"overflowing extent", KVQ_ERR_INVALID_ARGUMENT,
       kvq_matmul(x.data(), INT64_MAX / 2, w.data(), KVQ_WEIGHT_F32, 8,
                  y.data(), 4, 2, 4, 8)},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(c.status, c.got) << c.what;
    EXPECT_NE(std::string(kvq_last_error()).find("kvq_matmul"),
              std::string::npos)
        << c.what << ": " << kvq_last_error();
  }
  EXPECT_EQ(before, y);
  // Empty products are no error and change nothing; k = 0 adds +0.
  EXPECT_EQ(KVQ_OK, kvq_matmul(nullptr, 0, nullptr, KVQ_WEIGHT_F32, 0, nullptr,
                               0, 0, 0, 0));
  EXPECT_EQ(KVQ_OK, kvq_matmul(nullptr, 0, nullptr, KVQ_WEIGHT_F16, 0,
                               y.data(), 4, 2, 4, 0));
  EXPECT_EQ(before, y);
}

} // namespace
