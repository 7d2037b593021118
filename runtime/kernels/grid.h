//===- grid.h - The matrices of the whole-matrix kernels --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A validated [rows, cols] matrix of the stateless C kernels split into
// groups (kvq_axis), which the argument checks (checks/kernel_args.h)
// produce and the whole-matrix kernels' operands (quantize_args.h,
// outliers_args.h) carry. Those operands name their buffers: matrices
// are row-major [rows, cols] (the grid's), element e at flat index e
// of every buffer with one entry per element (x, exclude, codes, mask,
// out); a vector's entries (scale, zero, levels, threshold) go by its
// index v.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_GRID_H
#define KVQ_RUNTIME_KERNELS_GRID_H

#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

/// A validated [rows, cols] matrix split into vectors of `group` elements
/// along `axis` (kvq_axis): vector v starts at flat index base(v) and its
/// elements are `stride` apart.
struct Grid {
  int64_t rows = 0, cols = 0, group = 0;
  int axis = 0;
  int64_t vectors() const { return rows * cols / group; }
  int64_t stride() const { return axis == KVQ_AXIS_PER_TOKEN ? 1 : cols; }
  int64_t base(int64_t v) const {
    if (axis == KVQ_AXIS_PER_TOKEN) {
      int64_t perRow = cols / group;
      return (v / perRow) * cols + (v % perRow) * group;
    }
    return (v / cols) * group * cols + v % cols;
  }
  /// [rows, cols] with one group per column over all rows (a store's key
  /// channels, each quantized over a block of tokens).
  static Grid columns(int64_t rows, int64_t cols) {
    return Grid{rows, cols, rows, KVQ_AXIS_PER_CHANNEL};
  }
};

/// Bytes per element of a (valid) dtype: 2 for fp16 bits, 4 for f32.
inline int64_t dtypeBytes(kvq_dtype dtype) {
  return dtype == KVQ_DTYPE_F16 ? 2 : 4;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_GRID_H
