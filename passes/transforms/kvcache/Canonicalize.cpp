//===- Canonicalize.cpp - the matcher's copy in one spelling --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/transforms/kvcache/Canonicalize.h"
#include "passes/transforms/kvcache/IndexEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::kvq;

namespace {
/// `v` as an index value built before `at`: index-cast when an integer.
Value asIndex(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isIndex())
    return v;
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

/// One position value per index tensor it is read from (element 0), placed
/// where the tensor is defined, so that K and V written at one position
/// share it; the graph's own reads of that element (a read length pos + n)
/// become the same value, so the matcher sees one position.
struct Positions {
  DenseMap<Value, Value> known;
  /// Per position tensor, how many of its leading elements the program
  /// already checks to be consecutive (a chunk's K and V share one check).
  DenseMap<Value, int64_t> consecutive;

  /// A chunk of n tokens is written from its first position on, `first`
  /// (element 0 of t): the graph's positions, elements 0 .. n - 1 of t
  /// (row-major), must be consecutive. They are where frontends make them
  /// (Hugging Face's cache_position is an arange); the program checks it
  /// when it runs, at b's insertion point.
  void requireConsecutive(OpBuilder &b, Location loc, Value t, Value first,
                          int64_t n) {
    auto type = cast<RankedTensorType>(t.getType());
    std::string what = "kvq: the chunk's positions";
    if (auto arg = dyn_cast<BlockArgument>(t))
      what += " (argument #" + std::to_string(arg.getArgNumber()) + ")";
    for (int64_t j = consecutive.lookup(t) + 1; j < n; ++j) {
      SmallVector<Value> at;
      for (int64_t i : delinearize(j, computeStrides(type.getShape())))
        at.push_back(arith::ConstantIndexOp::create(b, loc, i));
      Value got = asIndex(b, loc, tensor::ExtractOp::create(b, loc, t, at));
      Value want = arith::AddIOp::create(
          b, loc, first, arith::ConstantIndexOp::create(b, loc, j));
      cf::AssertOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, got, want),
          what + " are not consecutive; kvq writes a chunk from its first "
                 "position on");
      consecutive[t] = j;
    }
  }

  Value readFrom(Value t, int64_t rank) {
    if (Value v = known.lookup(t))
      return v;
    OpBuilder pb(t.getContext());
    pb.setInsertionPointAfterValue(t);
    Location loc = t.getLoc();
    SmallVector<Value> zeros(rank, arith::ConstantIndexOp::create(pb, loc, 0));
    auto read = tensor::ExtractOp::create(pb, loc, t, zeros);
    Value pos = asIndex(pb, loc, read);
    known[t] = pos;
    for (Operation *u : llvm::make_early_inc_range(t.getUsers())) {
      auto other = dyn_cast<tensor::ExtractOp>(u);
      if (!other || other == read || other->getBlock() != read->getBlock() ||
          !llvm::all_of(other.getIndices(),
                        [](Value i) { return isConstantIntValue(i, 0); }))
        continue;
      if (other.getType().isIndex()) {
        other.replaceAllUsesWith(pos);
        continue;
      }
      for (Operation *c : llvm::make_early_inc_range(other->getUsers()))
        if (auto cast = dyn_cast<arith::IndexCastOp>(c);
            cast && cast.getType().isIndex())
          cast.replaceAllUsesWith(pos);
    }
    return pos;
  }
};

/// Whether every element of `t` equals the one at index 0 along dimension
/// `dim`: a size-1 dimension, a splat constant or fill, or an elementwise
/// generic whose inputs are all that along the dimension it reads there
/// (or do not read it) and whose body does not use the index.
bool uniformAlong(Value t, unsigned dim, int depth = 0) {
  auto type = dyn_cast<RankedTensorType>(t.getType());
  if (!type || dim >= type.getRank() || depth > 16)
    return false;
  if (type.getDimSize(dim) == 1)
    return true;
  DenseElementsAttr dense;
  if (matchPattern(t, m_Constant(&dense)))
    return dense.isSplat();
  if (t.getDefiningOp<linalg::FillOp>())
    return true;
  auto g = t.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumReductionLoops() != 0)
    return false;
  AffineMap out = g.getIndexingMapMatchingResult(cast<OpResult>(t));
  auto loopDim = dyn_cast<AffineDimExpr>(out.getResult(dim));
  if (!loopDim)
    return false;
  unsigned l = loopDim.getPosition();
  bool usesIndex = false;
  g.getRegion().walk([&](linalg::IndexOp i) { usesIndex |= i.getDim() == l; });
  if (usesIndex)
    return false;
  for (OpOperand *in : g.getDpsInputOperands()) {
    AffineMap m = g.getMatchingIndexingMap(in);
    for (auto [j, e] : llvm::enumerate(m.getResults())) {
      if (!e.isFunctionOfDim(l))
        continue;
      if (e != loopDim || !uniformAlong(in->get(), j, depth + 1))
        return false;
    }
  }
  return true;
}
} // namespace

namespace {
/// A scatter loop nest as tosa-to-scf writes it (foldScatterLoops): the
/// rows loop, the slots loop (absent when folded), the slot's write of the
/// input slice `piece`, the index read `ex`, and their types.
struct ScatterNest {
  scf::ForOp rows, slots;
  tensor::InsertSliceOp write;
  tensor::ExtractSliceOp piece;
  tensor::ExtractOp ex;
  RankedTensorType values, input, idx;

