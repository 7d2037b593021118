//===- AttentionRewriter.cpp - matched caches as a !kvq.cache -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/transforms/kvcache/AttentionRewriter.h"


#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kvq;

namespace {

/// `v` converted to the float type `to` (extf or truncf), or `v`.
Value convertScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  if (from.getIntOrFloatBitWidth() > to.getIntOrFloatBitWidth())
    return arith::TruncFOp::create(b, loc, to, v);
  // bf16 <-> f16: through f32.
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return arith::TruncFOp::create(b, loc, to, wide);
}

/// A linalg.generic producing `outType` from `src` whose element (for the
/// output index) is src[srcExprs], converted and multiplied by `factor`.
Value gatherGeneric(OpBuilder &b, Location loc, Value src,
                    ArrayRef<AffineExpr> srcExprs, RankedTensorType outType,
                    double factor) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = outType.getRank();
  AffineMap in = AffineMap::get(rank, 0, srcExprs, ctx);
  AffineMap out = AffineMap::getMultiDimIdentityMap(rank, ctx);
  Value init = tensor::EmptyOp::create(b, loc, outType.getShape(),
                                       outType.getElementType());
  auto srcType = cast<RankedTensorType>(src.getType());
  // A unit dimension read at 0 may as well be read at a unit loop dim that
  // nothing else reads: then a plain transpose may do.
  SmallVector<AffineExpr> exprs(srcExprs);
  llvm::SmallBitVector used(rank);
  for (AffineExpr e : exprs)
    if (auto d = dyn_cast<AffineDimExpr>(e))
      used.set(d.getPosition());
  for (auto [j, e] : llvm::enumerate(exprs)) {
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0 || srcType.getDimSize(j) != 1)
      continue;
    for (unsigned d = 0; d < rank; ++d)
      if (!used.test(d) && outType.getDimSize(d) == 1) {
        e = getAffineDimExpr(d, ctx);
        used.set(d);
        break;
      }
  }
  if (AffineMap perm = AffineMap::get(rank, 0, exprs, ctx);
      perm.isPermutation())
    in = perm;
  if (factor == 1.0 && in.isPermutation() &&
      srcType.getElementType() == outType.getElementType()) {
    SmallVector<int64_t> perm(rank);
    for (auto [j, e] : llvm::enumerate(in.getResults()))
      perm[cast<AffineDimExpr>(e).getPosition()] = j;
    return linalg::TransposeOp::create(b, loc, src, init, perm).getResult()[0];
  }
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  Type el = outType.getElementType();
  auto g = linalg::GenericOp::create(
      b, loc, outType, src, init, ArrayRef<AffineMap>{in, out}, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value v = args[0];
        if (factor != 1.0) {
          v = convertScalar(nb, nl, v, nb.getF32Type());
          Value c = arith::ConstantOp::create(
              nb, nl, nb.getF32FloatAttr(float(factor)));
          v = arith::MulFOp::create(nb, nl, v, c);
        }
        linalg::YieldOp::create(nb, nl, convertScalar(nb, nl, v, el));
      });
  return g.getResult(0);
}

/// Whether `exprs` index `src` as the identity would for `outType`: each
/// result the loop dim of its position, or 0 on a dimension of size 1.
bool isIdentityGather(ArrayRef<AffineExpr> exprs, RankedTensorType src,
                      RankedTensorType outType) {
  if (src.getShape() != outType.getShape() ||
      src.getElementType() != outType.getElementType())
    return false;
  for (auto [i, e] : llvm::enumerate(exprs)) {
    if (auto d = dyn_cast<AffineDimExpr>(e); d && d.getPosition() == i)
      continue;
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0 || src.getDimSize(i) != 1)
      return false;
  }
  return true;
}

/// `src` (dims in `roles`) as [tokens, heads, head_dim] of element type
/// `el`, times `factor`. Queries grouped [.., kv_heads, group, ..] give query
/// head h = kv_head * group + member.
Value toCanonical(OpBuilder &b, Location loc, Value src, const Roles &roles,
                  int64_t tokens, int64_t heads, int64_t headDim, Type el,
                  double factor) {
  auto type = cast<RankedTensorType>(src.getType());
  auto outType = RankedTensorType::get({tokens, heads, headDim}, el);
  MLIRContext *ctx = b.getContext();
  AffineExpr n = getAffineDimExpr(0, ctx), h = getAffineDimExpr(1, ctx),
             c = getAffineDimExpr(2, ctx), zero = getAffineConstantExpr(0, ctx);
  bool grouped = roles.find(Role::Group) >= 0;
  int64_t g = roles.group;
  SmallVector<AffineExpr> exprs;
  for (Role r : roles.dims) {
    switch (r) {
    case Role::Query:
    case Role::Token:
      exprs.push_back(n);
      break;
    case Role::Head:
      exprs.push_back(grouped ? h.floorDiv(g) : h);
      break;
    case Role::Group:
      exprs.push_back(h % g);
      break;
    case Role::QHead:
      exprs.push_back(h);
      break;
    case Role::Channel:
      exprs.push_back(c);
      break;
    case Role::Unit:
    case Role::Slot:
      exprs.push_back(zero);
      break;
    }
  }
  if (factor == 1.0 && isIdentityGather(exprs, type, outType))
    return src;
  // [tokens, kv_heads, group, head_dim]: a reshape is enough.
  if (factor == 1.0 && type.getElementType() == el && type.getRank() == 4 &&
      roles.dims[1] == Role::Head && roles.dims[2] == Role::Group &&
      roles.dims[3] == Role::Channel &&
      (roles.dims[0] == Role::Query || type.getDimSize(0) == 1))
    return tensor::CollapseShapeOp::create(
        b, loc, src, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}});
  return gatherGeneric(b, loc, src, exprs, outType, factor);
}

