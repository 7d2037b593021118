//===- test_util.h ----------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Data generators and cache helpers for tests.
//
// Seeded, portable test data (own transforms from 64-bit uniform bits, since
// std:: distributions differ between standard libraries) and small wrappers
// around the C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_RUNTIME_TEST_UTIL_H
#define KVQ_TEST_UNIT_RUNTIME_TEST_UTIL_H

#include "kvq/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace kvqtest {

/// Deterministic generator: mt19937_64 bits with our own transforms.
class Rng {
public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  /// Uniform in (0, 1).
  double uniform() {
    return (static_cast<double>(gen_() >> 11) + 0.5) *
           (1.0 / 9007199254740992.0);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Laplace with scale b.
  double laplace(double b = 1.0) {
    double u = uniform() - 0.5;
    double s = u < 0 ? -1.0 : 1.0;
    return -b * s * std::log(1.0 - 2.0 * std::fabs(u));
  }

private:
  std::mt19937_64 gen_;
};

/// Portable float -> fp16 bits for test inputs: via the runtime's own
/// group quantization would be circular, so tests use this small reference
/// (round to nearest even through double arithmetic).
inline uint16_t toHalf(float f) {
  // Exhaustively checked against the runtime in fp16_pack_test.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f))
    return sign | 0x7e00;
  if (a >= 65520.0)
    return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {
    double q = std::nearbyint(a / std::ldexp(1.0, -24));
    return sign | static_cast<uint16_t>(q);
  }
  int e;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  double unit = std::ldexp(1.0, e - 11);
  double q = std::nearbyint(a / unit) * unit; // 11 significant bits
  int e2;
  double m2 = std::frexp(q, &e2);
  uint16_t exp = static_cast<uint16_t>(e2 - 1 + 15);
  uint16_t mant = static_cast<uint16_t>(std::ldexp(m2, 11)) & 0x3ff;
  return sign | static_cast<uint16_t>(exp << 10) | mant;
}

inline float fromHalf(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}

/// Tokens of [tokens, heads, dim] f32 data, already fp16-representable.
struct KV {
  int64_t tokens = 0;
  int heads = 0, dim = 0;
  std::vector<float> k, v;
  int64_t channels() const { return int64_t{heads} * dim; }
  float *krow(int64_t t) { return k.data() + t * channels(); }
  float *vrow(int64_t t) { return v.data() + t * channels(); }
};

/// K/V whose elements `draw(rng)` gives in the order k[0], v[0], k[1], ...,
/// rounded to fp16 so comparisons with fp16 storage are exact.
template <class Draw>
KV randomKV(uint64_t seed, int64_t tokens, int heads, int dim, Draw draw) {
  Rng rng(seed);
  KV kv;
  kv.tokens = tokens;
  kv.heads = heads;
  kv.dim = dim;
  kv.k.resize(static_cast<size_t>(tokens * heads * dim));
  kv.v.resize(kv.k.size());
  for (size_t i = 0; i < kv.k.size(); ++i) {
    kv.k[i] = fromHalf(toHalf(static_cast<float>(draw(rng))));
    kv.v[i] = fromHalf(toHalf(static_cast<float>(draw(rng))));
  }
  return kv;
}

/// Gaussian K/V, fp16-representable.
inline KV gaussianKV(uint64_t seed, int64_t tokens, int heads, int dim) {
  return randomKV(seed, tokens, heads, dim, [](Rng &r) { return r.normal(); });
}

/// Laplacian K/V (heavy-ish tails), fp16-representable.
inline KV laplaceKV(uint64_t seed, int64_t tokens, int heads, int dim) {
  return randomKV(seed, tokens, heads, dim, [](Rng &r) { return r.laplace(); });
}

inline kvq_config config(kvq_method method, int heads, int dim) {
  kvq_config c;
  kvq_config_init(&c, method);
  c.num_kv_heads = heads;
  c.head_dim = dim;
  return c;
}

/// Counts live payload bytes; can be told to fail the Nth allocation.
struct CountingAllocator {
  int64_t live = 0, calls = 0, failAt = -1;
  static void *alloc(void *user, size_t size) {
    auto *self = static_cast<CountingAllocator *>(user);
    if (++self->calls == self->failAt)
      return nullptr;
    self->live += static_cast<int64_t>(size);
    return std::malloc(size);
  }
  static void release(void *user, void *p, size_t size) {
    static_cast<CountingAllocator *>(user)->live -= static_cast<int64_t>(size);
    std::free(p);
  }
  kvq_allocator handle() { return {&alloc, &release, this}; }
};

/// Owning cache handle.
struct Cache {
  kvq_cache_t *h = nullptr;
  explicit Cache(const kvq_config &c) {
    EXPECT_EQ(kvq_cache_create(&c, &h), KVQ_OK) << kvq_last_error();
  }
  ~Cache() { kvq_cache_destroy(h); }
  Cache(const Cache &) = delete;
  Cache &operator=(const Cache &) = delete;
};

/// Append tokens [from, to) of kv to layer.
inline kvq_status append(kvq_cache_t *c, const KV &kv, int64_t from, int64_t to,
                         int32_t layer = 0) {
  return kvq_cache_update(c, layer, kv.k.data() + from * kv.channels(),
                          kv.v.data() + from * kv.channels(), to - from,
                          KVQ_DTYPE_F32);
}

/// Prefill [0, prefill) then one token per update.
inline void feed(kvq_cache_t *c, const KV &kv, int64_t prefill) {
  ASSERT_EQ(append(c, kv, 0, prefill), KVQ_OK) << kvq_last_error();
  for (int64_t t = prefill; t < kv.tokens; ++t)
    ASSERT_EQ(append(c, kv, t, t + 1), KVQ_OK) << kvq_last_error();
}

/// n query steps of qHeads heads x d standard-normal floats from seed.
inline std::vector<float> randomQueries(uint64_t seed, int64_t n, int qHeads,
                                        int d) {
  Rng rng(seed);
  std::vector<float> q(static_cast<size_t>(n * qHeads * d));
  for (float &x : q)
    x = static_cast<float>(rng.normal());
  return q;
}

/// kvq_cache_attend of the n query steps q ([n, qHeads, d]) on layer.
inline std::vector<float> attendQueries(const kvq_cache_t *c, int32_t layer,
                                        const std::vector<float> &q, int64_t n,
                                        int qHeads) {
  std::vector<float> out(q.size());
  EXPECT_EQ(kvq_cache_attend(c, layer, q.data(), n, qHeads, out.data()), KVQ_OK)
      << kvq_last_error();
  return out;
}

struct Fetched {
  std::vector<float> k, v;
  std::vector<uint16_t> kh, vh;
};

inline Fetched fetch(const kvq_cache_t *c, int32_t layer = 0) {
  Fetched f;
  int64_t n = 0;
  EXPECT_EQ(kvq_cache_length(c, layer, &n), KVQ_OK);
  kvq_stats s;
  EXPECT_EQ(kvq_cache_stats(c, layer, &s), KVQ_OK);
  int64_t elems = s.fp16_bytes / 4; // tokens * channels
  f.k.resize(static_cast<size_t>(elems));
  f.v.resize(f.k.size());
  f.kh.resize(f.k.size());
  f.vh.resize(f.k.size());
  if (n > 0) {
    EXPECT_EQ(
        kvq_cache_fetch(c, layer, f.k.data(), f.v.data(), n, KVQ_DTYPE_F32),
        KVQ_OK);
    EXPECT_EQ(
        kvq_cache_fetch(c, layer, f.kh.data(), f.vh.data(), n, KVQ_DTYPE_F16),
        KVQ_OK);
  }
  return f;
}

inline kvq_stats stats(const kvq_cache_t *c, int32_t layer = 0) {
  kvq_stats s;
  std::memset(&s, 0, sizeof(s));
  EXPECT_EQ(kvq_cache_stats(c, layer, &s), KVQ_OK);
  return s;
}

inline bool sameStats(const kvq_stats &a, const kvq_stats &b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

inline std::vector<int64_t> sinks(const kvq_cache_t *c, int32_t layer = 0) {
  int64_t count = 0;
  EXPECT_EQ(kvq_cache_sink_positions(c, layer, nullptr, 0, &count), KVQ_OK);
  std::vector<int64_t> p(static_cast<size_t>(count));
  if (count)
    EXPECT_EQ(kvq_cache_sink_positions(c, layer, p.data(), count, &count),
              KVQ_OK);
  return p;
}

inline double mse(const std::vector<float> &a, const std::vector<float> &b,
                  int64_t from = 0, int64_t to = -1) {
  if (to < 0)
    to = static_cast<int64_t>(a.size());
  double s = 0;
  for (int64_t i = from; i < to; ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return to > from ? s / static_cast<double>(to - from) : 0.0;
}

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_RUNTIME_TEST_UTIL_H
