//===- Layout.cpp - roles of attention dimensions -------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "passes/transforms/kvcache/Layout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::kvq;

const char *mlir::kvq::roleName(Role r) {
  switch (r) {
  case Role::Unit:
    return "unit";
  case Role::Slot:
    return "layer";
  case Role::Token:
    return "position";
  case Role::Head:
    return "KV head";
  case Role::Group:
    return "query group";
  case Role::QHead:
    return "query head";
  case Role::Channel:
    return "channel";
  case Role::Query:
    return "query token";
  }
  return "?";
}

int Roles::find(Role r) const {
  for (auto [i, d] : llvm::enumerate(dims))
    if (d == r)
      return int(i);
  return -1;
}

namespace {

/// The factor a data-movement body applies to its input, or nullopt when
/// the body is not `yield convert*(scale*(in))`: extf/truncf and a multiply
/// or divide by a constant, in any order.
std::optional<double> movementFactor(linalg::GenericOp g) {
  Block &body = g.getRegion().front();
  Value v = body.getTerminator()->getOperand(0);
  double factor = 1.0;
  for (int i = 0; i < 4; ++i) {
    if (v == body.getArgument(0))
      return factor;
    Operation *op = v.getDefiningOp();
    if (!op || op->getBlock() != &body)
      return std::nullopt;
    if (isa<arith::ExtFOp, arith::TruncFOp>(op)) {
      v = op->getOperand(0);
      continue;
    }
    if (isa<arith::MulFOp, arith::DivFOp>(op)) {
      FloatAttr c;
      int other = -1;
      if (matchPattern(op->getOperand(1), m_Constant(&c)))
        other = 0;
      else if (isa<arith::MulFOp>(op) &&
               matchPattern(op->getOperand(0), m_Constant(&c)))
        other = 1;
      if (other < 0 || c.getValueAsDouble() == 0.0)
        return std::nullopt;
      factor *= isa<arith::DivFOp>(op) ? 1.0 / c.getValueAsDouble()
                                       : c.getValueAsDouble();
      v = op->getOperand(other);
      continue;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// One input, one init whose value the body ignores, parallel loops, an
/// identity output map and an input map of distinct dims and zeros: a
/// transpose, a broadcast, a conversion or a constant scale.
bool isDataMovement(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 0 || !g.hasPureTensorSemantics())
    return false;
  if (!g.getRegion().front().getArgument(1).use_empty())
    return false;
  auto maps = g.getIndexingMapsArray();
  if (!maps[1].isIdentity())
    return false;
  llvm::SmallBitVector seen(maps[1].getNumDims());
  for (AffineExpr e : maps[0].getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (seen.test(d.getPosition()))
        return false;
      seen.set(d.getPosition());
      continue;
    }
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0)
      return false;
  }
  return movementFactor(g).has_value();
}

int64_t dimSize(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

} // namespace

bool mlir::kvq::isRoleMovement(Operation *op) {
  if (auto g = dyn_cast_or_null<linalg::GenericOp>(op))
    return isDataMovement(g);
  return isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                         tensor::CastOp>(op) &&
         isa<RankedTensorType>(op->getOperand(0).getType());
}

FailureOr<Roles> mlir::kvq::stepRoles(Operation *op, Roles roles,
                                      std::string &why) {
  auto fail = [&](Operation *, const Twine &msg) -> FailureOr<Roles> {
    why = msg.str();
    return failure();
  };
  if (auto g = dyn_cast<linalg::GenericOp>(op); g && !isDataMovement(g)) {
    // An elementwise generic over the same layout (a mask, an activation
    // conversion) keeps the roles.
    if (g.getNumReductionLoops() == 0 && g.getNumDpsInits() == 1 &&
        llvm::all_of(g.getIndexingMapsArray(),
                     [](AffineMap m) { return m.isIdentity(); }))
      return roles;
    return fail(op, "'linalg.generic' changes the layout in a way kvq does "
                    "not follow");
  }
  Value out = op->getResult(0);
  unsigned outRank = cast<RankedTensorType>(out.getType()).getRank();
  SmallVector<std::optional<Role>> next(outRank);
  if (auto g = dyn_cast<linalg::GenericOp>(op)) {
    AffineMap in = g.getIndexingMapsArray()[0];
    for (auto [i, e] : llvm::enumerate(in.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e))
        next[d.getPosition()] = roles.dims[i];
      else if (roles.dims[i] != Role::Unit && dimSize(op->getOperand(0), i) != 1)
        return fail(op, "a broadcast drops the " +
                            Twine(roleName(roles.dims[i])) + " dimension");
    for (unsigned j = 0; j < outRank; ++j) {
      if (next[j])
        continue;
      int64_t size = dimSize(out, j);
      if (size == 1) {
        next[j] = Role::Unit;
        continue;
      }
      if (roles.find(Role::Group) >= 0 || roles.find(Role::QHead) >= 0 ||
          llvm::is_contained(next, std::optional<Role>(Role::Group)))
        return fail(op, "the keys or values are repeated over more than "
                        "one dimension");
      next[j] = Role::Group;
      roles.group = size;
    }
    roles.scale *= *movementFactor(g);
  } else if (auto e = dyn_cast<tensor::ExpandShapeOp>(op)) {
    for (auto [i, group] : llvm::enumerate(e.getReassociationIndices())) {
      Role r = roles.dims[i];
      SmallVector<int64_t> big;
      for (int64_t j : group)
        if (dimSize(out, j) != 1)
          big.push_back(j);
      for (int64_t j : group)
        next[j] = Role::Unit;
      if (big.empty()) {
        next[group.front()] = r;
      } else if (big.size() == 1) {
        next[big.front()] = r;
      } else if (r == Role::QHead && big.size() == 2 &&
                 dimSize(out, big[1]) == roles.group) {
        next[big[0]] = Role::Head;
        next[big[1]] = Role::Group;
      } else {
        return fail(op, "'tensor.expand_shape' splits the " +
                            Twine(roleName(r)) +
                            " dimension into several; kvq follows one "
                            "dimension per position, KV head and channel");
      }
    }
  } else if (auto c = dyn_cast<tensor::CollapseShapeOp>(op)) {
    Value src = c.getSrc();
    for (auto [j, group] : llvm::enumerate(c.getReassociationIndices())) {
      SmallVector<Role> kept;
      for (int64_t i : group)
        if (roles.dims[i] != Role::Unit && dimSize(src, i) != 1)
          kept.push_back(roles.dims[i]);
      if (kept.empty()) {
        // A size-1 role survives when the group holds it alone.
        next[j] = group.size() == 1 ? roles.dims[group.front()] : Role::Unit;
        for (int64_t i : group)
          if (roles.dims[i] != Role::Unit)
            next[j] = roles.dims[i];
      } else if (kept.size() == 1) {
        next[j] = kept.front();
      } else if (kept == SmallVector<Role>{Role::Head, Role::Group}) {
        next[j] = Role::QHead;
      } else if (kept == SmallVector<Role>{Role::Group, Role::Head}) {
        return fail(op, "query head h reads KV head h % kv_heads (the "
                        "repeat comes before the KV head); "
                        "kvq.cache_attend groups consecutive query heads "
                        "(h / group)");
      } else {
        return fail(op, "'tensor.collapse_shape' merges the " +
                            Twine(roleName(kept[0])) + " and " +
                            roleName(kept[1]) + " dimensions");
      }
    }
  } else {
    for (unsigned j = 0; j < outRank; ++j)
      next[j] = roles.dims[j];
  }
  roles.dims.clear();
  for (auto r : next)
    roles.dims.push_back(*r);
  return roles;
}

FailureOr<Trace> mlir::kvq::traceRoles(
    Value operand,
    const std::function<FailureOr<Roles>(Value end)> &rolesOfEnd,
    std::string &why, Operation *&where) {
  SmallVector<Operation *> path;
  Value v = operand;
  for (int step = 0; step < 16; ++step) {
    Operation *def = v.getDefiningOp();
    if (!isRoleMovement(def))
      break;
    path.push_back(def);
    v = def->getOperand(0);
  }
  FailureOr<Roles> start = rolesOfEnd(v);
  if (failed(start))
    return failure();
  Roles roles = *start;
  for (Operation *op : llvm::reverse(path)) {
    FailureOr<Roles> next = stepRoles(op, roles, why);
    if (failed(next)) {
      where = op;
      return failure();
    }
    roles = *next;
  }
  Trace t;
  t.end = v.getDefiningOp();
  t.roles = roles;
  return t;
}

void mlir::kvq::generalizeForMatching(func::FuncOp f) {
  SmallVector<linalg::LinalgOp> named;
  f.walk([&](linalg::LinalgOp op) {
    // Fills stay: a contraction's zero start is read from them.
    if (!isa<linalg::GenericOp, linalg::FillOp>(op.getOperation()))
      named.push_back(op);
  });
  IRRewriter rewriter(f.getContext());
  for (linalg::LinalgOp op : named) {
    rewriter.setInsertionPoint(op);
    (void)linalg::generalizeNamedOp(rewriter, op);
  }
}

void mlir::kvq::expandGroupedHeadMaps(func::FuncOp f) {
  SmallVector<linalg::GenericOp> generics;
  f.walk([&](linalg::GenericOp g) { generics.push_back(g); });
  MLIRContext *ctx = f.getContext();
  OpBuilder b(ctx);
  for (linalg::GenericOp g : generics) {
    SmallVector<AffineMap> maps = g.getIndexingMapsArray();
    // The static extent of loop dim `d` as an operand indexes it directly.
    auto extentOf = [&](unsigned d) -> std::optional<int64_t> {
      for (OpOperand &o : g->getOpOperands()) {
        auto t = dyn_cast<RankedTensorType>(o.get().getType());
        AffineMap m = maps[o.getOperandNumber()];
        for (unsigned r = 0; t && r < m.getNumResults(); ++r)
          if (m.getResult(r) == getAffineDimExpr(d, ctx) &&
              !t.isDynamicDim(r))
            return t.getDimSize(r);
      }
      return std::nullopt;
    };
    bool changed = false;
    for (OpOperand *in : g.getDpsInputOperands()) {
      unsigned k = in->getOperandNumber();
      auto type = dyn_cast<RankedTensorType>(in->get().getType());
      if (!type)
        continue;
      for (unsigned r = 0; r < maps[k].getNumResults(); ++r) {
        auto div = dyn_cast<AffineBinaryOpExpr>(maps[k].getResult(r));
        if (!div || div.getKind() != AffineExprKind::FloorDiv)
          continue;
        auto d = dyn_cast<AffineDimExpr>(div.getLHS());
        auto c = dyn_cast<AffineConstantExpr>(div.getRHS());
        if (!d || !c || c.getValue() < 2 || type.isDynamicDim(r))
          continue;
        int64_t group = c.getValue(), kv = type.getDimSize(r);
        if (extentOf(d.getPosition()) != kv * group)
          continue;
        Location loc = g.getLoc();
        b.setInsertionPoint(g);
        unsigned rank = type.getRank();
        SmallVector<ReassociationIndices> groups;
        for (unsigned i = 0; i < rank; ++i)
          groups.push_back(i == r ? ReassociationIndices{i, i + 1}
                                  : ReassociationIndices{i < r ? i : i + 1});
        SmallVector<int64_t> unitShape(type.getShape()),
            wideShape(type.getShape());
        unitShape.insert(unitShape.begin() + r + 1, 1);
        wideShape.insert(wideShape.begin() + r + 1, group);
        Type el = type.getElementType();
        // Dynamic sizes from the slice that reads the cache (a tensor.dim
        // would be one more use of the read, which the matcher refuses).
        SmallVector<OpFoldResult> sizes;
        auto slice = in->get().getDefiningOp<tensor::ExtractSliceOp>();
        bool sliceSizes =
            slice && slice.getMixedSizes().size() == rank;
        for (unsigned i = 0; i < rank; ++i)
          sizes.push_back(!type.isDynamicDim(i) ? b.getIndexAttr(
                                                      type.getDimSize(i))
                          : sliceSizes ? slice.getMixedSizes()[i]
                                       : OpFoldResult(tensor::DimOp::create(
                                             b, loc, in->get(), i)));
        SmallVector<OpFoldResult> unitSizes(sizes);
        unitSizes.insert(unitSizes.begin() + r + 1, b.getIndexAttr(1));
        Value unit = tensor::ExpandShapeOp::create(
            b, loc, RankedTensorType::get(unitShape, el), in->get(), groups,
            unitSizes);
        SmallVector<Value> dynamic;
        for (unsigned i = 0; i < rank; ++i)
          if (type.isDynamicDim(i))
            dynamic.push_back(getValueOrCreateConstantIndexOp(b, loc,
                                                              sizes[i]));
        auto wideType = RankedTensorType::get(wideShape, el);
        Value empty = tensor::EmptyOp::create(b, loc, wideShape, el, dynamic);
        SmallVector<AffineExpr> fromUnit;
        for (unsigned i = 0; i <= rank; ++i)
          fromUnit.push_back(i == r + 1 ? getAffineConstantExpr(0, ctx)
                                        : getAffineDimExpr(i, ctx));
        SmallVector<AffineMap> bmaps = {
            AffineMap::get(rank + 1, 0, fromUnit, ctx),
            AffineMap::getMultiDimIdentityMap(rank + 1, ctx)};
        SmallVector<utils::IteratorType> its(rank + 1,
                                             utils::IteratorType::parallel);
        Value wide =
            linalg::GenericOp::create(
                b, loc, wideType, ValueRange{unit}, ValueRange{empty}, bmaps,
                its,
                [](OpBuilder &nb, Location nl, ValueRange args) {
                  linalg::YieldOp::create(nb, nl, args[0]);
                })
                .getResult(0);
        Value repeated =
            tensor::CollapseShapeOp::create(b, loc, wide, groups);
        in->set(repeated);
        SmallVector<AffineExpr> results(maps[k].getResults());
        results[r] = d;
        maps[k] = AffineMap::get(maps[k].getNumDims(), maps[k].getNumSymbols(),
                                 results, ctx);
        type = cast<RankedTensorType>(repeated.getType());
        changed = true;
      }
    }
    if (changed)
      g.setIndexingMapsAttr(b.getAffineMapArrayAttr(maps));
  }
}

void mlir::kvq::detachSlotWrites(func::FuncOp f) {
  SmallVector<tensor::InsertSliceOp> writes;
  f.walk([&](tensor::InsertSliceOp w) { writes.push_back(w); });
  OpBuilder b(f.getContext());
  for (tensor::InsertSliceOp w : writes) {
    auto g = w.getSource().getDefiningOp<linalg::GenericOp>();
    if (!g || g.getNumDpsInits() != 1 || g->getNumResults() != 1 ||
        !g.getResult(0).hasOneUse())
      continue;
    OpOperand *init = g.getDpsInitOperand(0);
    auto slot = init->get().getDefiningOp<tensor::ExtractSliceOp>();
    if (!slot || slot.getSource() != w.getDest() ||
        slot.getType() != w.getSourceType() ||
        !llvm::equal(slot.getMixedOffsets(), w.getMixedOffsets()) ||
        !llvm::equal(slot.getMixedSizes(), w.getMixedSizes()) ||
        !llvm::equal(slot.getMixedStrides(), w.getMixedStrides()) ||
        g.payloadUsesValueFromOperand(init))
      continue;
    b.setInsertionPoint(g);
    SmallVector<Value> dynamic;
    for (auto [i, size] : llvm::enumerate(slot.getMixedSizes()))
      if (slot.getType().isDynamicDim(i))
        dynamic.push_back(cast<Value>(size));
    init->set(tensor::EmptyOp::create(b, g.getLoc(), slot.getType().getShape(),
                                      slot.getType().getElementType(),
                                      dynamic));
    if (slot->use_empty())
      slot->erase();
  }
}

namespace {
/// The constant offset of `slice` on dim `d` when it takes one entry there.
template <typename SliceOp>
std::optional<int64_t> entryOn(SliceOp slice, unsigned d) {
  std::optional<int64_t> size = getConstantIntValue(slice.getMixedSizes()[d]);
  if (size != 1)
    return std::nullopt;
  return getConstantIntValue(slice.getMixedOffsets()[d]);
}

/// `slice`'s offsets with dim `d` set to 0.
template <typename SliceOp>
SmallVector<OpFoldResult> offsetsOnEntry(OpBuilder &b, SliceOp slice,
                                         unsigned d) {
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  offsets[d] = b.getIndexAttr(0);
  return offsets;
}
} // namespace

bool mlir::kvq::splitStackedPairs(func::FuncOp f) {
  if (!f.getBody().hasOneBlock())
    return false;
  auto ret = dyn_cast<func::ReturnOp>(f.getBody().front().getTerminator());
  if (!ret)
    return false;
  bool changed = false;
  for (unsigned a = 0; a < f.getNumArguments(); ++a) {
    BlockArgument arg = f.getArgument(a);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      continue;
    // The chain: arg, then each write's result; reads slice any of them.
    SmallVector<tensor::InsertSliceOp> writes;
    SmallVector<SmallVector<tensor::ExtractSliceOp>> reads;
    std::optional<unsigned> returned;
    bool plain = true;
    for (Value v = arg; v && plain;) {
      Value next;
      reads.emplace_back();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (auto w = dyn_cast<tensor::InsertSliceOp>(user);
            w && use.getOperandNumber() == 1 && !next) {
          writes.push_back(w);
          next = w.getResult();
        } else if (auto r = dyn_cast<tensor::ExtractSliceOp>(user)) {
          reads.back().push_back(r);
        } else if (user == ret && !returned) {
          returned = use.getOperandNumber();
        } else {
          plain = false;
        }
      }
      v = next;
    }
    if (!plain || !returned || writes.empty())
      continue;
    // The dimension of size 2 whose entry every slice picks, both written.
    std::optional<unsigned> pairDim;
    for (unsigned d = 0; d < type.getRank() && !pairDim; ++d) {
      if (type.getDimSize(d) != 2)
        continue;
      bool picks = true, seen[2] = {false, false};
      for (tensor::InsertSliceOp w : writes) {
        std::optional<int64_t> e = entryOn(w, d);
        picks = picks && e && (*e == 0 || *e == 1);
        if (picks)
          seen[*e] = true;
      }
      for (auto &rs : reads)
        for (tensor::ExtractSliceOp r : rs) {
          std::optional<int64_t> e = entryOn(r, d);
          picks = picks && e && (*e == 0 || *e == 1);
        }
      if (picks && seen[0] && seen[1])
        pairDim = d;
    }
    if (!pairDim)
      continue;
    unsigned d = *pairDim;
    SmallVector<int64_t> shape(type.getShape());
    shape[d] = 1;
    auto half = RankedTensorType::get(shape, type.getElementType());
    // The two entries as arguments a and a + 1 (the old one is erased).
    f.insertArgument(a + 1, half, nullptr, arg.getLoc());
    f.insertArgument(a + 2, half, nullptr, arg.getLoc());
    Value cur[2] = {f.getArgument(a + 1), f.getArgument(a + 2)};
    OpBuilder b(f.getContext());
    for (size_t i = 0; i < reads.size(); ++i) {
      for (tensor::ExtractSliceOp r : reads[i]) {
        b.setInsertionPoint(r);
        int64_t e = *entryOn(r, d);
        Value nr = tensor::ExtractSliceOp::create(
            b, r.getLoc(), r.getType(), cur[e], offsetsOnEntry(b, r, d),
            r.getMixedSizes(), r.getMixedStrides());
        r.getResult().replaceAllUsesWith(nr);
        r->erase();
      }
      if (i < writes.size()) {
        tensor::InsertSliceOp w = writes[i];
        b.setInsertionPoint(w);
        int64_t e = *entryOn(w, d);
        cur[e] = tensor::InsertSliceOp::create(
            b, w.getLoc(), w.getSource(), cur[e], offsetsOnEntry(b, w, d),
            w.getMixedSizes(), w.getMixedStrides());
      }
    }
    ret->setOperand(*returned, cur[0]);
    ret->insertOperands(*returned + 1, ValueRange{cur[1]});
    for (tensor::InsertSliceOp w : llvm::reverse(writes))
      w->erase();
    f.insertResult(*returned + 1, half, nullptr);
    SmallVector<Type> results(f.getResultTypes());
    results[*returned] = half;
    f.setType(FunctionType::get(f.getContext(), f.getArgumentTypes(),
                                results));
    (void)f.eraseArgument(a);
    changed = true;
    ++a; // past the second entry
  }
  return changed;
}

