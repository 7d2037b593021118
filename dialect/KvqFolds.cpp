//===- KvqFolds.cpp - exact folders of kvq ops ----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Quantization is lossy, so kvq folds only what is exact: an outlier split
// that selects nothing, and a sink selection that selects nothing or
// everything.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"

#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mlir::kvq;

/// fraction 0 selects k = ceil(0 * n) = 0 outliers in every vector: an
/// all-false mask and +inf thresholds, whatever the input.
LogicalResult OutlierSplitOp::fold(FoldAdaptor,
                                   SmallVectorImpl<OpFoldResult> &results) {
  if (!getFraction().isZero())
    return failure();
  // Constants exist for tensors only; the memref form is left alone.
  auto maskType = dyn_cast<RankedTensorType>(getMask().getType());
  auto thresholdType = dyn_cast<RankedTensorType>(getThreshold().getType());
  if (!maskType || !thresholdType || !maskType.hasStaticShape() ||
      !thresholdType.hasStaticShape())
    return failure();
  results.push_back(DenseElementsAttr::get(maskType, false));
  results.push_back(DenseElementsAttr::get(
      thresholdType, llvm::APFloat::getInf(llvm::APFloat::IEEEsingle())));
  return success();
}

/// Selecting 0 of T tokens gives no positions; selecting all T gives every
/// position in ascending order. Large iotas are left alone.
OpFoldResult SinkSelectOp::fold(FoldAdaptor) {
  auto type = dyn_cast<RankedTensorType>(getPositions().getType());
  int64_t tokens = cast<ShapedType>(getNorms().getType()).getDimSize(0);
  int64_t count = getCount();
  constexpr int64_t kMaxFoldedPositions = 4096;
  if (!type || !type.hasStaticShape() || count > kMaxFoldedPositions)
    return {};
  if (count != 0 && count != tokens)
    return {};
  SmallVector<int64_t> positions(count);
  for (int64_t i = 0; i < count; ++i)
    positions[i] = i;
  return DenseElementsAttr::get(type, ArrayRef<int64_t>(positions));
}
