//===- quant_adversarial_test.cpp - Quantize kernels on hostile inputs ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Differential tests of nuqQuant and groupQuant of every SIMD table
// (simdKernelVariants: AVX-512 and AVX2 on such a CPU, NEON on arm64)
// against the reference on inputs built to hit their decision boundaries:
// values exactly on a level, exactly halfway between two levels and one
// float either side, runs of equal levels, -0 next to +0, NaN and
// infinities (the kernels are also called on unchecked buffers), below
// the first and above the last level; for group quantization, groups whose
// codes land exactly on halves, constant groups and signed zero minima.
// Shapes cover the 32-code paths (per-token groups of 32 and 128,
// 32-column chunks) and the fallbacks next to them.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

using namespace kvq;
using kvqtest::Rng;

namespace {

Grid makeGrid(int64_t rows, int64_t cols, int64_t group, int axis) {
  Grid g;
  g.rows = rows;
  g.cols = cols;
  g.group = group;
  g.axis = axis;
  return g;
}

struct Shape {
  int64_t rows, cols, group;
  int axis;
};

const Shape kShapes[] = {
    {8, 256, 128, KVQ_AXIS_PER_TOKEN},  // KVQuant values: one table per head
    {17, 64, 32, KVQ_AXIS_PER_TOKEN},   // partial last step of 16 groups
    {6, 40, 8, KVQ_AXIS_PER_TOKEN},     // AVX2 fallback
    {64, 64, 32, KVQ_AXIS_PER_CHANNEL}, // KVQuant keys: 32-token blocks
    {32, 96, 16, KVQ_AXIS_PER_CHANNEL},
    {16, 24, 8, KVQ_AXIS_PER_CHANNEL}, // AVX2 fallback
};

/// Ascending levels with the awkward features: equal runs, -0 and +0
/// side by side, fp16 subnormals. Returned as fp16.
std::vector<uint16_t> hostileLevels(Rng &rng, int64_t tables, int count) {
  const float pool[] = {-3.0f,  -1.5f, -1.0f, -0.5f, -0.0f,  0.0f,   0.0f,
                        -0.0f,  0.25f, 0.5f,  0.5f,  1.0f,   1.75f,  6e-8f,
                        -6e-8f, 3e-5f, 2.0f,  -2.0f, 0.125f, 1000.0f};
  std::vector<uint16_t> out;
  for (int64_t t = 0; t < tables; ++t) {
    std::vector<float> l(static_cast<size_t>(count));
    for (float &v : l)
      v = rng.uniform() < 0.7
              ? pool[static_cast<int>(rng.uniform() * std::size(pool))]
              : roundToHalf(static_cast<float>(rng.normal()));
    std::sort(l.begin(), l.end()); // -0 and +0 stay in either order
    for (float v : l)
      out.push_back(floatToHalf(v));
  }
  return out;
}

/// One value aimed at the decision boundaries of `levels` (count floats).
float hostileValue(Rng &rng, const float *levels, int count) {
  const int a = static_cast<int>(rng.uniform() * count);
  const int b = std::min(a + 1, count - 1);
  const float mid = levels[a] + (levels[b] - levels[a]) * 0.5f;
  switch (static_cast<int>(rng.uniform() * 10)) {
  case 0:
    return levels[a];
  case 1:
  case 2:
    return mid;
  case 3:
    return std::nextafter(mid, std::numeric_limits<float>::infinity());
  case 4:
    return std::nextafter(mid, -std::numeric_limits<float>::infinity());
  case 5:
    return levels[0] - 1.0f;
  case 6:
    return levels[count - 1] + 1.0f;
  case 7:
    return rng.uniform() < 0.5 ? 0.0f : -0.0f;
  case 8: {
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 65504.0f,
                              -65504.0f};
    return specials[static_cast<int>(rng.uniform() * std::size(specials))];
  }
  default:
    return static_cast<float>(rng.normal());
  }
}

const void *asInput(kvq_dtype dt, const std::vector<float> &f,
                    const std::vector<uint16_t> &h) {
  return dt == KVQ_DTYPE_F16 ? static_cast<const void *>(h.data())
                             : static_cast<const void *>(f.data());
}

std::string what(const KernelTable *t, const Shape &s, int bits, int dt,
                 int layout) {
  return std::string(t->name) + " rows " + std::to_string(s.rows) + " cols " +
         std::to_string(s.cols) + " group " + std::to_string(s.group) +
         " axis " + std::to_string(s.axis) + " bits " + std::to_string(bits) +
         " dtype " + std::to_string(dt) + " layout " + std::to_string(layout);
}

} // namespace