void mlir::kvq::splitScaledExps(func::FuncOp f) {
  SmallVector<linalg::GenericOp> generics;
  f.walk([&](linalg::GenericOp g) { generics.push_back(g); });
  for (linalg::GenericOp g : generics) {
    if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
        g.getNumReductionLoops() != 0 ||
        !llvm::all_equal(g.getIndexingMapsArray()))
      continue;
    Block &body = g.getRegion().front();
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    auto exp = yield.getOperand(0).getDefiningOp<math::ExpOp>();
    Operation *scale = exp ? exp.getOperand().getDefiningOp() : nullptr;
    if (!scale || !isa<arith::MulFOp, arith::DivFOp>(scale) ||
        !scale->hasOneUse() || scale->getBlock() != &body)
      continue;
    BlockArgument in = body.getArgument(0);
    // x * c, c * x or x / c, with c from outside the body or a constant.
    unsigned xAt = scale->getOperand(0) == in ? 0 : 1;
    Value c = scale->getOperand(1 - xAt);
    if (scale->getOperand(xAt) != in || (isa<arith::DivFOp>(scale) && xAt) ||
        (c.getParentBlock() == &body && !c.getDefiningOp<arith::ConstantOp>()))
      continue;
    OpBuilder b(g);
    Value init = g.getDpsInitOperand(0)->get();
    auto type = cast<RankedTensorType>(g.getDpsInputOperand(0)->get().getType());
    if (type != init.getType())
      continue;
    auto scaled = linalg::GenericOp::create(
        b, g.getLoc(), type, ValueRange{g.getDpsInputOperand(0)->get()},
        ValueRange{init}, g.getIndexingMapsArray(), g.getIteratorTypesArray(),
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          IRMapping map;
          map.map(in, args[0]);
          if (c.getParentBlock() == &body)
            nb.clone(*c.getDefiningOp(), map);
          linalg::YieldOp::create(nb, nl, nb.clone(*scale, map)->getResult(0));
        });
    g.getDpsInputOperand(0)->set(scaled.getResult(0));
    scale->getResult(0).replaceAllUsesWith(in);
    scale->erase();
  }
}
