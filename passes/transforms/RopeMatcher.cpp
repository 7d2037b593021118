//===- RopeMatcher.cpp - prove that a cached key is RoPE(x) ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The interpreter evaluates one element at a time, on demand, in double:
// what it cannot evaluate (a value that is neither the candidate x, a
// constant, nor the write position) makes the match fail, so a rotation
// whose angle depends on anything but pos + t is never taken for a RoPE.
//
//===----------------------------------------------------------------------===//
#include "passes/transforms/RopeMatcher.h"

#include "kvq/config_limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::kvq;

namespace {

using Index = SmallVector<int64_t, 4>;

class Evaluator {
public:
  Evaluator(Value root, std::function<double(ArrayRef<int64_t>)> leaf,
            Value pos, int64_t posValue)
      : root_(root), leaf_(std::move(leaf)), pos_(pos), posValue_(posValue),
        where_(root.getLoc()) {}

  /// Element idx of tensor v.
  std::optional<double> element(Value v, ArrayRef<int64_t> idx, int depth = 0);
  const std::string &why() const { return why_; }
  Location where() const { return where_; }

private:
  std::optional<double> fail(Operation *op, const Twine &reason) {
    if (why_.empty())
      why_ = reason.str();
    locate(op);
    return std::nullopt;
  }
  /// Point at the innermost op that failed (or used what failed).
  void locate(Operation *op) {
    if (op && !located_) {
      where_ = op->getLoc();
      located_ = true;
    }
  }
  /// A scalar defined outside a generic body (pos, constants, arith).
  std::optional<double> scalar(Value v, int depth);
  /// One scalar op with its operands looked up by `get`.
  std::optional<double> evalOp(Operation &op,
                               function_ref<std::optional<double>(Value)> get,
                               int depth);
  std::optional<double> generic(linalg::GenericOp g, unsigned result,
                                ArrayRef<int64_t> idx, int depth);

