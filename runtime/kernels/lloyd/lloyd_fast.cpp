//===- lloyd_fast.cpp - Lloyd-Max over sorted runs ------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Lloyd-Max over sorted runs, and the radix sort it starts with (see
// lloyd_fast.h).
//
//===----------------------------------------------------------------------===//
#include "lloyd_fast.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace kvq;

namespace {
// The work is caller's float storage, so the keys and sums in it are read
// and written by memcpy (a plain load or store once compiled).
uint32_t keyAt(const float *work, int64_t i) {
  uint32_t u;
  std::memcpy(&u, work + i, 4);
  return u;
}
void setKey(float *work, int64_t i, uint32_t u) {
  std::memcpy(work + i, &u, 4);
}
double sumAt(const float *work, int64_t i) {
  double d;
  std::memcpy(&d, work + 2 * i, 8);
  return d;
}
void setSum(float *work, int64_t i, double d) {
  std::memcpy(work + 2 * i, &d, 8);
}
} // namespace

int64_t kvq::lloydWorkFloats(int64_t m) {
  // The sort keys (2m) and then the prefix sums (m + 1 doubles) share it.
  if (m < 1)
    return 0;
  return m > (INT64_MAX - 2) / 2 ? INT64_MAX : 2 * m + 2;
}

int64_t kvq::lloydScratchFloats(int64_t n) {
  if (n < 1)
    return 0;
  const int64_t work = lloydWorkFloats(n);
  return work > INT64_MAX - n ? INT64_MAX : n + work;
}

void kvq::sortFloats(float *data, int64_t m, float *work) {
  if (m < 2)
    return;
  // Order-preserving keys: flip every bit of a negative float, only the
  // sign bit of a positive one. keys and other are halves of the work.
  float *keys = work, *other = work + m;
  uint32_t offsets[4][256] = {};
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u;
    std::memcpy(&u, &data[i], 4);
    u ^= (u >> 31) ? 0xFFFFFFFFu : 0x80000000u;
    setKey(keys, i, u);
    for (int d = 0; d < 4; ++d)
      ++offsets[d][(u >> (8 * d)) & 255];
  }
  for (int d = 0; d < 4; ++d) {
    const int shift = 8 * d;
    if (offsets[d][(keyAt(keys, 0) >> shift) & 255] == static_cast<uint64_t>(m))
      continue; // one digit value for all: the pass would copy
    uint32_t sum = 0;
    for (uint32_t &o : offsets[d]) {
      const uint32_t c = o;
      o = sum;
      sum += c;
    }
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t u = keyAt(keys, i);
      setKey(other, offsets[d][(u >> shift) & 255]++, u);
    }
    std::swap(keys, other);
  }
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u = keyAt(keys, i);
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

/// The first index in [pos, m) whose value moves up from lo to hi, or m:
/// the rule is monotone over the sorted data, so the answer is found by
/// galloping from `guess` (where the cell ended in the last sweep; cells
/// move little between sweeps) and bisecting the bracket found. Only the
/// number of probes depends on the guess, never the answer.
int64_t firstMovingUp(const float *data, int64_t pos, int64_t m, float lo,
                      float hi, int64_t guess) {
  // Invariant of the bracket (f, t]: f < pos or data[f] stays, t == m or
  // data[t] moves up; the answer lies in (f, t].
  int64_t f, t;
  const int64_t g = std::clamp(guess, pos, m);
  if (g == m || movesUp(lo, hi, data[g])) {
    t = g;
    for (int64_t step = 1;; step *= 2) {
      f = t - step;
      if (f < pos) {
        f = pos - 1;
        break;
      }
      if (!movesUp(lo, hi, data[f]))
        break;
      t = f;
    }
  } else {
    f = g;
    for (int64_t step = 1;; step *= 2) {
      t = f + step;
      if (t >= m) {
        t = m;
        break;
      }
      if (movesUp(lo, hi, data[t]))
        break;
      f = t;
    }
  }
  while (t - f > 1) {
    const int64_t mid = f + (t - f) / 2;
    if (movesUp(lo, hi, data[mid]))
      t = mid;
    else
      f = mid;
  }
  return t;
}

