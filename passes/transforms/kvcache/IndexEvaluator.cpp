//===- IndexEvaluator.cpp - small integer tensors as affine forms ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "IndexEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::kvq;

namespace {

using Form = std::optional<AffineIndex>; // nullopt: never written
using Forms = SmallVector<Form>;

/// Iteration points of a linalg op walked at most: the index computations
/// this serves have a few hundred.
constexpr int64_t kMaxPoints = 1 << 16;
constexpr int kMaxDepth = 64;

AffineIndex constantForm(int64_t c) {
  AffineIndex f;
  f.constant = c;
  return f;
}

/// a + sign * b, terms merged (wrapping like the hardware's integers).
AffineIndex addForms(const AffineIndex &a, const AffineIndex &b, int64_t sign) {
  AffineIndex r = a;
  r.constant = static_cast<int64_t>(static_cast<uint64_t>(r.constant) +
                                    static_cast<uint64_t>(sign * b.constant));
  for (const auto &term : b.terms) {
    auto *it = llvm::find_if(
        r.terms, [&](const auto &t) { return t.first == term.first; });
    if (it == r.terms.end())
      r.terms.push_back({term.first, sign * term.second});
    else
      it->second += sign * term.second;
  }
  llvm::erase_if(r.terms, [](const auto &t) { return t.second == 0; });
  return r;
}

std::optional<AffineIndex> mulForms(const AffineIndex &a,
                                    const AffineIndex &b) {
  if (!a.terms.empty() && !b.terms.empty())
    return std::nullopt; // a product of two unknowns is not affine
  const AffineIndex &k = a.terms.empty() ? a : b;
  const AffineIndex &x = a.terms.empty() ? b : a;
  AffineIndex r;
  r.constant = static_cast<int64_t>(static_cast<uint64_t>(x.constant) *
                                    static_cast<uint64_t>(k.constant));
  for (const auto &[leaf, c] : x.terms)
    if (c * k.constant != 0)
      r.terms.push_back({leaf, c * k.constant});
  return r;
}

int64_t linearize(ArrayRef<int64_t> idx, ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (auto [i, n] : llvm::zip(idx, shape))
    flat = flat * n + i;
  return flat;
}

SmallVector<int64_t> delinearize(int64_t flat, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

/// Advances `p` lexicographically within `ranges`; false past the end.
bool next(SmallVector<int64_t> &p, ArrayRef<int64_t> ranges) {
  for (int64_t d = static_cast<int64_t>(p.size()) - 1; d >= 0; --d) {
    if (++p[d] < ranges[d])
      return true;
    p[d] = 0;
  }
  return false;
}

class Evaluator {
public:
  Evaluator(unsigned minWidth, int64_t maxElements)
      : minWidth_(minWidth), maxElements_(maxElements) {}

  std::optional<Forms> tensor(Value v, int depth);

private:
  bool wideEnough(Type t) const {
    if (t.isIndex())
      return true;
    auto i = dyn_cast<IntegerType>(t);
    return i && i.getWidth() >= minWidth_;
  }
  std::optional<AffineIndex> scalar(Value v, int depth);
  std::optional<Forms> linalgOp(linalg::LinalgOp op, unsigned result,
                                int depth);
  Forms leaves(Value v, int64_t n) {
    Forms f(n);
    for (int64_t i = 0; i < n; ++i) {
      AffineIndex a;
      a.terms.push_back({IndexLeaf{v, i}, 1});
      f[i] = a;
    }
    return f;
  }

  unsigned minWidth_;
  int64_t maxElements_;
  llvm::DenseMap<Value, Forms> memo_;
};

std::optional<AffineIndex> Evaluator::scalar(Value v, int depth) {
  if (depth > kMaxDepth || !wideEnough(v.getType()))
    return std::nullopt;
  if (auto c = getConstantIntValue(v))
    return constantForm(*c);
  Operation *op = v.getDefiningOp();
  if (auto ex = dyn_cast_or_null<tensor::ExtractOp>(op)) {
    auto type = ex.getTensor().getType();
    SmallVector<int64_t> idx;
    for (Value i : ex.getIndices()) {
      auto c = getConstantIntValue(i);
      if (!c)
        return std::nullopt;
      idx.push_back(*c);
    }
    auto forms = tensor(ex.getTensor(), depth + 1);
    if (!forms)
      return std::nullopt;
    return (*forms)[linearize(idx, type.getShape())];
  }
  if (isa_and_nonnull<arith::ExtSIOp, arith::TruncIOp, arith::IndexCastOp>(
          op))
    return scalar(op->getOperand(0), depth + 1);
  return std::nullopt;
}

std::optional<Forms> Evaluator::tensor(Value v, int depth) {
  if (auto it = memo_.find(v); it != memo_.end())
    return it->second;
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (depth > kMaxDepth || !type || !type.hasStaticShape() ||
      type.getNumElements() > maxElements_ ||
      !wideEnough(type.getElementType()))
    return std::nullopt;
  int64_t n = type.getNumElements();
  Operation *op = v.getDefiningOp();
  std::optional<Forms> out;
  if (!op) {
    out = leaves(v, n);
  } else if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto attr = dyn_cast<DenseIntElementsAttr>(c.getValue());
    if (!attr)
      return std::nullopt;
    out.emplace();
    for (const APInt &x : attr.getValues<APInt>())
      out->push_back(constantForm(x.getSExtValue()));
  } else if (isa<tensor::EmptyOp>(op)) {
    out = Forms(n);
  } else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                 tensor::CastOp, tensor::ReshapeOp>(op)) {
    // Row-major relabelings: the same elements in the same order.
    out = tensor(op->getOperand(0), depth + 1);
  } else if (auto ex = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto src = ex.getSourceType();
    auto in = tensor(ex.getSource(), depth + 1);
    if (!in || !src.hasStaticShape() || !ex.hasUnitStride() ||
        ShapedType::isDynamicShape(ex.getStaticOffsets()) ||
        ShapedType::isDynamicShape(ex.getStaticSizes()))
      return std::nullopt;
    ArrayRef<int64_t> offs = ex.getStaticOffsets(), sizes = ex.getStaticSizes(),
                      strides = ex.getStaticStrides();
    out.emplace();
    SmallVector<int64_t> p(sizes.size(), 0);
    if (llvm::all_of(sizes, [](int64_t s) { return s > 0; }))
      do {
        SmallVector<int64_t> at(p.size());
        for (size_t d = 0; d < p.size(); ++d)
          at[d] = offs[d] + p[d] * strides[d];
        out->push_back((*in)[linearize(at, src.getShape())]);
      } while (next(p, sizes));
  } else if (auto ins = dyn_cast<tensor::InsertSliceOp>(op)) {
    auto dst = ins.getDestType();
    auto dest = tensor(ins.getDest(), depth + 1);
    auto piece = tensor(ins.getSource(), depth + 1);
    if (!dest || !piece || !ins.hasUnitStride() ||
        ShapedType::isDynamicShape(ins.getStaticOffsets()) ||
        ShapedType::isDynamicShape(ins.getStaticSizes()))
      return std::nullopt;
    ArrayRef<int64_t> offs = ins.getStaticOffsets(),
                      sizes = ins.getStaticSizes(),
                      strides = ins.getStaticStrides();
    out = *dest;
    SmallVector<int64_t> p(sizes.size(), 0);
    int64_t k = 0;
    if (llvm::all_of(sizes, [](int64_t s) { return s > 0; }))
      do {
        SmallVector<int64_t> at(p.size());
        for (size_t d = 0; d < p.size(); ++d)
          at[d] = offs[d] + p[d] * strides[d];
        (*out)[linearize(at, dst.getShape())] = (*piece)[k++];
      } while (next(p, sizes));
  } else if (auto cat = dyn_cast<tensor::ConcatOp>(op)) {
    int64_t dim = static_cast<int64_t>(cat.getDim());
    out = Forms(n);
    int64_t base = 0;
    for (Value part : cat.getInputs()) {
      auto pt = cast<RankedTensorType>(part.getType());
      auto forms = tensor(part, depth + 1);
      if (!forms || !pt.hasStaticShape())
        return std::nullopt;
      for (int64_t i = 0; i < pt.getNumElements(); ++i) {
        SmallVector<int64_t> at = delinearize(i, pt.getShape());
        at[dim] += base;
        (*out)[linearize(at, type.getShape())] = (*forms)[i];
      }
      base += pt.getDimSize(dim);
    }
  } else if (auto lop = dyn_cast<linalg::LinalgOp>(op)) {
    out = linalgOp(lop, cast<OpResult>(v).getResultNumber(), depth);
  } else {
    // Not evaluated: its elements are unknowns, which is always sound (the
    // forms then say how the result depends on them).
    out = leaves(v, n);
  }
  if (out)
    memo_[v] = *out;
  return out;
}