  Value root_;
  std::function<double(ArrayRef<int64_t>)> leaf_;
  Value pos_;
  int64_t posValue_;
  std::string why_;
  Location where_;
  bool located_ = false;
};

constexpr int kMaxDepth = 48;

std::optional<double> Evaluator::scalar(Value v, int depth) {
  if (v == pos_)
    return static_cast<double>(posValue_);
  Operation *op = v.getDefiningOp();
  if (!op)
    return fail(nullptr, "the rotation depends on a function argument other "
                         "than the write position");
  return evalOp(
      *op, [&](Value o) { return scalar(o, depth + 1); }, depth);
}

std::optional<double>
Evaluator::evalOp(Operation &op, function_ref<std::optional<double>(Value)> get,
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
  if (isa<arith::RemSIOp, arith::RemUIOp>(op))
    return binary([](double a, double b) { return std::fmod(a, b); });
  if (isa<arith::NegFOp>(op))
    return unary([](double a) { return -a; });
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::SIToFPOp,
          arith::UIToFPOp, arith::ExtFOp, arith::TruncFOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op))
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
  if (isa<math::PowFOp, math::FPowIOp>(op))
    return binary([](double a, double b) { return std::pow(a, b); });
  if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    return binary([&](double a, double b) -> double {
      switch (cmp.getPredicate()) {
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
      return 0.0;
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

std::optional<double> Evaluator::generic(linalg::GenericOp g, unsigned result,
                                         ArrayRef<int64_t> idx, int depth) {
  if (g.getNumReductionLoops() != 0)
    return fail(g, "a reduction sits between the key and its candidate "
                   "pre-rotation value");
  AffineMap out = g.getIndexingMapsArray()[g.getNumDpsInputs() + result];
  if (!out.isPermutation())
    return fail(g, "an output indexing map is not a permutation");
  Index loops(out.getNumDims(), 0);
  for (unsigned i = 0; i < out.getNumResults(); ++i)
    loops[out.getDimPosition(i)] = idx[i];
  Block &body = g.getRegion().front();
  DenseMap<Value, double> vals;
  std::function<std::optional<double>(Value)> get =
      [&](Value v) -> std::optional<double> {
    if (auto it = vals.find(v); it != vals.end())
      return it->second;
    if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body) {
      OpOperand &operand = g->getOpOperand(arg.getArgNumber());
      AffineMap map = g.getMatchingIndexingMap(&operand);
      auto e = element(operand.get(), map.compose(loops), depth + 1);
      if (e)
        vals[v] = *e;
      return e;
    }
    if (v.getParentRegion() == &g.getRegion())
      return std::nullopt; // not computed yet: cannot happen in SSA order
    return scalar(v, depth + 1);
  };
  for (Operation &op : body) {
    if (auto yield = dyn_cast<linalg::YieldOp>(op))
      return get(yield.getOperand(result));
    if (auto index = dyn_cast<linalg::IndexOp>(op)) {
      vals[index] = static_cast<double>(loops[index.getDim()]);
      continue;
    }
    if (op.getNumResults() != 1)
      return fail(&op, "cannot evaluate '" + op.getName().getStringRef() + "'");
    auto r = evalOp(op, get, depth + 1);
    if (!r)
      return std::nullopt;
    vals[op.getResult(0)] = *r;
  }
  return fail(g, "a generic body without a yield");
}

std::optional<double> Evaluator::element(Value v, ArrayRef<int64_t> idx,
                                         int depth) {
  if (v == root_)
    return leaf_(idx);
  if (depth > kMaxDepth)
    return fail(v.getDefiningOp(), "the computation is too deep to evaluate");
  Operation *op = v.getDefiningOp();
  if (!op)
    return fail(nullptr, "the key depends on a tensor argument other than "
                         "its candidate pre-rotation value");
  if (auto g = dyn_cast<linalg::GenericOp>(op))
    return generic(g, cast<OpResult>(v).getResultNumber(), idx, depth);
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
    if (!dense || !type || !type.hasStaticShape() ||
        !isa<FloatType>(type.getElementType()))
      return fail(op, "a constant that is not a dense float table");
    int64_t linear = 0;
    for (auto [i, n] : llvm::zip(idx, type.getShape())) {
      if (i < 0 || i >= n)
        return fail(op, "a table is read out of its bounds");
      linear = linear * n + i;
    }
    return dense.getValues<APFloat>()[linear].convertToDouble();
  }
  if (isa<arith::TruncFOp, arith::ExtFOp>(op))
    return element(op->getOperand(0), idx, depth + 1);
  return fail(op, "cannot evaluate '" + op->getName().getStringRef() + "'");
}

/// A deterministic probe input in [-1, 1) for element idx.
double probe(ArrayRef<int64_t> idx, uint64_t seed) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ull;
  for (int64_t i : idx)
    h = (h ^ static_cast<uint64_t>(i)) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) / 4503599627370496.0 - 1.0;
}

/// The tensors of the key's shape in front of it, nearest first.
SmallVector<Value> candidates(Value key) {
  auto type = cast<RankedTensorType>(key.getType());
  llvm::SetVector<Value> seen;
  SmallVector<Value> found, queue = {key};
  for (size_t i = 0; i < queue.size() && seen.size() < 64; ++i) {
    Operation *op = queue[i].getDefiningOp();
    if (!op ||
        !isa<linalg::GenericOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             arith::TruncFOp, arith::ExtFOp>(op))
      continue;
    SmallVector<Value> ins;
    if (auto g = dyn_cast<linalg::GenericOp>(op))
      llvm::append_range(ins, g.getDpsInputs());
    else
      ins.push_back(op->getOperand(0));
    for (Value in : ins) {
      if (!seen.insert(in))
        continue;
      queue.push_back(in);
      auto t = dyn_cast<RankedTensorType>(in.getType());
      if (t && t.getShape() == type.getShape() &&
          isa<FloatType>(t.getElementType()))
        found.push_back(in);
    }
  }
  return found;
}

/// RoPE of probe x at (t, h, c), in double.
double ropeOf(uint64_t seed, int64_t t, int64_t h, int64_t c, int64_t d,
              double position, double theta, RopeStyle style) {
  const bool inter = style == RopeStyle::Interleaved;
  const int64_t i = inter ? c / 2 : c % (d / 2);
  const int64_t a = inter ? 2 * i : i, b = inter ? 2 * i + 1 : i + d / 2;
  const double angle = position * std::pow(theta, -2.0 * i / d);
  const double x = probe({t, h, a}, seed), y = probe({t, h, b}, seed);
  return c == a ? x * std::cos(angle) - y * std::sin(angle)
                : x * std::sin(angle) + y * std::cos(angle);
}

} // namespace

