//===- metal_test_util.h - Shared helpers of the Metal tests ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Seeded matrices in fp16 or f32 (with planted constant groups, outliers and
// ties), masks, the context under test, and the CPU-vs-Metal cache check.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_METAL_TEST_UTIL_H
#define KVQ_TEST_UNIT_METAL_TEST_UTIL_H

#include "kvq/runtime.h"
#include "kvq/runtime_metal.h"
#include "runtime/test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvqmetaltest {

inline void *ctx() { return kvq_metal_default_context(); }

/// A [rows, cols] matrix of fp16 bits or floats, as raw bytes.
struct Matrix {
  int64_t rows = 0, cols = 0;
  kvq_dtype dtype = KVQ_DTYPE_F32;
  std::vector<uint8_t> bytes;
  const void *data() const { return bytes.data(); }
  void *data() { return bytes.data(); }
  float get(int64_t i) const {
    if (dtype == KVQ_DTYPE_F16) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      return kvqtest::fromHalf(h);
    }
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  void set(int64_t i, float v) {
    if (dtype == KVQ_DTYPE_F16) {
      uint16_t h = kvqtest::toHalf(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
};

/// Laplace-ish data with a few large outliers and some repeated values.
inline Matrix randomMatrix(int64_t rows, int64_t cols, kvq_dtype dtype,
                           uint64_t seed) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = dtype;
  m.bytes.resize(rows * cols * (dtype == KVQ_DTYPE_F16 ? 2 : 4));
  kvqtest::Rng rng(seed);
  for (int64_t i = 0; i < rows * cols; ++i) {
    double v = rng.laplace(1.5);
    if (rng.uniform() < 0.02)
      v *= 40.0; // outliers
    if (rng.uniform() < 0.05)
      v = 0.5 * static_cast<int>(rng.uniform(-4, 4)); // ties
    m.set(i, static_cast<float>(v));
  }
  return m;
}

/// Make every 5th vector constant (max == min), the documented edge case.
inline void plantConstantGroups(Matrix &m, kvq_axis axis, int64_t group) {
  const int64_t vectors = m.rows * m.cols / group;
  for (int64_t v = 0; v < vectors; v += 5) {
    for (int64_t i = 0; i < group; ++i) {
      int64_t e;
      if (axis == KVQ_AXIS_PER_TOKEN) {
        int64_t perRow = m.cols / group;
        e = (v / perRow) * m.cols + (v % perRow) * group + i;
      } else {
        e = (v / m.cols) * group * m.cols + v % m.cols + i * m.cols;
      }
      m.set(e, 1.25f);
    }
  }
}

/// n bytes, each 1 with probability p.
inline std::vector<uint8_t> randomMask(int64_t n, double p, uint64_t seed) {
  kvqtest::Rng rng(seed);
  std::vector<uint8_t> mask(n);
  for (auto &b : mask)
    b = rng.uniform() < p ? 1 : 0;
  return mask;
}

/// A Metal cache of configuration c (its backend field is ignored).
inline kvq_metal_cache_t *metalCache(const kvq_config &c) {
  kvq_metal_cache_t *m = nullptr;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_create_flat(
                        c.method, c.key_bits, c.value_bits, c.group_size,
                        c.residual_length, c.residual_mode, c.n_sink_tokens,
                        c.outlier_fraction, c.lloyd_iters, c.refit_interval,
                        c.kvquant_n_sink, c.kvquant_group_size, c.num_layers,
                        c.num_kv_heads, c.head_dim, KVQ_BACKEND_METAL,
                        c.rope_style, c.rope_theta, &m))
      << kvq_last_error();
  return m;
}

/// Owning Metal cache handle.
struct MetalHandle {
  kvq_metal_cache_t *h = nullptr;
  ~MetalHandle() { kvq_metal_cache_destroy(h); }
};

/// Requires the CPU cache and the Metal cache fed the same updates to agree:
/// the same length, bit-identical fetch (f16 and f32), every stats field of
/// the layer and of the whole cache, the same sink positions, and attention
/// of a GQA batch within 2e-5 of the output scale (the CPU sums in double).
inline void expectCachesMatch(kvq_cache_t *cpu, kvq_metal_cache_t *gpu,
                              int layer, int32_t kvHeads, int32_t headDim,
                              uint64_t seed) {
  const int64_t channels = int64_t{kvHeads} * headDim;
  int64_t lc = -1, lg = -2;
  ASSERT_EQ(KVQ_OK, kvq_cache_length(cpu, layer, &lc));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_length(gpu, layer, &lg));
  ASSERT_EQ(lc, lg);
  for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
    const size_t bytes = lc * channels * (dtype == KVQ_DTYPE_F16 ? 2 : 4);
    std::vector<uint8_t> kc(bytes + 1, 1), vc(bytes + 1, 1), kg(bytes + 1, 1),
        vg(bytes + 1, 1);
    ASSERT_EQ(KVQ_OK,
              kvq_cache_fetch(cpu, layer, kc.data(), vc.data(), lc, dtype));
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_fetch(gpu, layer, kg.data(), vg.data(),
                                            lc, dtype))
        << kvq_last_error();
    EXPECT_EQ(kc, kg) << "keys, dtype " << dtype << ", length " << lc;
    EXPECT_EQ(vc, vg) << "values, dtype " << dtype << ", length " << lc;
  }
  for (int l : {layer, -1}) {
    kvq_stats a, b;
    ASSERT_EQ(KVQ_OK, kvq_cache_stats(cpu, l, &a));
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_stats(gpu, l, &b));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.compressed_tokens, b.compressed_tokens);
    EXPECT_EQ(a.sink_tokens, b.sink_tokens);
    EXPECT_EQ(a.residual_tokens, b.residual_tokens);
    EXPECT_EQ(a.code_bytes, b.code_bytes);
    EXPECT_EQ(a.scale_zero_bytes, b.scale_zero_bytes);
    EXPECT_EQ(a.level_table_bytes, b.level_table_bytes);
    EXPECT_EQ(a.outlier_bytes, b.outlier_bytes);
    EXPECT_EQ(a.outlier_count, b.outlier_count);
    EXPECT_EQ(a.sink_bytes, b.sink_bytes);
    EXPECT_EQ(a.residual_bytes, b.residual_bytes);
    EXPECT_EQ(a.total_bytes, b.total_bytes);
    EXPECT_EQ(a.fp16_bytes, b.fp16_bytes);
    EXPECT_EQ(a.effective_bits, b.effective_bits);
  }
  int64_t nc = 0, ng = 0;
  std::vector<int64_t> pc(64, -1), pg(64, -1);
  ASSERT_EQ(KVQ_OK, kvq_cache_sink_positions(cpu, layer, pc.data(), 64, &nc));
  ASSERT_EQ(KVQ_OK,
            kvq_metal_cache_sink_positions(gpu, layer, pg.data(), 64, &ng));
  EXPECT_EQ(nc, ng);
  EXPECT_EQ(pc, pg);

  // Attention: a batch of the last few positions, grouped-query heads.
  const int64_t nq = std::min<int64_t>(3, lc);
  const int32_t qHeads = 2 * kvHeads;
  const int64_t elems = nq * qHeads * headDim;
  std::vector<float> q(elems), oc(elems), og(elems);
  kvqtest::Rng rng(seed);
  for (auto &x : q)
    x = static_cast<float>(rng.normal());
  ASSERT_EQ(KVQ_OK,
            kvq_cache_attend(cpu, layer, q.data(), nq, qHeads, oc.data()));
  ASSERT_EQ(KVQ_OK,
            kvq_metal_cache_attend(gpu, layer, q.data(), nq, qHeads, og.data()))
      << kvq_last_error();
  float scale = 0;
  for (float x : oc)
    scale = std::max(scale, std::fabs(x));
  for (int64_t i = 0; i < elems; ++i)
    ASSERT_NEAR(oc[i], og[i], 2e-5f * std::max(scale, 1.0f))
        << "attention element " << i << ", length " << lc;
}