/// kvq.cache_attend's [tokens, q_heads, head_dim] f32 result in the layout
/// and type of the graph's weighted sum.
Value fromCanonical(OpBuilder &b, Location loc, Value attn,
                    RankedTensorType outType, const Roles &roles) {
  auto type = cast<RankedTensorType>(attn.getType());
  MLIRContext *ctx = b.getContext();
  AffineExpr zero = getAffineConstantExpr(0, ctx);
  AffineExpr n = zero, c = zero, head, member, qhead;
  for (auto [i, r] : llvm::enumerate(roles.dims)) {
    AffineExpr d = getAffineDimExpr(i, ctx);
    if (r == Role::Query)
      n = d;
    else if (r == Role::Channel)
      c = d;
    else if (r == Role::Head)
      head = d;
    else if (r == Role::Group)
      member = d;
    else if (r == Role::QHead)
      qhead = d;
  }
  // A decode's single query may sit in a unit dimension.
  if (n == zero && outType.getRank() == 3 && outType.getDimSize(0) == 1 &&
      roles.dims[0] == Role::Unit)
    n = getAffineDimExpr(0, ctx);
  AffineExpr h = qhead ? qhead
                 : head && member ? head * roles.group + member
                 : head           ? head
                 : member         ? member
                                  : zero;
  SmallVector<AffineExpr> exprs = {n, h, c};
  if (outType.getRank() == 3 && isIdentityGather(exprs, type, outType))
    return attn;
  if (type.getElementType() == outType.getElementType() &&
      outType.getRank() == 4 && roles.dims[1] == Role::Head &&
      roles.dims[2] == Role::Group && roles.dims[3] == Role::Channel &&
      (roles.dims[0] == Role::Query || outType.getDimSize(0) == 1))
    return tensor::ExpandShapeOp::create(
        b, loc, outType, attn,
        SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}});
  return gatherGeneric(b, loc, attn, exprs, outType, 1.0);
}

} // namespace