  /// A slots loop, every shape static, the input 3-D: what the chunk
  /// folds below start from.
  bool staticWithSlots() const {
    return slots && input && input.hasStaticShape() &&
           values.hasStaticShape() && idx.hasStaticShape() &&
           input.getRank() == 3;
  }
};

/// torch-mlir's index_put (convertScatterNdOp) on a cache [1, H, S, D]:
/// the cache seen as [1, H * S, D], one row of N = 1 and W = H * n slots
/// (n new tokens per head), slot w written at the index sum(coordinate *
/// stride) that it computes from the head and the step's positions. When
/// every index is shown (evaluateIndices) to be `(w / n) * S + P[w % n]`
/// for unknown elements P[j] of one tensor (the positions), the nest
/// writes input[0, w, :] at position P[w % n] of head w / n: one
/// insert_slice of [1, H, n, D] into the cache seen as [1, H, S, D], at
/// [0, 0, P[0], 0], under the check that P[j] = P[0] + j. The forms are
/// exact modulo 2^32 (i32 indices), and P is used as read: the two agree
/// for every position below 2^31, beyond any capacity the runtime accepts.
bool foldFlattenedScatter(const ScatterNest &nest, Positions &positions) {
  auto [rows, slots, write, piece, ex, values, input, idxType] = nest;
  if (!nest.staticWithSlots() || values.getDimSize(0) != 1 ||
      input.getDimSize(0) != 1 || input.getDimSize(2) != values.getDimSize(2))
    return false;
  int64_t w = input.getDimSize(1);
  int64_t k = values.getDimSize(1);
  auto constant = [](Value v, int64_t c) { return isConstantIntValue(v, c); };
  if (w < 1 || idxType.getDimSize(0) != 1 ||
      idxType.getDimSize(1) != w || !constant(rows.getLowerBound(), 0) ||
      !constant(rows.getUpperBound(), 1) || !constant(slots.getLowerBound(), 0) ||
      !constant(slots.getUpperBound(), w) || !constant(slots.getStep(), 1) ||
      ex.getIndices()[1] != slots.getInductionVar())
    return false;
  SmallVector<OpFoldResult> in = piece.getMixedOffsets();
  if (dyn_cast<Value>(in[1]) != slots.getInductionVar() ||
      !isConstantIntValue(in[2], 0) ||
      llvm::any_of(ArrayRef(piece.getMixedSizes()).drop_back(),
                   [](OpFoldResult s) { return !isConstantIntValue(s, 1); }) ||
      getConstantIntValue(piece.getMixedSizes()[2]) != values.getDimSize(2) ||
      !llvm::all_of(piece.getMixedStrides(),
                    [](OpFoldResult s) { return isConstantIntValue(s, 1); }) ||
      !llvm::all_of(write.getMixedStrides(),
                    [](OpFoldResult s) { return isConstantIntValue(s, 1); }) ||
      !isConstantIntValue(write.getMixedOffsets()[2], 0) ||
      getConstantIntValue(write.getMixedSizes()[2]) != values.getDimSize(2))
    return false;
  // Slot i writes token i % n of head i / n at head * s + position[i % n]
  // (torch's index_put over coordinates [1, H, n], row-major): n new
  // tokens per head, read off the slots that share head 0.
  auto forms = evaluateIndices(ex.getTensor(), 1 << 12);
  if (!forms)
    return false;
  // The positions are read by the index arithmetic: indices passed in as
  // they are (the leaves would be the indices themselves) say nothing of
  // heads or positions.
  std::optional<IndexLeaf> leaf = (*forms)[0].unitLeaf();
  if (!leaf || leaf->flat != 0 || leaf->tensor == ex.getTensor())
    return false;
  auto tokenOf = [&](int64_t i, int64_t j) {
    std::optional<IndexLeaf> l = (*forms)[i].unitLeaf();
    return l && l->tensor == leaf->tensor && l->flat == j;
  };
  int64_t n = 1;
  while (n < w && tokenOf(n, n) && (*forms)[n].constant == 0)
    ++n;
  if (w % n != 0 || k % (w / n) != 0)
    return false;
  const int64_t heads = w / n, s = k / heads;
  if (n > s)
    return false;
  for (int64_t i = 0; i < w; ++i)
    if (!tokenOf(i, i % n) || (*forms)[i].constant != (i / n) * s)
      return false;
  auto leafType = dyn_cast<RankedTensorType>(leaf->tensor.getType());
  if (!leafType || !leafType.hasStaticShape() ||
      !leafType.getElementType().isIntOrIndex())
    return false;
  Value pos = positions.readFrom(leaf->tensor, leafType.getRank());

  OpBuilder b(rows);
  Location loc = rows.getLoc();
  positions.requireConsecutive(b, loc, leaf->tensor, pos, n);
  SmallVector<ReassociationIndices> headsOfSlots{{0}, {1, 2}, {3}};
  auto four = RankedTensorType::get({1, heads, s, values.getDimSize(2)},
                                    values.getElementType());
  Value cache = rows.getInitArgs()[0];
  auto flat = cache.getDefiningOp<tensor::CollapseShapeOp>();
  if (flat && flat.getSrcType() == four &&
      flat.getReassociationIndices() == headsOfSlots)
    cache = flat.getSrc();
  else
    cache = tensor::ExpandShapeOp::create(b, loc, four, cache, headsOfSlots);
  Value token = tensor::ExpandShapeOp::create(
      b, loc,
      RankedTensorType::get({1, heads, n, values.getDimSize(2)},
                            values.getElementType()),
      piece.getSource(), headsOfSlots);
  SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0), pos,
                                    b.getIndexAttr(0)},
      sizes{b.getIndexAttr(1), b.getIndexAttr(heads), b.getIndexAttr(n),
            b.getIndexAttr(values.getDimSize(2))},
      ones(4, b.getIndexAttr(1));
  Value written = tensor::InsertSliceOp::create(b, loc, token, cache, offsets,
                                                sizes, ones);
  // The graph reshapes the result back to [1, H, S, D] where it returns it,
  // and to the shape it reads ([H, S, D]) through [1, H * S, D]: each chain
  // of reshapes becomes one reshape of the 4-D result, or none.
  for (Operation *u :
       llvm::make_early_inc_range(rows->getResult(0).getUsers())) {
    if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(u))
      continue;
    SmallVector<Operation *> chain{u};
    while (chain.back()->getResult(0).hasOneUse() &&
           isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
               *chain.back()->getResult(0).getUsers().begin()))
      chain.push_back(*chain.back()->getResult(0).getUsers().begin());
    Operation *last = chain.back();
    auto to = cast<RankedTensorType>(last->getResult(0).getType());
    Value direct;
    if (to == four) {
      direct = written;
    } else if (auto groups = getReassociationIndicesForCollapse(
                   four.getShape(), to.getShape())) {
      OpBuilder at(last);
      direct = tensor::CollapseShapeOp::create(at, last->getLoc(), to, written,
                                               *groups);
    }
    if (!direct)
      continue;
    last->getResult(0).replaceAllUsesWith(direct);
    for (Operation *op : llvm::reverse(chain))
      op->erase();
  }
  if (!rows->getResult(0).use_empty())
    rows->getResult(0).replaceAllUsesWith(
        tensor::CollapseShapeOp::create(b, loc, written, headsOfSlots)
            .getResult());
  rows->erase();
  if (flat && flat->use_empty())
    flat->erase();
  return true;
}
/// The scatter loops of a chunk of n tokens per row (tosa.scatter with the
/// KV heads as rows, input [H, n, D], indices [H, n]): rows and slots
/// loops writing input[h, j, :] at values[h, idx[h, j], :]. With the same
/// indices in every row (the step's positions broadcast over the heads)
/// the nest is one insert_slice of the input at [0, idx[0, 0], 0], under
/// the check that idx[0, j] = idx[0, 0] + j. False (nothing changed) for
/// any other nest.
bool foldRowsScatterChunk(const ScatterNest &nest, Positions &positions) {
  auto [rows, slots, write, piece, ex, values, input, idxType] = nest;
  if (!nest.staticWithSlots())
    return false;
  const int64_t heads = values.getDimSize(0), n = input.getDimSize(1),
                d = values.getDimSize(2);
  auto constant = [](OpFoldResult v, int64_t c) {
    return isConstantIntValue(v, c);
  };
  auto ones = [&](ArrayRef<OpFoldResult> strides) {
    return llvm::all_of(strides, [&](OpFoldResult s) { return constant(s, 1); });
  };
  SmallVector<OpFoldResult> in = piece.getMixedOffsets(),
                            out = write.getMixedOffsets();
  std::optional<int64_t> trips = rows.getStaticTripCount()
                                     ? std::optional<int64_t>(
                                           rows.getStaticTripCount()
                                               ->getSExtValue())
                                     : std::nullopt;
  if (input.getDimSize(0) != heads || input.getDimSize(2) != d ||
      idxType.getDimSize(0) != heads || idxType.getDimSize(1) != n ||
      n > values.getDimSize(1) || trips != heads ||
      !constant(rows.getLowerBound(), 0) || !constant(rows.getStep(), 1) ||
      !constant(slots.getLowerBound(), 0) ||
      !constant(slots.getUpperBound(), n) || !constant(slots.getStep(), 1) ||
      ex.getIndices()[1] != slots.getInductionVar() ||
      dyn_cast<Value>(in[0]) != rows.getInductionVar() ||
      dyn_cast<Value>(in[1]) != slots.getInductionVar() || !constant(in[2], 0) ||
      !constant(out[2], 0) || !ones(piece.getMixedStrides()) ||
      !ones(write.getMixedStrides()) ||
      !constant(piece.getMixedSizes()[0], 1) ||
      !constant(piece.getMixedSizes()[1], 1) ||
      !constant(piece.getMixedSizes()[2], d) ||
      !constant(write.getMixedSizes()[0], 1) ||
      !constant(write.getMixedSizes()[1], 1) ||
      !constant(write.getMixedSizes()[2], d) ||
      !uniformAlong(ex.getTensor(), 0))
    return false;
  Value pos = positions.readFrom(ex.getTensor(), 2);
  OpBuilder b(rows);
  Location loc = rows.getLoc();
  positions.requireConsecutive(b, loc, ex.getTensor(), pos, n);
  SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), pos, b.getIndexAttr(0)},
      sizes{b.getIndexAttr(heads), b.getIndexAttr(n), b.getIndexAttr(d)},
      unit(3, b.getIndexAttr(1));
  Value w = tensor::InsertSliceOp::create(b, loc, piece.getSource(),
                                          rows.getInitArgs()[0], offsets,
                                          sizes, unit);
  rows->getResult(0).replaceAllUsesWith(w);
  rows->erase();
  return true;
}
} // namespace


