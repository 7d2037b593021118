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
      if (end > pos) { // summed in the reference's order: same bits
        double sum = 0;
        for (int64_t i = pos; i < end; ++i)
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
