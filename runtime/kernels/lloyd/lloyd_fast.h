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
/// level's cell is a run of the sorted data, found by a search on
/// nearestLevel's rule that starts where the cell ended in the last sweep,
/// and summed as the reference sums it (by prefix sums where every partial
/// sum is exact in double, as for fp16 data, else in the reference's
/// order), a cell unchanged since the last sweep keeping its mean; a sweep
/// that leaves the levels unchanged ends the fit (every later sweep would
/// repeat it).
void lloydFitGatheredFast(const LloydFitGatheredArgs &a);

/// lloydFitRef's contract on top of lloydFitGatheredFast.
int64_t lloydFitFast(const LloydFitArgs &a);

/// A sort that leaves exactly sortFloats' bytes (a table's faster one).
using FloatSort = void (*)(float *data, int64_t m, float *work);

/// The two fits above, starting with `sort` instead of sortFloats.
void lloydFitGatheredSortedBy(FloatSort sort, const LloydFitGatheredArgs &a);
int64_t lloydFitSortedBy(FloatSort sort, const LloydFitArgs &a);

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_LLOYD_LLOYD_FAST_H