/// tosa.scatter as upstream's tosa-to-scf writes it: loops over rows n and
/// slots w (the inner one gone when folded) writing `input[n, w, :]` at
/// `values[n, idx[n, w], :]`. With one slot (a decode step) and the same
/// index in every row (each KV head's slot at the step's position), the
/// nest is one insert_slice of the whole input at `[0, idx[0, 0], 0]`.
/// Other scatter loops are marked (kScatterLoopAttr, with the reason) for
/// findChains' remark and left rolled.
void mlir::kvq::foldScatterLoops(func::FuncOp f) {
  Positions positions;
  SmallVector<scf::ForOp> outer;
  f.walk([&](scf::ForOp loop) {
    if (!loop->getParentOfType<scf::ForOp>())
      outer.push_back(loop);
  });
  for (scf::ForOp loop : outer) {
    // rows: the outer loop; slots: an inner loop of one iteration, or none.
    if (loop.getNumRegionIterArgs() != 1)
      continue;
    Value acc = loop.getRegionIterArgs()[0];
    Block *body = loop.getBody();
    Value slot;
    scf::ForOp inner;
    for (Operation &op : *body)
      if (auto l = dyn_cast<scf::ForOp>(op))
        inner = l;
    if (inner) {
      if (inner.getNumRegionIterArgs() != 1 || inner.getInitArgs()[0] != acc)
        continue;
      body = inner.getBody();
      acc = inner.getRegionIterArgs()[0];
      slot = inner.getInductionVar();
    }
    tensor::InsertSliceOp write;
    for (Operation &op : *body)
      if (auto w = dyn_cast<tensor::InsertSliceOp>(op))
        write = write ? tensor::InsertSliceOp() : w;
    if (!write || write.getDest() != acc ||
        body->getTerminator()->getOperand(0) != write.getResult())
      continue;
    auto values = dyn_cast<RankedTensorType>(write.getDestType());
    auto piece = write.getSource().getDefiningOp<tensor::ExtractSliceOp>();
    SmallVector<OpFoldResult> off = write.getMixedOffsets();
    if (!values || values.getRank() != 3 || !piece || off.size() != 3 ||
        dyn_cast<Value>(off[0]) != loop.getInductionVar())
      continue;
    // The index: idx[n, w] read in the body, index-cast.
    Value read = dyn_cast<Value>(off[1]);
    if (auto c = read ? read.getDefiningOp<arith::IndexCastOp>() : nullptr)
      read = c.getIn();
    auto ex = read ? read.getDefiningOp<tensor::ExtractOp>() : nullptr;
    if (!ex || ex.getIndices().size() != 2 ||
        ex.getIndices()[0] != loop.getInductionVar() ||
        !loop.isDefinedOutsideOfLoop(ex.getTensor()))
      continue;
    // From here on it is a scatter loop nest: folded or marked.
    auto idxType = cast<RankedTensorType>(ex.getTensor().getType());
    auto inputType = dyn_cast<RankedTensorType>(piece.getSourceType());
    bool oneSlot = idxType.hasStaticShape() && idxType.getDimSize(1) == 1;
    bool wholeRows =
        inputType && inputType.hasStaticShape() && inputType.getRank() == 3 &&
        inputType.getDimSize(0) == values.getDimSize(0) &&
        inputType.getDimSize(2) == values.getDimSize(2) &&
        isConstantIntValue(off[2], 0) &&
        dyn_cast<Value>(piece.getMixedOffsets()[0]) ==
            loop.getInductionVar() &&
        isConstantIntValue(piece.getMixedOffsets()[2], 0) &&
        getConstantIntValue(write.getMixedSizes()[0]) == 1 &&
        getConstantIntValue(write.getMixedSizes()[1]) == 1 &&
        getConstantIntValue(write.getMixedSizes()[2]) ==
            values.getDimSize(2) &&
        llvm::all_of(write.getMixedStrides(),
                     [](OpFoldResult s) { return isConstantIntValue(s, 1); });
    std::optional<int64_t> trips = loop.getStaticTripCount()
                                       ? std::optional<int64_t>(
                                             loop.getStaticTripCount()
                                                 ->getSExtValue())
                                       : std::nullopt;
    const ScatterNest nest{loop,    inner,     write,   piece,
                           ex,      values,    inputType, idxType};
    if (!oneSlot && (values.getDimSize(0) == 1
                         ? foldFlattenedScatter(nest, positions)
                         : foldRowsScatterChunk(nest, positions)))
      continue;
    const char *why =
        !oneSlot && values.getDimSize(0) == 1
            ? "writes several slots per row, at indices not shown to be "
              "head * capacity + position (for token j of a chunk, "
              "position j of the step's positions)"
        : !oneSlot ? "writes several slots per row (a chunk of tokens) "
                     "at indices not shown to be the same positions in "
                     "every row"
        : !wholeRows || trips != values.getDimSize(0) ||
                !isConstantIntValue(loop.getLowerBound(), 0)
            ? "does not write whole rows of every head"
        : !uniformAlong(ex.getTensor(), 0)
            ? "has indices not shown to be one position for every row"
            : nullptr;
    if (why) {
      loop->setAttr(kScatterLoopAttr, StringAttr::get(f.getContext(), why));
      continue;
    }
    Value pos = positions.readFrom(ex.getTensor(), 2);
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), pos,
                                      b.getIndexAttr(0)},
        sizes, ones(3, b.getIndexAttr(1));
    for (int64_t n : inputType.getShape())
      sizes.push_back(b.getIndexAttr(n));
    Value w = tensor::InsertSliceOp::create(b, loc, piece.getSource(),
                                            loop.getInitArgs()[0], offsets,
                                            sizes, ones);
    loop->getResult(0).replaceAllUsesWith(w);
    loop->erase();
  }
}