/// Whether every sum of some of the m finite floats, in any order, is exact
/// in double: each value is a multiple of 2^low (its lowest set bit) and
/// below 2^top in magnitude, so every such sum is a multiple of the least
/// 2^low and below 2^(greatest top + ceil(log2 m)); 53 bits hold that span.
/// Values converted from fp16 (multiples of 2^-24 below 2^16) always pass
/// up to m = 8192: then a cell's sum is a difference of prefix sums, with
/// the bits of the reference's sequential sum.
bool sumsAreExact(const float *data, int64_t m) {
  // The common case first, in one vectorisable pass: fp16 values (multiples
  // of 2^-24 below 2^16 in magnitude) up to m = 8192 span at most 40 + 13
  // bits.
  if (m <= 8192) {
    bool fp16Grid = true;
    for (int64_t i = 0; i < m; ++i) {
      // Exact (a power of two); every float of magnitude >= 2^23 is an
      // integer, and below that the int32 round trip tests it.
      const float scaled = std::fmin(std::fabs(data[i]) * 16777216.0f,
                                     8388608.0f);
      fp16Grid &= std::fabs(data[i]) < 65536.0f &&
                  scaled == static_cast<float>(static_cast<int32_t>(scaled));
    }
    if (fp16Grid)
      return true;
  }
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

void kvq::lloydFitGatheredFast(const LloydFitGatheredArgs &a) {
  lloydFitGatheredSortedBy(sortFloats, a);
}

void kvq::lloydFitGatheredSortedBy(FloatSort sort,
                                   const LloydFitGatheredArgs &a) {
  // The distortion trace is a debugging aid: keep the reference for it.
  if (a.distortion || a.m == 0) {
    lloydFitGathered(a);
    return;
  }
  float *data = a.data, *work = a.work, *levels = a.levels;
  const int64_t m = a.m;
  const int bits = a.bits, iters = a.iters;
  const int count = 1 << bits;
  sort(data, m, work);
  lloydInitSorted(data, m, count, levels);
  // Prefix sums where they are exact (sumsAreExact), in the work the sort
  // is done with: a cell's sum is then one subtraction instead of a pass
  // over the cell in every sweep.
  const bool prefix = sumsAreExact(data, m);
  if (prefix) {
    double running = 0.0;
    setSum(work, 0, running);
    for (int64_t i = 0; i < m; ++i) {
      running += data[i];
      setSum(work, i + 1, running);
    }
  }
  float updated[kMaxLevels];
  // Per level index, the cell [cellFrom, cellEnd) it owned in the last
  // sweep, where the next sweep's search starts (the first sweep guesses
  // the quantile boundaries the levels start from), and that cell's mean
  // when it was not empty (the same run gives the same mean: no second sum
  // or division).
  int64_t cellFrom[kMaxLevels], cellEnd[kMaxLevels];
  float cellMean[kMaxLevels];
  for (int l = 0; l < count; ++l) {
    cellFrom[l] = -1;
    cellEnd[l] = m * (l + 1) / count;
  }
  for (int it = 0; it < iters; ++it) {
    std::copy(levels, levels + count, updated); // an empty cell stays put
    // Each distinct level (the first index of its value, as nearestLevel
    // returns) owns a run of the sorted data, [pos, end).
    int cur = nearestLevel(levels, count, data[0]);
    for (int64_t pos = 0; pos < m;) {
      int up = cur + 1;
      while (up < count && levels[up] == levels[cur])
        ++up;
      const int64_t end =
          up < count ? firstMovingUp(data, pos, m, levels[cur], levels[up],
                                     cellEnd[cur])
                     : m;
      if (end > pos) {
        if (cellFrom[cur] != pos || cellEnd[cur] != end) {
          double sum = 0; // the reference's sum, bit for bit
          if (prefix)
            sum = sumAt(work, end) - sumAt(work, pos); // both exact: the sum
          else
            for (int64_t i = pos; i < end; ++i) // the reference's order
              sum += data[i];
          cellMean[cur] =
              static_cast<float>(sum / static_cast<double>(end - pos));
        }
        updated[cur] = cellMean[cur];
      }
      cellFrom[cur] = pos;
      cellEnd[cur] = end;
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

int64_t kvq::lloydFitFast(const LloydFitArgs &a) {
  return lloydFitSortedBy(sortFloats, a);
}

int64_t kvq::lloydFitSortedBy(FloatSort sort, const LloydFitArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t exStride = a.exStride;
  const int bits = a.bits, iters = a.iters;
  float *scratch = a.scratch, *levels = a.levels;
  double *distortion = a.distortion;
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!exclude || !exclude[i * exStride])
      scratch[m++] = x[i * stride];
  LloydFitGatheredArgs fit;
  fit.data = scratch;
  fit.m = m;
  fit.work = scratch + m;
  fit.bits = bits;
  fit.iters = iters;
  fit.levels = levels;
  fit.distortion = distortion;
  lloydFitGatheredSortedBy(sort, fit);
  return m;
}
