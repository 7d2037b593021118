//===- GenericForms.cpp - what a linalg.generic computes -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/transforms/kvcache/GenericForms.h"
#include "passes/transforms/kvcache/ElementEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

bool mlir::kvq::isMulAddContraction(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 1)
    return false;
  Block &b = g.getRegion().front();
  auto add = dyn_cast<arith::AddFOp>(
      b.getTerminator()->getOperand(0).getDefiningOp());
  if (!add || add->getBlock() != &b)
    return false;
  Value a0 = b.getArgument(0), a1 = b.getArgument(1), acc = b.getArgument(2);
  Value product = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == acc) == (add.getRhs() == acc))
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &b)
    return false;
  auto operandOf = [&](Value v) {
    if (auto ext = v.getDefiningOp<arith::ExtFOp>();
        ext && ext->getBlock() == &b)
      v = ext.getIn();
    return v;
  };
  Value l = operandOf(mul.getLhs()), r = operandOf(mul.getRhs());
  // Nothing else in the body.
  if (b.getOperations().size() >
      3 + size_t(l != mul.getLhs()) + size_t(r != mul.getRhs()))
    return false;
  return (l == a0 && r == a1) || (l == a1 && r == a0);
}

bool mlir::kvq::filledWith(Value v, function_ref<bool(const APFloat &)> want) {
  FloatAttr f;
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.getInputs()[0], m_Constant(&f)) &&
           want(f.getValue());
  DenseFPElementsAttr dense;
  return matchPattern(v, m_Constant(&dense)) && dense.isSplat() &&
         want(dense.getSplatValue<APFloat>());
}

bool mlir::kvq::startsAtZero(Value init) {
  return filledWith(init, [](const APFloat &f) { return f.isZero(); });
}

bool mlir::kvq::startsAtLowest(Value init) {
  return filledWith(init, [](const APFloat &f) {
    return f.isNegative() && (f.isInfinity() || f.isLargest());
  });
}

bool mlir::kvq::isMaxReduction(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumReductionLoops() != 1)
    return false;
  Block &b = g.getRegion().front();
  Operation *max = b.getTerminator()->getOperand(0).getDefiningOp();
  if (!isa_and_nonnull<arith::MaximumFOp, arith::MaxNumFOp>(max) ||
      max->getBlock() != &b)
    return false;
  Value in = b.getArgument(0), acc = b.getArgument(1);
  return (max->getOperand(0) == in && max->getOperand(1) == acc) ||
         (max->getOperand(0) == acc && max->getOperand(1) == in);
}

double mlir::kvq::sampleValue(ArrayRef<int64_t> idx) {
  double v = 0.3;
  for (auto [k, i] : llvm::enumerate(idx))
    v += 0.17 * double(i) * double(k + 1) - 0.05 * double(i % 3);
  return v;
}

bool mlir::kvq::sameSample(double got, double want) {
  if (std::isinf(got) || std::isinf(want))
    return got == want;
  return std::abs(got - want) <= 1e-9 * (1 + std::abs(want));
}

bool mlir::kvq::evaluatesTo(Value out, Value root,
                            ArrayRef<std::pair<Value, double>> bound,
                            function_ref<double(double)> f) {
  auto type = cast<RankedTensorType>(out.getType());
  for (int variant = 0; variant < 3; ++variant) {
    SmallVector<int64_t> idx;
    for (int64_t n : type.getShape())
      idx.push_back(ShapedType::isDynamic(n) ? variant : (n - 1) * variant / 2);
    ElementEvaluator e(root, sampleValue, Value(), 0, "an argument");
    for (auto [v, c] : bound)
      e.bind(v, [c = c](ArrayRef<int64_t>) { return c; });
    // `root` is read at the output's index: elementwise over one layout.
    std::optional<double> got = e.element(out, idx);
    if (!got || !sameSample(*got, f(sampleValue(idx))))
      return false;
  }
  return true;
}

bool mlir::kvq::computesElementwise(Value out, Value a, Value b,
                                    function_ref<double(double, double)> f) {
  for (double bv : {0.5, -1.25}) {
    SmallVector<std::pair<Value, double>> bound;
    if (b)
      bound.push_back({b, bv});
    if (!evaluatesTo(out, a, bound, [&](double x) { return f(x, bv); }))
      return false;
  }
  return true;
}