/// Writes of one token at a runtime position spelled as a scatter become,
/// on the matcher's copy, the insert_slice the matcher follows:
///  - `tensor.scatter %new into %cache[%idx] scatter_dims([d])` with one
///    index (torch's index_copy/index_put of a static cache): the position
///    is `%idx[0, 0]`;
///  - an elementwise generic over the cache yielding
///    `select(index(d) == P, NEW, old)` (`where(arange == pos, new, old)`):
///    the position is P, the new slot NEW evaluated at index(d) = P.
/// Anything else is left for findChains' remarks.
void mlir::kvq::scatterWritesToInsertSlices(func::FuncOp f) {
  Positions positions;
  auto positionIn = [&](Value t, int64_t rank) {
    return positions.readFrom(t, rank);
  };
  SmallVector<Operation *> candidates;
  f.walk([&](Operation *op) {
    if (isa<tensor::ScatterOp, linalg::GenericOp>(op))
      candidates.push_back(op);
  });
  OpBuilder b(f.getContext());
  for (Operation *op : candidates) {
    Location loc = op->getLoc();
    if (auto sc = dyn_cast<tensor::ScatterOp>(op)) {
      auto idxType = sc.getIndices().getType();
      auto srcType = sc.getSource().getType();
      auto destType = sc.getDest().getType();
      if (sc.getScatterDims().size() != 1 || idxType.getRank() != 2 ||
          idxType.getDimSize(0) != 1 || idxType.getDimSize(1) != 1 ||
          srcType.getRank() != destType.getRank() + 1 ||
          !srcType.hasStaticShape() || srcType.getDimSize(0) != 1)
        continue;
      int64_t d = sc.getScatterDims()[0];
      Value pos = positionIn(sc.getIndices(), 2);
      b.setInsertionPoint(sc);
      SmallVector<ReassociationIndices> groups;
      groups.push_back({0, 1});
      for (int64_t i = 2; i < srcType.getRank(); ++i)
        groups.push_back({i});
      Value slot =
          tensor::CollapseShapeOp::create(b, loc, sc.getSource(), groups);
      SmallVector<OpFoldResult> offsets(destType.getRank(), b.getIndexAttr(0)),
          ones(destType.getRank(), b.getIndexAttr(1)), sizes;
      offsets[d] = pos;
      for (int64_t n : srcType.getShape().drop_front())
        sizes.push_back(b.getIndexAttr(n));
      Value w = tensor::InsertSliceOp::create(b, loc, slot, sc.getDest(),
                                              offsets, sizes, ones);
      sc.replaceAllUsesWith(w);
      sc.erase();
      continue;
    }
    auto g = cast<linalg::GenericOp>(op);
    // NEW read through inputs over the cache's shape is not followed.
    if (g.getNumDpsInputs() != 0 || g.getNumDpsInits() != 1 ||
        g.getNumReductionLoops() != 0 ||
        !llvm::all_of(g.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isIdentity(); }))
      continue;
    Block &body = g.getRegion().front();
    OpOperand *init = g.getDpsInitOperand(0);
    Value old = body.getArgument(init->getOperandNumber());
    auto sel = body.getTerminator()->getOperand(0).getDefiningOp<arith::SelectOp>();
    if (!sel || sel->getBlock() != &body || sel.getFalseValue() != old)
      continue;
    auto eq = sel.getCondition().getDefiningOp<arith::CmpIOp>();
    if (!eq || eq.getPredicate() != arith::CmpIPredicate::eq)
      continue;
    auto index = eq.getLhs().getDefiningOp<linalg::IndexOp>();
    Value p = eq.getRhs();
    if (!index) {
      index = eq.getRhs().getDefiningOp<linalg::IndexOp>();
      p = eq.getLhs();
    }
    if (!index || !p.getType().isIndex())
      continue;
    // P from outside the body, or read in it (possibly index-cast) from
    // element 0 of a tensor defined outside: then read once in front.
    Value pos = p;
    if (p.getParentBlock() == &body) {
      Value read = p;
      if (auto cast = read.getDefiningOp<arith::IndexCastOp>())
        read = cast.getIn();
      auto ex = read.getDefiningOp<tensor::ExtractOp>();
      if (!ex || ex->getBlock() != &body ||
          g->isAncestor(ex.getTensor().getParentBlock()->getParentOp()) ||
          !llvm::all_of(ex.getIndices(),
                        [](Value i) { return isConstantIntValue(i, 0); }))
        continue;
      pos = positionIn(ex.getTensor(), ex.getIndices().size());
    }
    b.setInsertionPoint(g);
    // The new slot: the body over [.., 1, ..] with index(d) read as P, so
    // the select takes NEW.
    auto outType = cast<RankedTensorType>(init->get().getType());
    int64_t d = index.getDim();
    SmallVector<int64_t> slotShape(outType.getShape());
    slotShape[d] = 1;
    auto slotType = outType.clone(slotShape);
    Value empty = tensor::EmptyOp::create(b, loc, slotShape,
                                          outType.getElementType());
    auto slotGen = linalg::GenericOp::create(
        b, loc, TypeRange{slotType}, ValueRange{}, ValueRange{empty},
        g.getIndexingMapsArray(), g.getIteratorTypesArray());
    IRMapping map;
    Block *slotBody = b.createBlock(&slotGen.getRegion(), {},
                                    body.getArgumentTypes(),
                                    SmallVector<Location>(
                                        body.getNumArguments(), loc));
    for (auto [from, to] :
         llvm::zip(body.getArguments(), slotBody->getArguments()))
      map.map(from, to);
    for (Operation &bodyOp : body)
      b.clone(bodyOp, map);
    // index(d) -> P (read in front of the generic) inside the slot body.
    for (Operation &bodyOp : llvm::make_early_inc_range(*slotBody))
      if (auto i = dyn_cast<linalg::IndexOp>(bodyOp);
          i && int64_t(i.getDim()) == d) {
        i.replaceAllUsesWith(pos);
        i.erase();
      }
    b.setInsertionPoint(g);
    SmallVector<OpFoldResult> offsets(outType.getRank(), b.getIndexAttr(0)),
        ones(outType.getRank(), b.getIndexAttr(1)), sizes;
    offsets[d] = pos;
    for (int64_t n : slotShape)
      sizes.push_back(b.getIndexAttr(n));
    Value w = tensor::InsertSliceOp::create(b, loc, slotGen.getResult(0),
                                            init->get(), offsets, sizes, ones);
    g->getResult(0).replaceAllUsesWith(w);
    g.erase();
  }
}