void mlir::kvq::rewriteFunction(FunctionMatcher &m, CacheType cacheType,
                                ArrayRef<Value> preRopeKeys) {
  func::FuncOp f = m.func;
  MLIRContext *ctx = f.getContext();
  Block &entry = f.getBody().front();
  unsigned first = entry.getNumArguments();
  for (auto &chain : m.chains)
    first = std::min(first, chain->arg.getArgNumber());
  Location loc = f.getLoc();
  if (failed(f.insertArgument(first, cacheType, {}, loc)))
    llvm_unreachable("inserting a function argument cannot fail");
  Value cache = entry.getArgument(first);
  OpBuilder b(ctx);
  // A grown cache's position is its length before the step.
  Value implicitLength;
  if (m.implicitPos) {
    b.setInsertionPointToStart(&entry);
    auto stats = CacheStatsOp::create(
        b, loc, b.getI64Type(), b.getI64Type(), b.getI64Type(), b.getF64Type(),
        cache, b.getI64IntegerAttr(0));
    implicitLength = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                                stats.getTokens());
    m.implicitPos.replaceAllUsesWith(implicitLength);
  }
  for (Attention &a : m.attentions) {
    Location aloc = a.anchor->getLoc();
    b.setInsertionPoint(a.anchor);
    int64_t layer = a.k.chain->stacked ? a.k.layer : a.k.chain->perLayerIndex;
    auto layerAttr = b.getI64IntegerAttr(layer);
    // The runtime cache appends: the layer must hold exactly pos tokens.
    Type i64 = b.getI64Type();
    auto stats = CacheStatsOp::create(b, aloc, i64, i64, i64, b.getF64Type(),
                                      cache, layerAttr);
    Value pos = a.k.pos == m.implicitPos ? implicitLength : a.k.pos;
    if (implicitLength) {
      // The graph had no capacity: max-context is the one it gets.
      Value end = arith::AddIOp::create(
          b, aloc, stats.getTokens(),
          arith::ConstantIntOp::create(b, aloc, i64, a.k.tokens));
      Value fits = arith::CmpIOp::create(
          b, aloc, arith::CmpIPredicate::sle, end,
          arith::ConstantIntOp::create(b, aloc, i64, m.implicitCapacity));
      cf::AssertOp::create(b, aloc, fits,
                           "kvq: the cache would exceed max-context = " +
                               std::to_string(m.implicitCapacity) +
                               " positions");
    }
    if (pos.getType().isIndex())
      pos = arith::IndexCastOp::create(b, aloc, b.getI64Type(), pos);
    else if (pos.getType().getIntOrFloatBitWidth() < 64)
      pos = arith::ExtSIOp::create(b, aloc, b.getI64Type(), pos);
    Value inOrder = arith::CmpIOp::create(b, aloc, arith::CmpIPredicate::eq,
                                          stats.getTokens(), pos);
    cf::AssertOp::create(
        b, aloc, inOrder,
        "kvq: cache layer " + std::to_string(layer) +
            " does not hold exactly pos tokens (write positions in order)");
    Type el = cacheType.getElementType();
    int64_t kvh = cacheType.getKvHeads(), hd = cacheType.getHeadDim();
    Value keys = toCanonical(b, aloc, a.k.op.getSource(), a.k.dataRoles,
                             a.k.tokens, kvh, hd, el, 1.0);
    if (!preRopeKeys.empty()) {
      keys = preRopeKeys[&a - m.attentions.data()];
      auto from = cast<RankedTensorType>(keys.getType());
      if (from.getElementType() != el) {
        auto to = from.clone(el);
        keys = el.getIntOrFloatBitWidth() < from.getElementTypeBitWidth()
                   ? arith::TruncFOp::create(b, aloc, to, keys).getResult()
                   : arith::ExtFOp::create(b, aloc, to, keys).getResult();
      }
    }
    Value values = toCanonical(b, aloc, a.v.op.getSource(), a.v.dataRoles,
                               a.v.tokens, kvh, hd, el, 1.0);
    CacheUpdateOp::create(b, aloc, TypeRange{}, cache, layerAttr, keys, values);
    // Queries as [steps, q_heads, head_dim] f32, with the graph's scale.
    double factor = std::abs(a.queryFactor - 1.0) < 1e-6 ? 1.0 : a.queryFactor;
    Value q = toCanonical(b, aloc, a.queryOperand->get(), a.queryRoles,
                          a.k.tokens, a.qHeads, hd, b.getF32Type(), factor);
    auto qType = cast<RankedTensorType>(q.getType());
    Value out = CacheAttendOp::create(b, aloc, qType, cache, layerAttr, q);
    // Back to the weighted sum's layout.
    out = fromCanonical(b, aloc, out,
                        cast<RankedTensorType>(a.output.getType()),
                        a.outputRoles);
    a.output.replaceAllUsesWith(out);
  }
  // The caches are no longer results.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  llvm::BitVector dropResults(ret.getNumOperands());
  for (auto &chain : m.chains)
    dropResults.set(chain->resultIndex);
  SmallVector<Value> kept;
  SmallVector<Type> keptTypes;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (!dropResults.test(i)) {
      kept.push_back(v);
      keptTypes.push_back(v.getType());
    }
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), kept);
  ret.erase();
  // The old attention and the cache tensors are dead now.
  bool erased = true;
  while (erased) {
    erased = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
      if (isOpTriviallyDead(&op)) {
        op.erase();
        erased = true;
      }
  }
  llvm::BitVector dropArgs(entry.getNumArguments());
  for (auto &chain : m.chains)
    dropArgs.set(chain->arg.getArgNumber());
  if (m.implicitPos)
    dropArgs.set(m.implicitPos.getArgNumber());
  if (failed(f.eraseArguments(dropArgs)))
    llvm_unreachable("erasing unused arguments cannot fail");
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), keptTypes));
}

void mlir::kvq::addHostHelpers(ModuleOp module, CacheType cacheType) {
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  MLIRContext *ctx = module.getContext();
  SymbolTable symbols(module);
  auto cInterface = [&](func::FuncOp f) {
    f->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  };
  if (!symbols.lookup("kv_cache_create")) {
    auto f = func::FuncOp::create(b, loc, "kv_cache_create",
                                  FunctionType::get(ctx, {}, {cacheType}));
    cInterface(f);
    OpBuilder body = OpBuilder::atBlockEnd(f.addEntryBlock());
    Value c = CacheCreateOp::create(body, loc, cacheType);
    func::ReturnOp::create(body, loc, c);
  }
  if (!symbols.lookup("kv_cache_destroy")) {
    auto f = func::FuncOp::create(b, loc, "kv_cache_destroy",
                                  FunctionType::get(ctx, {cacheType}, {}));
    cInterface(f);
    OpBuilder body = OpBuilder::atBlockEnd(f.addEntryBlock());
    CacheDestroyOp::create(body, loc, f.getArgument(0));
    func::ReturnOp::create(body, loc);
  }
  if (!symbols.lookup("kv_cache_stats")) {
    Type i64 = IntegerType::get(ctx, 64), f64 = Float64Type::get(ctx);
    auto f = func::FuncOp::create(
        b, loc, "kv_cache_stats",
        FunctionType::get(ctx, {cacheType}, {i64, i64, i64, f64}));
    cInterface(f);
    OpBuilder body = OpBuilder::atBlockEnd(f.addEntryBlock());
    auto stats = CacheStatsOp::create(body, loc, i64, i64, i64, f64,
                                      f.getArgument(0), IntegerAttr());
    func::ReturnOp::create(body, loc, stats.getResults());
  }
}