TEST(QuantAdversarial, NuqNearestLevelAtEveryBoundary) {
  const std::vector<const KernelTable *> tables = simdKernelVariants();
  if (tables.empty())
    GTEST_SKIP() << "no SIMD table on this CPU";
  const KernelTable &ref = referenceKernels();
  uint64_t seed = 1;
  for (const Shape &s : kShapes)
    for (int bits : {2, 3, 4})
      for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
        Rng rng(seed++);
        const Grid g = makeGrid(s.rows, s.cols, s.group, s.axis);
        const int count = 1 << bits;
        const std::vector<uint16_t> levels =
            hostileLevels(rng, g.vectors(), count);
        const int64_t n = s.rows * s.cols;
        std::vector<float> f(static_cast<size_t>(n));
        for (int64_t v = 0; v < g.vectors(); ++v) {
          float table[16];
          for (int l = 0; l < count; ++l)
            table[l] = halfToFloat(levels[static_cast<size_t>(v * count + l)]);
          for (int64_t i = 0; i < g.group; ++i) {
            float x = hostileValue(rng, table, count);
            // fp16 input: a representable neighbour (NaN and infinities
            // convert as such).
            if (dt == KVQ_DTYPE_F16)
              x = halfToFloat(floatToHalf(x));
            f[static_cast<size_t>(g.base(v) + i * g.stride())] = x;
          }
        }
        std::vector<uint16_t> h(f.size());
        for (size_t i = 0; i < f.size(); ++i)
          h[i] = floatToHalf(f[i]);
        for (int layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED}) {
          const int64_t bytes =
              layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
          std::vector<uint8_t> want(static_cast<size_t>(bytes));
          NuqQuantArgs q;
          q.x = asInput(dt, f, h);
          q.dtype = dt;
          q.grid = g;
          q.bits = bits;
          q.levels = levels.data();
          q.layout = layout;
          q.codes = want.data();
          ref.nuqQuant(q);
          for (const KernelTable *t : tables) {
            std::vector<uint8_t> got(static_cast<size_t>(bytes), 0x5a);
            q.codes = got.data();
            t->nuqQuant(q);
            ASSERT_EQ(want, got) << what(t, s, bits, dt, layout);
          }
        }
      }
}

TEST(QuantAdversarial, GroupQuantOnHalvesZerosAndConstants) {
  const std::vector<const KernelTable *> tables = simdKernelVariants();
  if (tables.empty())
    GTEST_SKIP() << "no SIMD table on this CPU";
  const KernelTable &ref = referenceKernels();
  uint64_t seed = 100;
  for (const Shape &s : kShapes)
    for (int bits : {2, 3, 4, 8})
      for (kvq_dtype dt : {KVQ_DTYPE_F16, KVQ_DTYPE_F32}) {
        Rng rng(seed++);
        const Grid g = makeGrid(s.rows, s.cols, s.group, s.axis);
        const int64_t n = s.rows * s.cols;
        std::vector<float> f(static_cast<size_t>(n));
        for (int64_t v = 0; v < g.vectors(); ++v) {
          // Per group: codes on exact halves of a power-of-two step, a
          // constant group, a signed zero minimum, or plain noise.
          const int kind = static_cast<int>(rng.uniform() * 4);
          const float step =
              std::ldexp(1.0f, static_cast<int>(rng.uniform() * 8) - 4);
          const float c = static_cast<float>(std::nearbyint(rng.normal() * 4));
          for (int64_t i = 0; i < g.group; ++i) {
            float x;
            switch (kind) {
            case 0:
              x = step * (static_cast<float>(
                              std::floor(rng.uniform() * ((1 << bits) * 2))) *
                          0.5f);
              break;
            case 1:
              x = c;
              break;
            case 2:
              x = i % 3 == 0 ? (rng.uniform() < 0.5 ? -0.0f : 0.0f)
                             : static_cast<float>(std::fabs(rng.normal()));
              break;
            default:
              x = static_cast<float>(rng.normal());
            }
            f[static_cast<size_t>(g.base(v) + i * g.stride())] = roundToHalf(x);
          }
        }
        std::vector<uint16_t> h(f.size());
        for (size_t i = 0; i < f.size(); ++i)
          h[i] = floatToHalf(f[i]);
        for (int layout : {KVQ_CODES_UNPACKED, KVQ_CODES_PACKED}) {
          const int64_t bytes =
              layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
          std::vector<uint8_t> want(static_cast<size_t>(bytes));
          std::vector<uint16_t> ws(g.vectors()), wz(g.vectors());
          GroupQuantArgs q;
          q.x = asInput(dt, f, h);
          q.dtype = dt;
          q.grid = g;
          q.bits = bits;
          q.layout = layout;
          q.codes = want.data();
          q.scale = ws.data();
          q.zero = wz.data();
          ref.groupQuant(q);
          for (const KernelTable *t : tables) {
            std::vector<uint8_t> got(static_cast<size_t>(bytes), 0x5a);
            std::vector<uint16_t> gs(g.vectors()), gz(g.vectors());
            q.codes = got.data();
            q.scale = gs.data();
            q.zero = gz.data();
            t->groupQuant(q);
            ASSERT_EQ(ws, gs) << what(t, s, bits, dt, layout);
            ASSERT_EQ(wz, gz) << what(t, s, bits, dt, layout);
            ASSERT_EQ(want, got) << what(t, s, bits, dt, layout);
          }
        }
      }
}