/// Caches grown by `tensor.concat %cache, %new` along their one dynamic
/// dimension (Hugging Face's DynamicCache through torch-mlir) become, on the
/// matcher's copy, caches of `capacity` positions written by insert_slice
/// at a new trailing index argument (their length before the step) and read
/// as the prefix up to it plus the new tokens, which the matcher then
/// follows like any static cache. Returns that argument, or null when no
/// cache grows.
BlockArgument mlir::kvq::growConcatCaches(func::FuncOp f,
                                          int64_t capacity) {
  if (capacity <= 0 || !f.getBody().hasOneBlock())
    return BlockArgument();
  Block &entry = f.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return BlockArgument();
  BlockArgument pos;
  OpBuilder b(f.getContext());
  for (BlockArgument arg : llvm::to_vector(entry.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getNumDynamicDims() != 1)
      continue;
    int64_t d = 0;
    while (!type.isDynamicDim(d))
      ++d;
    tensor::ConcatOp grow;
    bool onlyGrownOrMeasured = true;
    for (Operation *u : arg.getUsers()) {
      auto c = dyn_cast<tensor::ConcatOp>(u);
      auto dim = dyn_cast<tensor::DimOp>(u);
      if (c && !grow && c.getDim() == uint64_t(d) &&
          c.getInputs().size() == 2 && c.getInputs()[0] == arg &&
          cast<RankedTensorType>(c.getInputs()[1].getType())
              .hasStaticShape())
        grow = c;
      else if (!(dim && dim.getConstantIndex() == d))
        onlyGrownOrMeasured = false;
    }
    if (!grow || !onlyGrownOrMeasured)
      continue;
    if (!pos) {
      unsigned n = entry.getNumArguments();
      if (failed(f.insertArgument(n, b.getIndexType(), {}, f.getLoc())))
        return BlockArgument();
      pos = entry.getArgument(n);
    }
    for (Operation *u : llvm::make_early_inc_range(arg.getUsers()))
      if (auto dim = dyn_cast<tensor::DimOp>(u)) {
        dim.replaceAllUsesWith(Value(pos));
        dim.erase();
      }
    SmallVector<int64_t> shape(type.getShape());
    shape[d] = capacity;
    auto fixed = type.clone(shape);
    arg.setType(fixed);
    Value fresh = grow.getInputs()[1];
    auto freshType = cast<RankedTensorType>(fresh.getType());
    b.setInsertionPoint(grow);
    Location loc = grow.getLoc();
    SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0)),
        ones(shape.size(), b.getIndexAttr(1)), writeSizes, readSizes;
    offsets[d] = pos;
    for (int64_t n : freshType.getShape())
      writeSizes.push_back(b.getIndexAttr(n));
    Value written = tensor::InsertSliceOp::create(b, loc, fresh, arg, offsets,
                                                  writeSizes, ones);
    Value length = arith::AddIOp::create(
        b, loc, pos,
        arith::ConstantIndexOp::create(b, loc, freshType.getDimSize(d)));
    for (int64_t n : shape)
      readSizes.push_back(b.getIndexAttr(n));
    readSizes[d] = length;
    SmallVector<OpFoldResult> zeros(shape.size(), b.getIndexAttr(0));
    Value read = tensor::ExtractSliceOp::create(
        b, loc, cast<RankedTensorType>(grow.getType()), written, zeros,
        readSizes, ones);
    // The grown length, where the graph measures it, is pos + new tokens.
    for (Operation *u : llvm::make_early_inc_range(grow->getUsers()))
      if (auto dim = dyn_cast<tensor::DimOp>(u);
          dim && dim.getConstantIndex() == d) {
        dim.replaceAllUsesWith(length);
        dim.erase();
      }
    for (OpOperand &use : llvm::make_early_inc_range(grow->getUses()))
      use.set(use.getOwner() == ret.getOperation() ? written : read);
    grow.erase();
  }
  if (pos)
    f.setType(FunctionType::get(f.getContext(), entry.getArgumentTypes(),
                                ret.getOperandTypes()));
  return pos;
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
/// The return of a one-block function, or null.
func::ReturnOp singleReturn(func::FuncOp f) {
  if (!f.getBody().hasOneBlock())
    return nullptr;
  return dyn_cast<func::ReturnOp>(f.getBody().front().getTerminator());
}

