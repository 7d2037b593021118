//===- ElementEvaluator.cpp - one tensor element, computed in double -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Elements are computed on demand, one at a time: a proof samples a few
// hundred elements of tensors whose whole size may be a model's context.
//
//===----------------------------------------------------------------------===//
#include "passes/transforms/kvcache/ElementEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kvq;

namespace {
using Index = SmallVector<int64_t, 4>;
constexpr int kMaxDepth = 64;

double compareF(arith::CmpFPredicate p, double a, double b) {
  const bool unordered = std::isnan(a) || std::isnan(b);
  switch (p) {
  case arith::CmpFPredicate::AlwaysFalse:
    return 0;
  case arith::CmpFPredicate::AlwaysTrue:
    return 1;
  case arith::CmpFPredicate::OEQ:
    return !unordered && a == b;
  case arith::CmpFPredicate::OGT:
    return !unordered && a > b;
  case arith::CmpFPredicate::OGE:
    return !unordered && a >= b;
  case arith::CmpFPredicate::OLT:
    return !unordered && a < b;
  case arith::CmpFPredicate::OLE:
    return !unordered && a <= b;
  case arith::CmpFPredicate::ONE:
    return !unordered && a != b;
  case arith::CmpFPredicate::ORD:
    return !unordered;
  case arith::CmpFPredicate::UEQ:
    return unordered || a == b;
  case arith::CmpFPredicate::UGT:
    return unordered || a > b;
  case arith::CmpFPredicate::UGE:
    return unordered || a >= b;
  case arith::CmpFPredicate::ULT:
    return unordered || a < b;
  case arith::CmpFPredicate::ULE:
    return unordered || a <= b;
  case arith::CmpFPredicate::UNE:
    return unordered || a != b;
  case arith::CmpFPredicate::UNO:
    return unordered;
  }
  return 0;
}

double compareI(arith::CmpIPredicate p, double a, double b) {
  switch (p) {
  case arith::CmpIPredicate::eq:
    return a == b;
  case arith::CmpIPredicate::ne:
    return a != b;
  case arith::CmpIPredicate::slt:
  case arith::CmpIPredicate::ult:
    return a < b;
  case arith::CmpIPredicate::sle:
  case arith::CmpIPredicate::ule:
    return a <= b;
  case arith::CmpIPredicate::sgt:
  case arith::CmpIPredicate::ugt:
    return a > b;
  case arith::CmpIPredicate::sge:
  case arith::CmpIPredicate::uge:
    return a >= b;
  }
  return 0;
}
} // namespace

ElementEvaluator::ElementEvaluator(Value root, Leaf leaf, Value pos,
                                   int64_t posValue, std::string argumentWhy)
    : root_(root), leaf_(std::move(leaf)), pos_(pos), posValue_(posValue),
      argumentWhy_(std::move(argumentWhy)), where_(root.getLoc()) {}

std::optional<double> ElementEvaluator::fail(Operation *op,
                                             const Twine &reason) {
  if (why_.empty())
    why_ = reason.str();
  locate(op);
  return std::nullopt;
}

void ElementEvaluator::locate(Operation *op) {
  if (op && !located_) {
    where_ = op->getLoc();
    located_ = true;
  }
}

std::optional<double> ElementEvaluator::scalar(Value v, int depth) {
  if (v == pos_)
    return static_cast<double>(posValue_);
  if (auto it = bound_.find(v); it != bound_.end())
    return it->second({});
  Operation *op = v.getDefiningOp();
  if (!op)
    return fail(nullptr, argumentWhy_);
  return evalOp(
      *op, [&](Value o) { return scalar(o, depth + 1); }, depth);
}