std::optional<Forms> Evaluator::linalgOp(linalg::LinalgOp op, unsigned result,
                                         int depth) {
  if (!op.hasPureTensorSemantics() || op->getNumRegions() != 1)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t points = 1;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r) || r < 0)
      return std::nullopt;
    points *= r;
    if (points > kMaxPoints)
      return std::nullopt;
  }
  Block &body = op->getRegion(0).front();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Per operand: its forms (tensors) or its one form (scalars).
  SmallVector<Forms> operands;
  SmallVector<SmallVector<int64_t>> shapes;
  for (OpOperand &o : op->getOpOperands()) {
    if (auto t = dyn_cast<RankedTensorType>(o.get().getType())) {
      auto f = tensor(o.get(), depth + 1);
      if (!f)
        return std::nullopt;
      operands.push_back(*f);
      shapes.emplace_back(t.getShape());
    } else {
      auto s = scalar(o.get(), depth + 1);
      if (!s)
        return std::nullopt;
      operands.push_back(Forms{*s});
      shapes.emplace_back();
    }
  }
  unsigned numInputs = op.getNumDpsInputs();
  if (points == 0)
    return operands[numInputs + result];
  SmallVector<int64_t> p(ranges.size(), 0);
  do {
    llvm::DenseMap<Value, AffineIndex> env;
    SmallVector<int64_t> flat(operands.size(), 0);
    for (auto [i, o] : llvm::enumerate(op->getOpOperands())) {
      if (!shapes[i].empty() || isa<RankedTensorType>(o.get().getType())) {
        SmallVector<int64_t> at = maps[i].compose(p);
        flat[i] = linearize(at, shapes[i]);
      }
      const Form &f = operands[i][flat[i]];
      if (f)
        env[body.getArgument(i)] = *f;
    }
    auto get = [&](Value x) -> std::optional<AffineIndex> {
      if (auto it = env.find(x); it != env.end())
        return it->second;
      if (auto c = getConstantIntValue(x); c && wideEnough(x.getType()))
        return constantForm(*c);
      return std::nullopt;
    };
    for (Operation &b : body) {
      if (auto y = dyn_cast<linalg::YieldOp>(b)) {
        for (auto [j, val] : llvm::enumerate(y.getValues())) {
          auto f = get(val);
          if (!f)
            return std::nullopt;
          operands[numInputs + j][flat[numInputs + j]] = *f;
        }
        continue;
      }
      if (b.getNumResults() != 1 || !wideEnough(b.getResult(0).getType()))
        return std::nullopt;
      std::optional<AffineIndex> r;
      if (auto idx = dyn_cast<linalg::IndexOp>(b)) {
        r = constantForm(p[idx.getDim()]);
      } else if (isa<arith::ConstantOp>(b)) {
        r = get(b.getResult(0));
      } else if (isa<arith::ExtSIOp, arith::TruncIOp, arith::IndexCastOp>(b)) {
        if (!wideEnough(b.getOperand(0).getType()))
          return std::nullopt;
        r = get(b.getOperand(0));
      } else if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(b)) {
        auto x = get(b.getOperand(0)), y = get(b.getOperand(1));
        if (!x || !y)
          return std::nullopt;
        r = isa<arith::MulIOp>(b) ? mulForms(*x, *y)
                                  : addForms(*x, *y,
                                             isa<arith::AddIOp>(b) ? 1 : -1);
      }
      if (!r)
        return std::nullopt;
      env[b.getResult(0)] = *r;
    }
  } while (next(p, ranges));
  for (unsigned j = 0; j < op.getNumDpsInits(); ++j)
    memo_[op->getResult(j)] = operands[numInputs + j];
  return operands[numInputs + result];
}

} // namespace

std::optional<SmallVector<AffineIndex>>
mlir::kvq::evaluateIndices(Value t, int64_t maxElements) {
  auto type = dyn_cast<RankedTensorType>(t.getType());
  if (!type || !type.getElementType().isIntOrIndex())
    return std::nullopt;
  unsigned width = type.getElementType().isIndex()
                       ? 64
                       : type.getElementType().getIntOrFloatBitWidth();
  Evaluator e(width, maxElements);
  auto forms = e.tensor(t, 0);
  if (!forms)
    return std::nullopt;
  SmallVector<AffineIndex> out;
  for (const Form &f : *forms) {
    if (!f)
      return std::nullopt;
    out.push_back(*f);
  }
  return out;
}