/// The chain of a tensor argument: its insert_slice writes in order, the
/// extract_slice reads of each chain value, and the return operand index.
/// False when the argument has other uses.
struct ArgChain {
  SmallVector<tensor::InsertSliceOp> writes;
  SmallVector<SmallVector<tensor::ExtractSliceOp>> reads;
  unsigned returned = 0;
};

std::optional<ArgChain> chainOf(BlockArgument arg, func::ReturnOp ret) {
  ArgChain c;
  bool returned = false;
  for (Value v = arg; v;) {
    Value next;
    c.reads.emplace_back();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto w = dyn_cast<tensor::InsertSliceOp>(user);
          w && use.getOperandNumber() == 1 && !next) {
        c.writes.push_back(w);
        next = w.getResult();
      } else if (auto r = dyn_cast<tensor::ExtractSliceOp>(user)) {
        c.reads.back().push_back(r);
      } else if (user == ret && !returned) {
        c.returned = use.getOperandNumber();
        returned = true;
      } else {
        return std::nullopt;
      }
    }
    v = next;
  }
  if (!returned || c.writes.empty())
    return std::nullopt;
  return c;
}
} // namespace

namespace {
/// Which half of dim `d` (of size 2 * `half`) `slice` takes, when it takes
/// exactly one: 0 or 1.
template <typename SliceOp>
std::optional<int64_t> entryOn(SliceOp slice, unsigned d, int64_t half) {
  std::optional<int64_t> size = getConstantIntValue(slice.getMixedSizes()[d]);
  std::optional<int64_t> at = getConstantIntValue(slice.getMixedOffsets()[d]);
  if (size != half || !at || (*at != 0 && *at != half))
    return std::nullopt;
  return *at / half;
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
  func::ReturnOp ret = singleReturn(f);
  if (!ret)
    return false;
  bool changed = false;
  for (unsigned a = 0; a < f.getNumArguments(); ++a) {
    BlockArgument arg = f.getArgument(a);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      continue;
    std::optional<ArgChain> chain = chainOf(arg, ret);
    if (!chain)
      continue;
    SmallVector<tensor::InsertSliceOp> &writes = chain->writes;
    SmallVector<SmallVector<tensor::ExtractSliceOp>> &reads = chain->reads;
    unsigned returned = chain->returned;
    // The dimension of size 2 whose entry every slice picks, both written.
    std::optional<unsigned> pairDim;
    for (unsigned d = 0; d < type.getRank() && !pairDim; ++d) {
      int64_t half = type.getDimSize(d) / 2;
      if (type.getDimSize(d) % 2 || half == 0)
        continue;
      bool picks = true, seen[2] = {false, false};
      for (tensor::InsertSliceOp w : writes) {
        std::optional<int64_t> e = entryOn(w, d, half);
        picks = picks && e && (*e == 0 || *e == 1);
        if (picks)
          seen[*e] = true;
      }
      for (auto &rs : reads)
        for (tensor::ExtractSliceOp r : rs) {
          std::optional<int64_t> e = entryOn(r, d, half);
          picks = picks && e && (*e == 0 || *e == 1);
        }
      if (picks && seen[0] && seen[1])
        pairDim = d;
    }
    if (!pairDim)
      continue;
    unsigned d = *pairDim;
    int64_t half = type.getDimSize(d) / 2;
    SmallVector<int64_t> shape(type.getShape());
    shape[d] = half;
    auto halfType = RankedTensorType::get(shape, type.getElementType());
    // The two entries as arguments a and a + 1 (the old one is erased).
    (void)f.insertArgument(a + 1, halfType, nullptr, arg.getLoc());
    (void)f.insertArgument(a + 2, halfType, nullptr, arg.getLoc());
    Value cur[2] = {f.getArgument(a + 1), f.getArgument(a + 2)};
    OpBuilder b(f.getContext());
    for (size_t i = 0; i < reads.size(); ++i) {
      for (tensor::ExtractSliceOp r : reads[i]) {
        b.setInsertionPoint(r);
        int64_t e = *entryOn(r, d, half);
        Value nr = tensor::ExtractSliceOp::create(
            b, r.getLoc(), r.getType(), cur[e], offsetsOnEntry(b, r, d),
            r.getMixedSizes(), r.getMixedStrides());
        r.getResult().replaceAllUsesWith(nr);
        r->erase();
      }
      if (i < writes.size()) {
        tensor::InsertSliceOp w = writes[i];
        b.setInsertionPoint(w);
        int64_t e = *entryOn(w, d, half);
        cur[e] = tensor::InsertSliceOp::create(
            b, w.getLoc(), w.getSource(), cur[e], offsetsOnEntry(b, w, d),
            w.getMixedSizes(), w.getMixedStrides());
      }
    }
    ret->setOperand(returned, cur[0]);
    ret->insertOperands(returned + 1, ValueRange{cur[1]});
    for (tensor::InsertSliceOp w : llvm::reverse(writes))
      w->erase();
    (void)f.insertResult(returned + 1, halfType, nullptr);
    SmallVector<Type> results(f.getResultTypes());
    results[returned] = halfType;
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

void mlir::kvq::inlineCalls(func::FuncOp f, SymbolTable &symbols) {
  for (int depth = 0; depth < 8; ++depth) {
    SmallVector<func::CallOp> calls;
    f.walk([&](func::CallOp c) { calls.push_back(c); });
    bool inlined = false;
    for (func::CallOp call : calls) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal() || callee.getSymName() ==
                                                 f.getSymName() ||
          !callee.getBody().hasOneBlock())
        continue;
      Block &body = callee.getBody().front();
      auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
      if (!ret)
        continue;
      IRMapping map;
      map.map(body.getArguments(), call.getOperands());
      OpBuilder b(call);
      for (Operation &op : body.without_terminator())
        b.clone(op, map);
      for (auto [result, value] :
           llvm::zip(call.getResults(), ret.getOperands()))
        result.replaceAllUsesWith(map.lookupOrDefault(value));
      call->erase();
      inlined = true;
    }
    if (!inlined)
      return;
  }
}

void mlir::kvq::unrollLayerLoops(func::FuncOp f) {
  SmallVector<scf::ForOp> loops;
  f.walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
    std::optional<APInt> trips = loop.getStaticTripCount();
    bool writesState = llvm::any_of(loop.getInitArgs(), [](Value v) {
      return isa<RankedTensorType>(v.getType());
    }) && !loop.getBody()->getOps<tensor::InsertSliceOp>().empty();
    // A scatter's loops (foldScatterLoops) keep their own remark.
    if (trips && trips->ule(256) && writesState &&
        !loop->hasAttr(kScatterLoopAttr))
      loops.push_back(loop);
  });
  bool unrolled = false;
  for (scf::ForOp loop : loops)
    unrolled |= succeeded(loopUnrollFull(loop));
  if (unrolled)
    (void)applyPatternsGreedily(f, RewritePatternSet(f.getContext()));
}