FailureOr<RopeMatch> mlir::kvq::matchRope(Value key, Value pos, int64_t context,
                                          std::string &why, Location &where) {
  auto type = cast<RankedTensorType>(key.getType());
  if (!type.hasStaticShape() || type.getRank() != 3) {
    why = "the key has a dynamic shape";
    return failure();
  }
  const int64_t n = type.getDimSize(0), heads = type.getDimSize(1),
                d = type.getDimSize(2);
  if (d % 2 != 0 || d < 4) {
    why = "head_dim " + std::to_string(d) + " has no channel pairs to rotate";
    return failure();
  }
  SmallVector<Value> xs = candidates(key);
  if (xs.empty()) {
    why = "no rotation found in front of the key";
    return failure();
  }
  for (Value x : xs) {
    for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::Half}) {
      // Pair 1 of token 0 at position 1 turns by theta^(-2/d): a unit
      // vector on its first channel comes out as (cos, sin) of that angle.
      const bool inter = style == RopeStyle::Interleaved;
      const int64_t a = inter ? 2 : 1, b = inter ? 3 : 1 + d / 2;
      Evaluator unit(
          x,
          [&](ArrayRef<int64_t> i) {
            return i[0] == 0 && i[1] == 0 && i[2] == a ? 1.0 : 0.0;
          },
          pos, /*posValue=*/1);
      auto ca = unit.element(key, {0, 0, a});
      auto sb = ca ? unit.element(key, {0, 0, b}) : std::nullopt;
      if (!ca || !sb) {
        why = unit.why();
        where = unit.where();
        break; // the same op stops the other style too
      }
      const double angle = std::atan2(*sb, *ca);
      if (!(angle > 0.0 && angle < 1.0) ||
          std::fabs(std::hypot(*ca, *sb) - 1.0) > 1e-3) {
        why = "the key is not a rotation of channel pairs of any candidate "
              "pre-rotation value";
        if (Operation *op = key.getDefiningOp())
          where = op->getLoc();
        continue;
      }
      double theta = std::pow(angle, -0.5 * static_cast<double>(d));
      // Snap to 6 significant digits: the graph computes in f32.
      const double scale =
          std::pow(10.0, 5 - static_cast<int>(std::floor(std::log10(theta))));
      theta = std::nearbyint(theta * scale) / scale;
      if (const char *rule = ::kvq::ropeRule(theta, d)) {
        why = std::string("the rotation's base ") + std::to_string(theta) +
              " breaks the runtime's rule: " + rule;
        if (Operation *op = key.getDefiningOp())
          where = op->getLoc();
        continue;
      }
      // Every channel of the first and last token and head, on random
      // input, at several write positions.
      bool ok = true;
      // Write positions: the first, an early one, the last the context
      // allows (constant tables cover exactly the context).
      const int64_t last = std::max<int64_t>(context - n, 0);
      for (int64_t p : {int64_t{0}, std::min<int64_t>(5, last), last}) {
        for (uint64_t seed : {1u, 2u}) {
          Evaluator e(
              x, [&](ArrayRef<int64_t> i) { return probe(i, seed); }, pos, p);
          for (int64_t t : {int64_t{0}, n - 1})
            for (int64_t h : {int64_t{0}, heads - 1})
              for (int64_t c = 0; c < d && ok; ++c) {
                auto got = e.element(key, {t, h, c});
                double want =
                    ropeOf(seed, t, h, c, d, double(p + t), theta, style);
                if (!got) {
                  why = e.why();
                  where = e.where();
                  ok = false;
                } else if (std::fabs(*got - want) >
                           1e-3 * (1 + std::fabs(want))) {
                  why = "key channel " + std::to_string(c) + " at position " +
                        std::to_string(p + t) + " is " + std::to_string(*got) +
                        ", a RoPE would give " + std::to_string(want);
                  ok = false;
                }
              }
          if (!ok)
            break;
        }
        if (!ok)
          break;
      }
      if (ok)
        return RopeMatch{x, theta, style};
    }
  }
  return failure();
}
