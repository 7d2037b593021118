//===- ElementEvaluator.h - one tensor element, computed in double -*- C++ -*-//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache pass proves facts about a graph by evaluating it, not by reading
// its spelling: that a key is RoPE(x) (RopeMatcher), that the ops between the
// scores and the softmax scale every visible score by one constant and hide
// exactly the positions after the query's own (AttentionMatcher). Both ask
// for one element of a tensor at a time; this interpreter computes it from
// the ops in front (elementwise linalg.generic bodies, fills, constants,
// reshapes, slices, the write position) down to a chosen root tensor whose
// elements the caller supplies. What it cannot evaluate makes it fail with a
// reason and the op to point at, so nothing unproven is ever accepted.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_ELEMENTEVALUATOR_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_ELEMENTEVALUATOR_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <optional>
#include <string>

namespace mlir::kvq {

class ElementEvaluator {
public:
  using Leaf = std::function<std::optional<double>(ArrayRef<int64_t>)>;

  /// Elements of `root` come from `leaf`; the index value `pos` evaluates to
  /// `posValue`. `argumentWhy` is the reason given when a function argument
  /// other than `pos` (or one of `arguments`) is needed.
  ElementEvaluator(Value root, Leaf leaf, Value pos, int64_t posValue,
                   std::string argumentWhy);

  /// Elements of the function argument (or other value) `v` come from `leaf`
  /// too (an attention mask passed in, under a stated assumption).
  void bind(Value v, Leaf leaf) { bound_[v] = std::move(leaf); }

  /// Element `idx` of tensor `v`.
  std::optional<double> element(Value v, ArrayRef<int64_t> idx, int depth = 0);
  /// A scalar (index, integer or float) value defined outside any body.
  std::optional<double> scalar(Value v, int depth = 0);

  const std::string &why() const { return why_; }
  Location where() const { return where_; }

private:
  std::optional<double> fail(Operation *op, const Twine &reason);
  void locate(Operation *op);
  std::optional<double> evalOp(Operation &op,
                               function_ref<std::optional<double>(Value)> get,
                               int depth);
  std::optional<double> generic(Operation *g, unsigned result,
                                ArrayRef<int64_t> idx, int depth);

  Value root_;
  Leaf leaf_;
  Value pos_;
  int64_t posValue_;
  std::string argumentWhy_;
  llvm::DenseMap<Value, Leaf> bound_;
  std::string why_;
  Location where_;
  bool located_ = false;
};

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_KVCACHE_ELEMENTEVALUATOR_H