bool mlir::kvq::unflattenHeads(func::FuncOp f) {
  func::ReturnOp ret = singleReturn(f);
  if (!ret)
    return false;
  bool changed = false;
  MLIRContext *ctx = f.getContext();
  for (unsigned a = 0; a < f.getNumArguments(); ++a) {
    BlockArgument arg = f.getArgument(a);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 2)
      continue;
    std::optional<ArgChain> c = chainOf(arg, ret);
    if (!c)
      continue;
    unsigned last = type.getRank() - 1;
    int64_t width = type.getDimSize(last);
    auto fullLast = [&](auto slice) {
      return getConstantIntValue(slice.getMixedOffsets()[last]) == 0 &&
             getConstantIntValue(slice.getMixedSizes()[last]) == width;
    };
    // Every read: the whole last dim, split into [H, D] by its one user.
    std::optional<int64_t> heads;
    bool ok = llvm::all_of(c->writes, fullLast);
    size_t readCount = 0;
    for (auto &rs : c->reads)
      for (tensor::ExtractSliceOp r : rs) {
        ++readCount;
        auto e = r->hasOneUse()
                     ? dyn_cast<tensor::ExpandShapeOp>(*r->getUsers().begin())
                     : tensor::ExpandShapeOp();
        if (!e || !fullLast(r)) {
          ok = false;
          continue;
        }
        SmallVector<ReassociationIndices> groups =
            e.getReassociationIndices();
        unsigned rank = r.getType().getRank();
        bool split = groups.size() == rank && groups.back().size() == 2;
        for (unsigned i = 0; split && i + 1 < rank; ++i)
          split = groups[i].size() == 1;
        int64_t h = split ? e.getResultType().getDimSize(rank - 1) : 0;
        if (!split || h <= 1 || ShapedType::isDynamic(h) ||
            (heads && *heads != h))
          ok = false;
        else
          heads = h;
      }
    if (!ok || !heads || readCount == 0)
      continue;
    int64_t dim = width / *heads;
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = *heads;
    shape.push_back(dim);
    auto wide = RankedTensorType::get(shape, type.getElementType());
    (void)f.insertArgument(a + 1, wide, nullptr, arg.getLoc());
    Value cur = f.getArgument(a + 1);
    OpBuilder b(ctx);
    auto widen = [&](auto slice, SmallVector<OpFoldResult> &offsets,
                     SmallVector<OpFoldResult> &sizes,
                     SmallVector<OpFoldResult> &strides) {
      offsets = slice.getMixedOffsets();
      sizes = slice.getMixedSizes();
      strides = slice.getMixedStrides();
      offsets.push_back(b.getIndexAttr(0));
      sizes.back() = b.getIndexAttr(*heads);
      sizes.push_back(b.getIndexAttr(dim));
      strides.push_back(b.getIndexAttr(1));
    };
    for (size_t i = 0; i < c->reads.size(); ++i) {
      for (tensor::ExtractSliceOp r : c->reads[i]) {
        auto e = cast<tensor::ExpandShapeOp>(*r->getUsers().begin());
        b.setInsertionPoint(r);
        SmallVector<OpFoldResult> offsets, sizes, strides;
        widen(r, offsets, sizes, strides);
        Value nr = tensor::ExtractSliceOp::create(
            b, r.getLoc(), e.getResultType(), cur, offsets, sizes, strides);
        e.getResult().replaceAllUsesWith(nr);
        e->erase();
        r->erase();
      }
      if (i < c->writes.size()) {
        tensor::InsertSliceOp w = c->writes[i];
        b.setInsertionPoint(w);
        RankedTensorType src = w.getSourceType();
        SmallVector<int64_t> srcShape(src.getShape());
        srcShape.back() = *heads;
        srcShape.push_back(dim);
        SmallVector<ReassociationIndices> groups;
        for (unsigned k = 0; k + 1 < src.getRank(); ++k)
          groups.push_back({k});
        groups.push_back({src.getRank() - 1, src.getRank()});
        Value split = tensor::ExpandShapeOp::create(
            b, w.getLoc(), RankedTensorType::get(srcShape, src.getElementType()),
            w.getSource(), groups);
        SmallVector<OpFoldResult> offsets, sizes, strides;
        widen(w, offsets, sizes, strides);
        cur = tensor::InsertSliceOp::create(b, w.getLoc(), split, cur, offsets,
                                            sizes, strides);
      }
    }
    ret->setOperand(c->returned, cur);
    for (tensor::InsertSliceOp w : llvm::reverse(c->writes))
      w->erase();
    SmallVector<Type> results(f.getResultTypes());
    results[c->returned] = wide;
    f.setType(FunctionType::get(ctx, f.getArgumentTypes(), results));
    (void)f.eraseArgument(a);
    changed = true;
  }
  return changed;
}