/// A CPU cache and a Metal cache of one configuration fed the same data:
/// each append draws seeded keys and values (randomMatrix), lets `shape`
/// reshape the keys (loud rows, loud channels), and updates both caches.
class CacheTwin {
public:
  /// Reshape the [n, C] keys k of one append (head_dim given), from seed.
  using Shape = void (*)(Matrix &k, int32_t headDim, uint64_t seed);

  CacheTwin(const kvq_config &cfg, Shape shape) : cfg_(cfg), shape_(shape) {
    EXPECT_EQ(KVQ_OK, kvq_cache_create(&cfg, &cpu_)) << kvq_last_error();
    gpu_ = metalCache(cfg);
  }
  ~CacheTwin() {
    kvq_cache_destroy(cpu_);
    kvq_metal_cache_destroy(gpu_);
  }
  CacheTwin(const CacheTwin &) = delete;
  CacheTwin &operator=(const CacheTwin &) = delete;

  int64_t channels() const {
    return int64_t{cfg_.num_kv_heads} * cfg_.head_dim;
  }

  void append(int layer, int64_t n, kvq_dtype dtype, uint64_t seed) {
    Matrix k = randomMatrix(n, channels(), dtype, seed);
    Matrix v = randomMatrix(n, channels(), dtype, seed + 1);
    shape_(k, cfg_.head_dim, seed + 2);
    ASSERT_EQ(KVQ_OK,
              kvq_cache_update(cpu_, layer, k.data(), v.data(), n, dtype))
        << kvq_last_error();
    ASSERT_EQ(KVQ_OK,
              kvq_metal_cache_update(gpu_, layer, k.data(), v.data(), n, dtype))
        << kvq_last_error();
  }

  void expectSame(int layer, uint64_t seed) {
    expectCachesMatch(cpu_, gpu_, layer, cfg_.num_kv_heads, cfg_.head_dim,
                      seed);
  }

  kvq_stats gpuStats(int layer) const {
    kvq_stats s{};
    EXPECT_EQ(KVQ_OK, kvq_metal_cache_stats(gpu_, layer, &s));
    return s;
  }

  kvq_cache_t *cpu_ = nullptr;
  kvq_metal_cache_t *gpu_ = nullptr;

private:
  kvq_config cfg_;
  Shape shape_;
};

} // namespace kvqmetaltest

#endif // KVQ_TEST_UNIT_METAL_TEST_UTIL_H
