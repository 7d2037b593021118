//===- metal_test_util.h - Shared helpers of the Metal tests ----*- C++ -*-===//
//
// Seeded matrices in fp16 or f32 (with planted constant groups, outliers and
// ties), masks, and the context under test.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_METAL_TEST_UTIL_H
#define KVQ_TEST_UNIT_METAL_TEST_UTIL_H

#include "kvq/runtime.h"
#include "kvq/runtime_metal.h"
#include "runtime/test_util.h"

#include <gtest/gtest.h>

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

} // namespace kvqmetaltest

#endif // KVQ_TEST_UNIT_METAL_TEST_UTIL_H
