//===- GenericForms.h - what a linalg.generic computes -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache pass reads roles off generic bodies and indexing maps, never off
// op names. These predicates name the bodies it follows (a multiply-add
// contraction, a max or sum reduction, an init of zeros) and check an
// elementwise formula by evaluating it, for the attention matcher and for
// the rewrites that bring other spellings to its form.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_GENERICFORMS_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_GENERICFORMS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::kvq {

/// A generic whose body is `yield (acc + a * b)`, with a and b possibly
/// extended first (f16/bf16 inputs into an f32 accumulator): a contraction.
bool isMulAddContraction(linalg::GenericOp g);

/// The init of a contraction must start at zero (linalg.fill 0, or a zero
/// constant).
bool startsAtZero(Value init);

/// A running max over one input into output 0: `maximumf`/`maxnumf` of
/// the element and the accumulator (torch's max.dim also carries the
/// argmax in a second output, which nothing here reads).
bool isMaxReduction(linalg::GenericOp g);

/// A made-up value for element `idx` of a tensor, different across
/// elements, for checking elementwise formulas by evaluation.
double sampleValue(ArrayRef<int64_t> idx);

/// Whether `out` is `f(a[idx], b)` elementwise at a few sampled indices,
/// with `a`'s elements made up and `b` (a row statistic, or null) a
/// constant; evaluated through elementwise generics, conversions and
/// reshapes only.
bool computesElementwise(Value out, Value a, Value b,
                         function_ref<double(double, double)> f);

/// A reduction generic `yield OpT(in, acc)` (either order).
template <typename OpT> bool isReduction(linalg::GenericOp g) {
  Block &b = g.getRegion().front();
  if (g.getNumDpsInputs() != 1 || b.getOperations().size() != 2)
    return false;
  auto op = dyn_cast<OpT>(&b.front());
  if (!op)
    return false;
  Value in = b.getArgument(0), acc = b.getArgument(1);
  return ((op.getLhs() == in && op.getRhs() == acc) ||
          (op.getLhs() == acc && op.getRhs() == in)) &&
         b.getTerminator()->getOperand(0) == op;
}

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_KVCACHE_GENERICFORMS_H
