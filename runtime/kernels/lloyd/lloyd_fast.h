//===- lloyd_fast.h - Lloyd-Max over sorted runs ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Algorithmic speedups that need no intrinsics and are shared by the x86 and
// NEON tables. Each gives exactly the reference's bytes (differential tests
// in test/unit/runtime/simd_kernels_test.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_FAST_H
#define KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_FAST_H

#include "fp16.h"
#include "kernels.h"

namespace kvq {

/// Sorts m floats ascending: LSD radix over order-preserving 32-bit keys.
/// With the rest of this fast path it took a 3-bit fit of 128 values from
/// 7.3 to 2.5 us, of 2048 values from 152 to 25 us (std::sort was about
/// half, resp. two thirds, of the old fit). Values equal under < differ
/// only in the sign of zero, which neither the fit's sums (they start at
/// +0) nor its quantile levels can carry, so the fit gets the reference's
/// levels whatever order std::sort gives them. work holds 2m floats (the
/// keys, in two halves).
void sortFloats(float *data, int64_t m, float *work);

/// lloydFitGathered with the same levels, bit for bit, faster: the data are
/// sorted by sortFloats; the nearest level is non-decreasing in x, so each
/// level's cell is a run of the sorted data, found by binary search on
/// nearestLevel's rule and summed as the reference sums it (by prefix sums
/// where every partial sum is exact in double, as for fp16 data, else in
/// the reference's order); a sweep that leaves the levels unchanged ends
/// the fit (every later sweep would repeat it).
void lloydFitGatheredFast(float *data, int64_t m, float *work, int bits,
                          int iters, float *levels, double *distortion);

/// lloydFitRef's contract on top of lloydFitGatheredFast.
int64_t lloydFitFast(const float *x, int64_t n, int64_t stride,
                     const uint8_t *exclude, int64_t exStride, int bits,
                     int iters, float *scratch, float *levels,
                     double *distortion);

/// Up to this k the rank split's k-th largest magnitude comes from one pass
/// that keeps the k largest (KLargest), not from the bisection's 31
/// counting passes: KVQuant's splits have k = 2 (1 % of 128 elements), and
/// the bisection took 12 % of a refit batch.
constexpr int64_t kOnePassK = 16;

/// The k largest magnitude bit patterns offered (1 <= k <= kOnePassK), as
/// a multiset, kept descending.
class KLargest {
public:
  explicit KLargest(int64_t k) : k_(k) {}
  /// Whether k have been offered: then only one above kth() is kept.
  bool full() const { return held_ == k_; }
  uint32_t kth() const { return top_[k_ - 1]; }
  void offer(uint32_t b) {
    if (held_ == k_ && b <= top_[k_ - 1])
      return;
    int64_t j = held_ < k_ ? held_++ : k_ - 1;
    for (; j > 0 && top_[j - 1] < b; --j)
      top_[j] = top_[j - 1];
    top_[j] = b;
  }
  /// After at least k offers, the bisection's integers: the k-th largest
  /// magnitude, and how many equal to it the split takes (every magnitude
  /// above it is among the k kept).
  uint32_t kthLargest(int64_t *ties) const {
    const uint32_t t = top_[k_ - 1];
    int64_t greater = 0;
    for (int64_t j = 0; j < k_; ++j)
      greater += top_[j] > t;
    *ties = k_ - greater;
    return t;
  }

private:
  int64_t k_, held_ = 0;
  uint32_t top_[kOnePassK];
};

/// topkAbsRef's contract: contiguous splits without exclusions and with
/// 1 <= k <= min(n, kOnePassK) in one pass (KLargest), the rest by it.
void topkAbsFast(const float *x, int64_t n, int64_t stride,
                 const uint8_t *exclude, int64_t exStride, int64_t k,
                 uint8_t *mask, int64_t maskStride, float *threshold);

/// A sort that leaves exactly sortFloats' bytes (a table's faster one).
using FloatSort = void (*)(float *data, int64_t m, float *work);

/// The two fits above, starting with `sort` instead of sortFloats.
void lloydFitGatheredSortedBy(FloatSort sort, float *data, int64_t m,
                              float *work, int bits, int iters, float *levels,
                              double *distortion);
int64_t lloydFitSortedBy(FloatSort sort, const float *x, int64_t n,
                         int64_t stride, const uint8_t *exclude,
                         int64_t exStride, int bits, int iters, float *scratch,
                         float *levels, double *distortion);

/// The reference takes the first minimal element, so a minimum of zero
/// carries the sign of the first zero in the group (it ends up in the fp16
/// zero point); SIMD min does not know the order. The sign of the group's
/// minimum `lo` as the reference has it: the first zero among the n
/// elements, `stride` apart from `base`.
inline float fixZeroSign(float lo, const void *x, kvq_dtype dtype, int64_t base,
                         int64_t n, int64_t stride) {
  if (lo != 0.0f)
    return lo;
  for (int64_t i = 0; i < n; ++i) {
    float v = loadElement(x, dtype, base + i * stride);
    if (v == 0.0f)
      return v;
  }
  return lo;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_FAST_H
