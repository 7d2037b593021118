//===- IndexEvaluator.h - small integer tensors as affine forms -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Scatter lowerings compute the indices they write at: torch-mlir's
// index_put flattens (batch, head, position) coordinates into one row of a
// [1, K, C] view by multiplying them with the strides and summing
// (reduce_sum). To fold such a scatter into the slice write it is, the
// cache pass must know every index as a function of the step's position.
// This evaluator computes each element of a small static integer tensor as
// a sum of unknown elements (of tensors it does not evaluate, such as the
// position argument) times constants plus a constant, through constants,
// fills, reshapes, slices, concats and linalg ops (reductions included)
// whose bodies add, subtract, multiply by a constant and cast. The forms
// are exact modulo 2^w for the narrowest integer width w on the way, which
// must be at least the width of the result (see evaluateIndices).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_INDEXEVALUATOR_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_INDEXEVALUATOR_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::kvq {

/// Element `flat` (row-major) of a tensor the evaluator treats as unknown.
struct IndexLeaf {
  Value tensor;
  int64_t flat = 0;
  bool operator==(const IndexLeaf &o) const {
    return tensor == o.tensor && flat == o.flat;
  }
  bool operator!=(const IndexLeaf &o) const { return !(*this == o); }
};

/// sum(coefficient * leaf) + constant.
struct AffineIndex {
  SmallVector<std::pair<IndexLeaf, int64_t>, 1> terms;
  int64_t constant = 0;

  /// The leaf when the form is exactly `leaf + constant`.
  std::optional<IndexLeaf> unitLeaf() const {
    if (terms.size() != 1 || terms[0].second != 1)
      return std::nullopt;
    return terms[0].first;
  }
};

/// Every element of the static integer tensor `t` (at most `maxElements`)
/// as an affine form, row-major; nullopt when an op on the way is not one
/// the evaluator knows, a product of two unknowns appears, an element is
/// never written, or an integer narrower than `t`'s element type is on the
/// way (so the forms are exact modulo 2^width of `t`).
std::optional<SmallVector<AffineIndex>> evaluateIndices(Value t,
                                                        int64_t maxElements);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_KVCACHE_INDEXEVALUATOR_H
