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

/// A tensor every element of which is a constant satisfying `want`: a
/// linalg.fill of a constant, or a splat constant.
bool filledWith(Value v, function_ref<bool(const APFloat &)> want);

/// The init of a contraction or a sum must start at zero (linalg.fill 0, or
/// a zero constant).
bool startsAtZero(Value init);

/// The init of a running max: -inf, or the most negative finite value (as
/// torch's finfo.min), where every score that counts is larger.
bool startsAtLowest(Value init);

/// A running max over one input into output 0: `maximumf`/`maxnumf` of
/// the element and the accumulator (torch's max.dim also carries the
/// argmax in a second output, which nothing here reads).
bool isMaxReduction(linalg::GenericOp g);

/// A made-up value for element `idx` of a tensor, different across
/// elements, for checking elementwise formulas by evaluation.
double sampleValue(ArrayRef<int64_t> idx);

/// Whether an evaluated element matches the formula's: the same infinity,
/// or equal to 1e-9 relative.
bool sameSample(double got, double want);

/// Whether `out` is `f(root[idx])` at a few sampled indices of `out`, with
/// `root`'s elements made up and each `bound` value a constant; evaluated
/// through elementwise generics, conversions and reshapes only.
bool evaluatesTo(Value out, Value root,
                 ArrayRef<std::pair<Value, double>> bound,
                 function_ref<double(double)> f);

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