std::optional<double>
ElementEvaluator::evalOp(Operation &op,
                         function_ref<std::optional<double>(Value)> get,
                         int depth) {
  if (depth > kMaxDepth)
    return fail(&op, "the computation is too deep to evaluate");
  auto operand = [&](unsigned i) {
    std::optional<double> v = get(op.getOperand(i));
    if (!v)
      locate(&op);
    return v;
  };
  auto binary = [&](auto f) -> std::optional<double> {
    auto a = operand(0), b = operand(1);
    if (!a || !b)
      return std::nullopt;
    return f(*a, *b);
  };
  auto unary = [&](auto f) -> std::optional<double> {
    auto a = operand(0);
    if (!a)
      return std::nullopt;
    return f(*a);
  };
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (auto f = dyn_cast<FloatAttr>(c.getValue()))
      return f.getValueAsDouble();
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return static_cast<double>(i.getType().isInteger(1)
                                     ? i.getValue().getZExtValue()
                                     : i.getValue().getSExtValue());
    return fail(&op, "a non-scalar constant is used as a scalar");
  }
  if (isa<arith::AddIOp, arith::AddFOp>(op))
    return binary([](double a, double b) { return a + b; });
  if (isa<arith::SubIOp, arith::SubFOp>(op))
    return binary([](double a, double b) { return a - b; });
  if (isa<arith::MulIOp, arith::MulFOp>(op))
    return binary([](double a, double b) { return a * b; });
  if (isa<arith::DivFOp>(op))
    return binary([](double a, double b) { return a / b; });
  if (isa<arith::DivSIOp, arith::DivUIOp>(op))
    return binary([](double a, double b) { return std::trunc(a / b); });
  if (isa<arith::FloorDivSIOp>(op))
    return binary([](double a, double b) { return std::floor(a / b); });
  if (isa<arith::CeilDivSIOp, arith::CeilDivUIOp>(op))
    return binary([](double a, double b) { return std::ceil(a / b); });
  if (isa<arith::RemSIOp, arith::RemUIOp>(op))
    return binary([](double a, double b) { return std::fmod(a, b); });
  if (isa<arith::MaxSIOp, arith::MaxUIOp, arith::MaximumFOp, arith::MaxNumFOp>(
          op))
    return binary([](double a, double b) { return std::max(a, b); });
  if (isa<arith::MinSIOp, arith::MinUIOp, arith::MinimumFOp, arith::MinNumFOp>(
          op))
    return binary([](double a, double b) { return std::min(a, b); });
  if (isa<arith::AndIOp>(op))
    return binary([](double a, double b) {
      return double(int64_t(a) & int64_t(b));
    });
  if (isa<arith::OrIOp>(op))
    return binary([](double a, double b) {
      return double(int64_t(a) | int64_t(b));
    });
  if (isa<arith::XOrIOp>(op)) {
    // i1 xor (a boolean not) must stay 0/1.
    bool boolean = op.getResult(0).getType().isInteger(1);
    return binary([&](double a, double b) {
      int64_t r = int64_t(a) ^ int64_t(b);
      return double(boolean ? (r & 1) : r);
    });
  }
  if (isa<arith::NegFOp>(op))
    return unary([](double a) { return -a; });
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::SIToFPOp,
          arith::UIToFPOp, arith::ExtFOp, arith::TruncFOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp, arith::FPToSIOp, arith::FPToUIOp>(
          op))
    return unary([](double a) { return a; });
  if (isa<math::CosOp>(op))
    return unary([](double a) { return std::cos(a); });
  if (isa<math::SinOp>(op))
    return unary([](double a) { return std::sin(a); });
  if (isa<math::ExpOp>(op))
    return unary([](double a) { return std::exp(a); });
  if (isa<math::Exp2Op>(op))
    return unary([](double a) { return std::exp2(a); });
  if (isa<math::LogOp>(op))
    return unary([](double a) { return std::log(a); });
  if (isa<math::SqrtOp>(op))
    return unary([](double a) { return std::sqrt(a); });
  if (isa<math::RsqrtOp>(op))
    return unary([](double a) { return 1.0 / std::sqrt(a); });
  if (isa<math::PowFOp, math::FPowIOp>(op))
    return binary([](double a, double b) { return std::pow(a, b); });
  if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    return binary([&](double a, double b) {
      return compareI(cmp.getPredicate(), a, b);
    });
  if (auto cmp = dyn_cast<arith::CmpFOp>(op))
    return binary([&](double a, double b) {
      return compareF(cmp.getPredicate(), a, b);
    });
  if (isa<arith::SelectOp>(op)) {
    auto c = operand(0);
    if (!c)
      return std::nullopt;
    return operand(*c != 0.0 ? 1 : 2);
  }
  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    Index idx;
    for (Value i : extract.getIndices()) {
      auto v = get(i);
      if (!v)
        return std::nullopt;
      idx.push_back(static_cast<int64_t>(*v));
    }
    return element(extract.getTensor(), idx, depth + 1);
  }
  return fail(&op, "cannot evaluate '" + op.getName().getStringRef() + "'");
}

std::optional<double> ElementEvaluator::generic(Operation *op, unsigned result,
                                                ArrayRef<int64_t> idx,
                                                int depth) {
  auto g = cast<linalg::GenericOp>(op);
  if (g.getNumReductionLoops() != 0)
    return fail(g, "a reduction sits on the way");
  AffineMap out = g.getIndexingMapsArray()[g.getNumDpsInputs() + result];
  if (!out.isPermutation())
    return fail(g, "an output indexing map is not a permutation");
  Index loops(out.getNumDims(), 0);
  for (unsigned i = 0; i < out.getNumResults(); ++i)
    loops[out.getDimPosition(i)] = idx[i];
  Block &body = g.getRegion().front();
  llvm::SmallDenseMap<Value, double, 16> vals;
  std::function<std::optional<double>(Value)> get =
      [&](Value v) -> std::optional<double> {
    if (auto it = vals.find(v); it != vals.end())
      return it->second;
    if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body) {
      OpOperand &operand = g->getOpOperand(arg.getArgNumber());
      if (g.isDpsInit(&operand) && !g.payloadUsesValueFromOperand(&operand))
        return fail(g, "an output value is read");
      AffineMap map = g.getMatchingIndexingMap(&operand);
      Index at;
      for (AffineExpr e : map.getResults()) {
        auto folded = dyn_cast<AffineConstantExpr>(
            e.replaceDimsAndSymbols(
                 llvm::map_to_vector(loops,
                                     [&](int64_t l) {
                                       return getAffineConstantExpr(
                                           l, g.getContext());
                                     }),
                 {}));
        if (!folded)
          return fail(g, "an indexing map with symbols");
        at.push_back(folded.getValue());
      }
      auto e = element(operand.get(), at, depth + 1);
      if (e)
        vals[v] = *e;
      return e;
    }
    if (v.getParentRegion() == &g.getRegion())
      return std::nullopt; // not computed yet: cannot happen in SSA order
    return scalar(v, depth + 1);
  };
  for (Operation &bodyOp : body) {
    if (auto yield = dyn_cast<linalg::YieldOp>(bodyOp))
      return get(yield.getOperand(result));
    if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
      vals[index] = static_cast<double>(loops[index.getDim()]);
      continue;
    }
    if (bodyOp.getNumResults() != 1)
      return fail(&bodyOp,
                  "cannot evaluate '" + bodyOp.getName().getStringRef() + "'");
    auto r = evalOp(bodyOp, get, depth + 1);
    if (!r)
      return std::nullopt;
    vals[bodyOp.getResult(0)] = *r;
  }
  return fail(g, "a generic body without a yield");
}