bool mlir::kvq::isRelabel(Operation *op) {
  if (!isa_and_present<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
                       tensor::ReshapeOp, tensor::CastOp>(op))
    return false;
  auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return in && out && in.hasStaticShape() && out.hasStaticShape();
}

bool mlir::kvq::stripCacheReshapes(func::FuncOp f) {
  func::ReturnOp ret = singleReturn(f);
  if (!ret)
    return false;
  bool changed = false;
  for (BlockArgument arg : f.getArguments()) {
    // arg -> relabels (each the only use of the one before) -> inner.
    Value inner = arg;
    SmallVector<Operation *> in;
    while (inner.hasOneUse() && isRelabel(*inner.getUsers().begin())) {
      in.push_back(*inner.getUsers().begin());
      inner = in.back()->getResult(0);
    }
    // Only state: the inner value is written (insert_slice, a scatter, or
    // a loop carrying it), not an activation reshaped in and out.
    bool written = llvm::any_of(inner.getUses(), [](OpOperand &use) {
      Operation *u = use.getOwner();
      if (auto w = dyn_cast<tensor::InsertSliceOp>(u))
        return use.get() == w.getDest();
      if (auto s = dyn_cast<tensor::ScatterOp>(u))
        return use.get() == s.getDest();
      return isa<scf::ForOp>(u);
    });
    if (in.empty() || !written)
      continue;
    // A returned relabel chain from a value of inner's type back to arg's.
    for (OpOperand &result : ret->getOpOperands()) {
      if (result.get().getType() != arg.getType())
        continue;
      Value outer = result.get();
      while (isRelabel(outer.getDefiningOp()) &&
             outer.getType() != inner.getType())
        outer = outer.getDefiningOp()->getOperand(0);
      if (outer == result.get() || outer.getType() != inner.getType())
        continue;
      Type innerType = inner.getType();
      inner.replaceAllUsesWith(arg);
      for (Operation *op : llvm::reverse(in))
        op->erase();
      arg.setType(innerType);
      Value back = result.get();
      result.set(outer);
      // The relabels back, now unused, would read as other uses of the
      // cache.
      while (back != outer && back.use_empty()) {
        Operation *op = back.getDefiningOp();
        back = op->getOperand(0);
        op->erase();
      }
      SmallVector<Type> results(f.getResultTypes());
      results[result.getOperandNumber()] = innerType;
      f.setType(FunctionType::get(f.getContext(),
                                  f.getBody().getArgumentTypes(), results));
      changed = true;
      break;
    }
  }
  return changed;
}
