//===- outliers_args.h - Outlier and sink operands --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Dense-and-sparse outliers and attention sinks: the rank split's
// operands and reference kernels, strided (topkAbs) and whole-matrix
// (outlierSplit, outlierScreen, keyNorm), and the sinks' top-k
// (topkIndices). kernels.h holds the table; the kernels are in this
// folder.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_ARGS_H
#define KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_ARGS_H

#include "grid.h"

#include <cstdint>

namespace kvq {

//===----------------------------------------------------------------------===//
// Dense-and-sparse outliers and sinks
//===----------------------------------------------------------------------===//

/// k = ceil(fraction * eligible), computed as ceil(f*n - 1e-6) so that a
/// float fraction such as 0.07f does not round an exact product up.
int64_t outlierCount(float fraction, int64_t eligible);

/// The rank split on any element accessor: get(i) returns element i as
/// float, skip(i) says whether it is excluded, mark(i, bool) writes the mask.
/// Returns the k-th largest magnitude bits (0 when k == 0).
template <class Get, class Skip, class Mark>
uint32_t topkAbsGeneric(Get get, Skip skip, Mark mark, int64_t n, int64_t k);

/// topkAbs' operands.
struct TopkAbsArgs {
  const float *x = nullptr;
  int64_t n = 0, stride = 1;
  const uint8_t *exclude = nullptr;
  int64_t exStride = 0;
  int64_t k = 0;
  uint8_t *mask = nullptr; ///< mask[i*maskStride]
  int64_t maskStride = 1;
  float *threshold = nullptr; ///< optional
};

/// Mark exactly min(k, eligible) eligible elements with the largest |x|,
/// ties to the earlier index (mask[i*maskStride] = 1, others 0). threshold
/// (optional) receives the k-th largest |x|, +inf when k == 0. Works without
/// scratch memory: the threshold is found by bisection on the float bits.
void topkAbsRef(const TopkAbsArgs &a);

/// topkIndices' operands (kvq_sink_select after validation).
struct TopkIndicesArgs {
  const float *values = nullptr; ///< n non-negative values (key norms)
  int64_t n = 0;
  int64_t k = 0;              ///< how many to select, k <= n
  int64_t *indices = nullptr; ///< out: k indices, ascending
};

/// The k largest of the n values, ties to the earlier index; writes their
/// indices ascending.
void topkIndicesRef(const TopkIndicesArgs &a);

/// Mean over heads of the per-head L2 norm of one token's key row
/// (accumulated in double, so it is the same on every ISA).
float keyNormRow(const float *row, int heads, int headDim);

//===----------------------------------------------------------------------===//
// Whole-matrix kernels (the stateless C entry points after validation)
//===----------------------------------------------------------------------===//

/// outlierSplit's operands (kvq_outlier_split after validation).
struct OutlierSplitArgs {
  const void *x = nullptr;         ///< the input, elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  Grid grid;                       ///< the validated grid
  /// Each vector marks outlierCount(fraction, its eligible elements).
  float fraction = 0.0f;
  /// Optional (null: none): exclude[e] != 0 keeps element e out of the
  /// ranking (its mask byte is 0).
  const uint8_t *exclude = nullptr;
  uint8_t *mask = nullptr; ///< out: rows * cols bytes, 1 for an outlier
  /// Optional out: vector v's k-th largest |x| (+inf when k == 0).
  float *threshold = nullptr;
};

/// outlierScreen's operands (kvq_outlier_screen after validation): no grid,
/// one threshold per column.
struct OutlierScreenArgs {
  const void *x = nullptr;         ///< [rows, cols] elements of dtype
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of x
  int64_t rows = 0, cols = 0;
  const float *threshold = nullptr; ///< [cols]
  uint8_t *mask = nullptr; ///< out: [rows, cols], |x[r][c]| >= threshold[c]
};

/// keyNorm's operands (kvq_key_norm after validation).
struct KeyNormArgs {
  /// [tokens, heads * headDim] elements of dtype: one key row per token.
  const void *keys = nullptr;
  kvq_dtype dtype = KVQ_DTYPE_F32; ///< of keys
  int64_t tokens = 0;
  int heads = 0;          ///< KV heads (> 0)
  int64_t headDim = 0;    ///< channels per head
  float *norms = nullptr; ///< out: [tokens]
};

/// kvq_outlier_split on a validated grid.
void outlierSplitRef(const OutlierSplitArgs &a);
/// kvq_outlier_screen: mask[r][c] = |x[r][c]| >= threshold[c].
void outlierScreenRef(const OutlierScreenArgs &a);
/// kvq_key_norm: mean over heads of the per-head L2 norm (sums in double,
/// d ascending, so every implementation must keep that order per token).
void keyNormRef(const KeyNormArgs &a);

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_OUTLIERS_OUTLIERS_ARGS_H
