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
