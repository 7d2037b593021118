//===- outliers_fast.h - The rank split in one pass -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A portable fast path of the rank split shared by the x86 and NEON tables
// (the same bytes as topkAbsRef; differential tests in
// test/unit/runtime/simd_kernels_test.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_FAST_H
#define KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_FAST_H

#include "kernels.h"

#include <cstdint>

namespace kvq {

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
void topkAbsFast(const TopkAbsArgs &a);

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_FAST_H
