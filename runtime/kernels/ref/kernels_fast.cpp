//===- kernels_fast.cpp - Portable fast paths shared by SIMD tables -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Lloyd-Max over sorted runs, and the radix sort it starts with (see
// kernels_fast.h).
//
//===----------------------------------------------------------------------===//
#include "kernels_fast.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace kvq;

void kvq::sortFloats(float *data, int64_t m) {
  if (m < 2)
    return;
  // Order-preserving keys: flip every bit of a negative float, only the
  // sign bit of a positive one.
  constexpr int64_t kStackKeys = 512;
  uint32_t stackKeys[2 * kStackKeys];
  std::vector<uint32_t> heapKeys;
  uint32_t *keys = stackKeys;
  if (m > kStackKeys) {
    heapKeys.resize(static_cast<size_t>(2 * m));
    keys = heapKeys.data();
  }
  uint32_t *other = keys + m;
  uint32_t offsets[4][256] = {};
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u;
    std::memcpy(&u, &data[i], 4);
    u ^= (u >> 31) ? 0xFFFFFFFFu : 0x80000000u;
    keys[i] = u;
    for (int d = 0; d < 4; ++d)
      ++offsets[d][(u >> (8 * d)) & 255];
  }
  for (int d = 0; d < 4; ++d) {
    const int shift = 8 * d;
    if (offsets[d][(keys[0] >> shift) & 255] == static_cast<uint64_t>(m))
      continue; // one digit value for all: the pass would copy
    uint32_t sum = 0;
    for (uint32_t &o : offsets[d]) {
      const uint32_t c = o;
      o = sum;
      sum += c;
    }
    for (int64_t i = 0; i < m; ++i)
      other[offsets[d][(keys[i] >> shift) & 255]++] = keys[i];
    std::swap(keys, other);
  }
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u = keys[i];
    u ^= (u >> 31) ? 0x80000000u : 0xFFFFFFFFu;
    std::memcpy(&data[i], &u, 4);
  }
}

namespace {
/// nearestLevel's rule between neighbouring distinct levels lo < hi: x
/// belongs to hi (or beyond) when strictly closer to it, ties to lo. For a
/// fixed pair it is monotone in x (rounded differences are monotone).
bool movesUp(float lo, float hi, float x) {
  return x >= hi || (x > lo && hi - x < x - lo);
}

/// Whether every sum of some of the m finite floats, in any order, is exact
/// in double: each value is a multiple of 2^low (its lowest set bit) and
/// below 2^top in magnitude, so every such sum is a multiple of the least
/// 2^low and below 2^(greatest top + ceil(log2 m)); 53 bits hold that span.
/// Values converted from fp16 (multiples of 2^-24 below 2^16) always pass
/// up to m = 8192: then a cell's sum is a difference of prefix sums, with
/// the bits of the reference's sequential sum.
bool sumsAreExact(const float *data, int64_t m) {
  int low = 1 << 20, top = -(1 << 20);
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u;
    std::memcpy(&u, &data[i], 4);
    u &= 0x7FFFFFFFu;
    if (u == 0)
      continue; // zeros add nothing (and +0 + -0 is +0 either way)
    const int exponent = static_cast<int>(u >> 23);
    // The significand as an integer times 2^(scale): subnormals have no
    // implicit bit and the scale of exponent 1.
    const uint32_t significand =
        exponent ? (u & 0x7FFFFFu) | 0x800000u : u & 0x7FFFFFu;
    const int scale = (exponent ? exponent : 1) - 150;
    low = std::min(low, scale + __builtin_ctz(significand));
    top = std::max(top, scale + 32 - __builtin_clz(significand));
  }
  int growth = 0; // ceil(log2 m)
  while ((int64_t{1} << growth) < m)
    ++growth;
  return top == -(1 << 20) || top + growth - low <= 53;
}
} // namespace

void kvq::lloydFitGatheredFast(float *data, int64_t m, int bits, int iters,
                               float *levels, double *distortion) {
  // The distortion trace is a debugging aid: keep the reference for it.
  if (distortion || m == 0) {
    lloydFitGathered(data, m, bits, iters, levels, distortion);
    return;
  }
  const int count = 1 << bits;
  sortFloats(data, m);
  lloydInitSorted(data, m, count, levels);
  // Prefix sums where they are exact (sumsAreExact): a cell's sum is then
  // one subtraction instead of a pass over the cell in every sweep.
  constexpr int64_t kStackSums = 513;
  double stackSums[kStackSums];
  std::vector<double> heapSums;
  double *prefix = nullptr;
  if (sumsAreExact(data, m)) {
    prefix = stackSums;
    if (m + 1 > kStackSums) {
      heapSums.resize(static_cast<size_t>(m + 1));
      prefix = heapSums.data();
    }
    prefix[0] = 0.0;
    for (int64_t i = 0; i < m; ++i)
      prefix[i + 1] = prefix[i] + data[i];
  }
  float updated[kMaxLevels];
  for (int it = 0; it < iters; ++it) {
    std::copy(levels, levels + count, updated); // an empty cell stays put
    // Each distinct level (the first index of its value, as nearestLevel
    // returns) owns a run of the sorted data, [pos, end).
    int cur = nearestLevel(levels, count, data[0]);
    for (int64_t pos = 0; pos < m;) {
      int up = cur + 1;
      while (up < count && levels[up] == levels[cur])
        ++up;
      int64_t end = m;
      if (up < count) { // the first index >= pos that moves up
        const float lo = levels[cur], hi = levels[up];
        int64_t a = pos;
        while (a < end) {
          const int64_t mid = a + (end - a) / 2;
          if (movesUp(lo, hi, data[mid]))
            end = mid;
          else
            a = mid + 1;
        }
      }
      if (end > pos) { // the reference's sum, bit for bit
        double sum = 0;
        if (prefix)
          sum = prefix[end] - prefix[pos]; // both exact, so exactly the sum
        else
          for (int64_t i = pos; i < end; ++i) // the reference's order
            sum += data[i];
        updated[cur] = static_cast<float>(sum / static_cast<double>(end - pos));
      }
      pos = end;
      cur = up;
    }
    std::sort(updated, updated + count);
    // Unchanged levels give the same cells again: every later sweep would
    // repeat this one.
    if (std::equal(updated, updated + count, levels))
      break;
    std::copy(updated, updated + count, levels);
  }
}

int64_t kvq::lloydFitFast(const float *x, int64_t n, int64_t stride,
                          const uint8_t *exclude, int64_t exStride, int bits,
                          int iters, float *scratch, float *levels,
                          double *distortion) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!exclude || !exclude[i * exStride])
      scratch[m++] = x[i * stride];
  lloydFitGatheredFast(scratch, m, bits, iters, levels, distortion);
  return m;
}