std::optional<double> ElementEvaluator::element(Value v, ArrayRef<int64_t> idx,
                                                int depth) {
  if (v == root_)
    return leaf_(idx);
  if (auto it = bound_.find(v); it != bound_.end())
    return it->second(idx);
  if (depth > kMaxDepth)
    return fail(v.getDefiningOp(), "the computation is too deep to evaluate");
  Operation *op = v.getDefiningOp();
  if (!op)
    return fail(nullptr, argumentWhy_);
  if (isa<linalg::GenericOp>(op))
    return generic(op, cast<OpResult>(v).getResultNumber(), idx, depth);
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return scalar(fill.getInputs()[0], depth + 1);
  if (auto e = dyn_cast<tensor::ExpandShapeOp>(op)) {
    // Each source dim is a group of result dims (row-major within it).
    ArrayRef<int64_t> shape = e.getResultType().getShape();
    Index src;
    for (const ReassociationIndices &group : e.getReassociationIndices()) {
      int64_t linear = 0;
      for (int64_t d : group) {
        if (d != group.front() && ShapedType::isDynamic(shape[d]))
          return fail(op, "an expand_shape with a dynamic inner size");
        linear = linear * (d == group.front() ? 1 : shape[d]) + idx[d];
      }
      src.push_back(linear);
    }
    return element(e.getSrc(), src, depth + 1);
  }
  if (auto c = dyn_cast<tensor::CollapseShapeOp>(op)) {
    ArrayRef<int64_t> shape = c.getSrcType().getShape();
    Index src(shape.size(), 0);
    for (auto [j, group] : llvm::enumerate(c.getReassociationIndices())) {
      int64_t rest = idx[j];
      for (int64_t d : llvm::reverse(group)) {
        if (d == group.front()) {
          src[d] = rest;
          break;
        }
        if (ShapedType::isDynamic(shape[d]))
          return fail(op, "a collapse_shape with a dynamic inner size");
        src[d] = rest % shape[d];
        rest /= shape[d];
      }
    }
    return element(c.getSrc(), src, depth + 1);
  }
  if (auto s = dyn_cast<tensor::ExtractSliceOp>(op)) {
    llvm::SmallBitVector dropped = s.getDroppedDims();
    Index src;
    unsigned r = 0;
    for (auto [d, offset, stride] :
         llvm::enumerate(s.getMixedOffsets(), s.getMixedStrides())) {
      auto value = [&](OpFoldResult f) -> std::optional<double> {
        if (auto a = dyn_cast<Attribute>(f))
          return static_cast<double>(cast<IntegerAttr>(a).getInt());
        return scalar(cast<Value>(f), depth + 1);
      };
      auto o = value(offset), st = value(stride);
      if (!o || !st)
        return std::nullopt;
      int64_t i = dropped.test(d) ? 0 : idx[r++];
      src.push_back(static_cast<int64_t>(*o) + i * static_cast<int64_t>(*st));
    }
    return element(s.getSource(), src, depth + 1);
  }
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!dense || !type || !type.hasStaticShape())
      return fail(op, "a constant that is not a dense table");
    int64_t linear = 0;
    for (auto [i, n] : llvm::zip(idx, type.getShape())) {
      if (i < 0 || i >= n)
        return fail(op, "a table is read out of its bounds");
      linear = linear * n + i;
    }
    if (dense.isSplat())
      linear = 0;
    Type el = type.getElementType();
    if (isa<FloatType>(el))
      return dense.getValues<APFloat>()[linear].convertToDouble();
    if (el.isInteger(1))
      return dense.getValues<APInt>()[linear].getZExtValue() ? 1.0 : 0.0;
    if (isa<IntegerType, IndexType>(el))
      return static_cast<double>(
          dense.getValues<APInt>()[linear].getSExtValue());
    return fail(op, "a constant of an unknown element type");
  }
  if (isa<arith::TruncFOp, arith::ExtFOp>(op))
    return element(op->getOperand(0), idx, depth + 1);
  return fail(op, "cannot evaluate '" + op->getName().getStringRef() + "'");
}
