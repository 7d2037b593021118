//===- BlockedSoftmax.cpp - flash-decoding loops as one softmax -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/transforms/kvcache/BlockedSoftmax.h"
#include "passes/transforms/kvcache/ElementEvaluator.h"
#include "passes/transforms/kvcache/GenericForms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kvq;

namespace {

class BlockedLoop {
public:
  explicit BlockedLoop(scf::ForOp loop) : loop_(loop), b_(loop) {}

  /// Whether the loop reads a tensor from outside it in slices.
  bool readsInBlocks() {
    for (Operation &op : *loop_.getBody())
      if (auto read = dyn_cast<tensor::ExtractSliceOp>(op);
          read && loop_.isDefinedOutsideOfLoop(read.getSource()))
        return true;
    return false;
  }

  /// Rewrites the loop; on failure nothing has changed and why() says why.
  LogicalResult raise();
  const std::string &why() const { return why_; }

private:
  LogicalResult refuse(const Twine &why) {
    why_ = why.str();
    for (Operation *op : llvm::reverse(created_))
      op->erase();
    created_.clear();
    return failure();
  }
  LogicalResult recurrence();
  LogicalResult collect(Value v, llvm::SetVector<Operation *> &slice,
                        ArrayRef<Value> leaves);
  LogicalResult blockReads(ArrayRef<Operation *> slice);
  LogicalResult cloneOver(ArrayRef<Operation *> slice, IRMapping &map);
  FailureOr<Value> cloneGeneric(linalg::GenericOp g, IRMapping &map,
                                Value initOverride = Value());
  FailureOr<Value> initOfShape(Value init, ArrayRef<OpFoldResult> shape,
                               IRMapping &map);
  LogicalResult checkShift(Value blockScores, Value wholeScores,
                           Value wholeScaled);
  /// Extent d of a cloned tensor: the whole read's length where the clone
  /// made it dynamic (the only extent the raise changes), else its own.
  OpFoldResult extent(RankedTensorType type, int64_t d) {
    return type.isDynamicDim(d) ? getAsOpFoldResult(total_)
                                : OpFoldResult(b_.getIndexAttr(type.getDimSize(d)));
  }
  template <typename OpT, typename... Args> OpT make(Args &&...args) {
    auto op = OpT::create(b_, loop_.getLoc(), std::forward<Args>(args)...);
    created_.push_back(op);
    return op;
  }

  scf::ForOp loop_;
  OpBuilder b_;
  std::string why_;
  std::vector<Operation *> created_;
  // The recurrence.
  unsigned iM_ = 0, iL_ = 0, iA_ = 0;
  linalg::GenericOp max_, sum_, weighted_;
  Value scaled_, weights_, values_, newMax_;
  linalg::GenericOp divide_;
  // The block reads.
  int64_t block_ = 0;
  Value total_;
};

/// The reduction behind a carried value: the value itself (accumulated
/// into its init), or one input of the elementwise generic that combines it
/// with the old value (`max(m, rowmax s)`, `a * l + rowsum p`, as functional
/// frontends write the update).
std::pair<linalg::GenericOp, bool>
reductionBehind(Value y, Block *body,
                function_ref<bool(linalg::GenericOp)> kind) {
  auto g = y.getDefiningOp<linalg::GenericOp>();
  if (!g || g->getBlock() != body)
    return {};
  if (kind(g))
    return {g, true};
  if (g.getNumReductionLoops() != 0)
    return {};
  linalg::GenericOp found;
  for (Value in : g.getDpsInputs())
    if (auto r = in.getDefiningOp<linalg::GenericOp>();
        r && r->getBlock() == body && kind(r)) {
      if (found && found != r)
        return {};
      found = r;
    }
  return {found, false};
}

LogicalResult BlockedLoop::recurrence() {
  auto yield = cast<scf::YieldOp>(loop_.getBody()->getTerminator());
  auto iterArgs = loop_.getRegionIterArgs();
  Block *body = loop_.getBody();
  auto isSum = [](linalg::GenericOp g) {
    return isReduction<arith::AddFOp>(g) && g.getNumReductionLoops() == 1;
  };
  auto isWeighted = [](linalg::GenericOp g) { return isMulAddContraction(g); };
  int found[3] = {-1, -1, -1};
  bool direct[3] = {};
  linalg::GenericOp *ops[3] = {&max_, &sum_, &weighted_};
  for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
    // Accumulated into its init, a running max starts from the old one.
    auto isMax = [&, i = i, v = v](linalg::GenericOp g) {
      return isMaxReduction(g) && (g.getDpsInits()[0] == iterArgs[i] ||
                                   g.getResult(0) != v);
    };
    function_ref<bool(linalg::GenericOp)> kinds[3] = {isMax, isSum,
                                                      isWeighted};
    for (int k = 0; k < 3; ++k) {
      auto [g, d] = reductionBehind(v, body, kinds[k]);
      if (g && found[k] < 0) {
        found[k] = i, direct[k] = d, *ops[k] = g;
        break;
      }
    }
  }
  if (llvm::is_contained(found, -1))
    return refuse("the loop does not carry a running max (a max reduction "
                  "from its old value), a running sum and a weighted sum");
  iM_ = found[0], iL_ = found[1], iA_ = found[2];
  scaled_ = max_.getDpsInputs()[0];
  weights_ = sum_.getDpsInputs()[0];
  unsigned w = weighted_.getDpsInputs()[0] == weights_ ? 0 : 1;
  if (weighted_.getDpsInputs()[w] != weights_)
    return refuse("the running sum and the weighted sum do not take the same "
                  "block weights");
  values_ = weighted_.getDpsInputs()[1 - w];
  // The divide after the softmax reads the weights as the sum does.
  if (!sum_.getIndexingMapsArray()[0].isPermutation())
    return refuse("the running sum does not reduce the block weights "
                  "element by element");
  // The new max: the max reduction from the old one, or max(old, a block
  // max from -inf).
  newMax_ = yield.getOperand(iM_);
  if (!direct[0] &&
      (!startsAtLowest(max_.getDpsInits()[0]) ||
       !evaluatesTo(newMax_, iterArgs[iM_], {{max_.getResult(0), 0.75}},
                    [](double old) { return std::max(old, 0.75); }) ||
       !evaluatesTo(newMax_, iterArgs[iM_], {{max_.getResult(0), -0.5}},
                    [](double old) { return std::max(old, -0.5); })))
    return refuse("the new running max is not max(old max, the block's max)");
  if (!computesElementwise(weights_, scaled_, newMax_,
                           [](double s, double m) { return std::exp(s - m); }))
    return refuse("the block weights are not exp(scores - running max)");
  // The sum and the output: their old values times exp(old max - new max)
  // plus the block's, accumulated onto the rescaled value or added to it.
  auto rescales = [&](linalg::GenericOp red, bool accumulated, unsigned i) {
    for (auto [oldMax, newM] : {std::pair{0.5, 1.25}, std::pair{-2.0, -0.75}}) {
      double a = std::exp(oldMax - newM);
      SmallVector<std::pair<Value, double>> stats = {{iterArgs[iM_], oldMax},
                                                     {newMax_, newM}};
      bool ok;
      if (accumulated) {
        ok = evaluatesTo(red.getDpsInits()[0], iterArgs[i], stats,
                         [a](double old) { return old * a; });
      } else {
        stats.push_back({red.getResult(0), 0.375});
        ok = startsAtZero(red.getDpsInits()[0]) &&
             evaluatesTo(yield.getOperand(i), iterArgs[i], stats,
                         [a](double old) { return old * a + 0.375; });
      }
      if (!ok)
        return false;
    }
    return true;
  };
  if (!rescales(sum_, direct[1], iL_))
    return refuse("the running sum is not its old value times exp(old max - "
                  "new max) plus the block's sum");
  if (!rescales(weighted_, direct[2], iA_))
    return refuse("the weighted sum is not its old value times exp(old max - "
                  "new max) plus the block's");
  auto inits = loop_.getInitArgs();
  if (!startsAtLowest(inits[iM_]))
    return refuse("the running max does not start at -inf");
  if (!startsAtZero(inits[iL_]) || !startsAtZero(inits[iA_]))
    return refuse("the running sum or the weighted sum does not start at 0");
  // After the loop: the output divided by the sum, and nothing else.
  Value m = loop_.getResult(iM_), l = loop_.getResult(iL_),
        acc = loop_.getResult(iA_);
  Operation *user = acc.hasOneUse() ? *acc.getUsers().begin() : nullptr;
  divide_ = dyn_cast_or_null<linalg::GenericOp>(user);
  if (!m.use_empty() || !l.hasOneUse() || !divide_ ||
      *l.getUsers().begin() != user || divide_.getNumResults() != 1 ||
      divide_.getResult(0).getType() != acc.getType() ||
      !computesElementwise(divide_.getResult(0), acc, l,
                           [](double a, double s) { return a / s; }))
    return refuse("the loop's weighted sum is not divided by its running sum "
                  "after the loop, and only that");
  return success();
}

/// The ops of the loop body that `v` is computed from, stopping at `leaves`
/// and at values from outside the loop.
LogicalResult BlockedLoop::collect(Value v, llvm::SetVector<Operation *> &slice,
                                   ArrayRef<Value> leaves) {
  if (llvm::is_contained(leaves, v) || loop_.isDefinedOutsideOfLoop(v) ||
      v == loop_.getInductionVar())
    return success();
  if (isa<BlockArgument>(v))
    return refuse("the block's scores or values depend on the running state");
  Operation *op = v.getDefiningOp();
  while (op->getBlock() != loop_.getBody())
    op = op->getParentOp();
  if (slice.contains(op))
    return success();
  // Scalars are cloned before the loop: only ops without side effects.
  bool scalar = isPure(op) && llvm::none_of(op->getResultTypes(), [](Type t) {
                  return isa<ShapedType>(t);
                });
  if (!(isa<linalg::GenericOp, linalg::FillOp, tensor::EmptyOp,
            tensor::ExtractSliceOp>(op) ||
        (scalar && op->getNumRegions() == 0)))
    return refuse("kvq cannot read '" + op->getName().getStringRef() +
                  "' over the whole cache");
  for (Value operand : op->getOperands())
    if (failed(collect(operand, slice, leaves)))
      return failure();
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(op->getRegions(), above);
  for (Value a : above)
    if (failed(collect(a, slice, leaves)))
      return failure();
  slice.insert(op);
  return success();
}

/// Every read of outside state is [b * B, b * B + B) along one dim for
/// block b, whole elsewhere; the reads become [0, n * B).
LogicalResult BlockedLoop::blockReads(ArrayRef<Operation *> slice) {
  Value iv = loop_.getInductionVar();
  auto isBlockOffset = [&](Value off, int64_t size) {
    if (off == iv)
      return size == 1;
    auto mul = off.getDefiningOp<arith::MulIOp>();
    APInt c;
    return mul &&
           ((mul.getLhs() == iv && matchPattern(mul.getRhs(), m_ConstantInt(&c))) ||
            (mul.getRhs() == iv && matchPattern(mul.getLhs(), m_ConstantInt(&c)))) &&
           c.getSExtValue() == size;
  };
  for (Operation *op : slice) {
    auto read = dyn_cast<tensor::ExtractSliceOp>(op);
    if (!read)
      continue;
    if (!loop_.isDefinedOutsideOfLoop(read.getSource()))
      return refuse("a block is sliced again inside the loop");
    if (read.getSourceType().getRank() != read.getResultType().getRank() ||
        !llvm::all_of(read.getMixedStrides(),
                      [](OpFoldResult s) { return isConstantIntValue(s, 1); }))
      return refuse("a block read is strided or drops dimensions");
    int blockDim = -1;
    for (auto [d, off] : llvm::enumerate(read.getMixedOffsets())) {
      auto v = dyn_cast<Value>(off);
      if (!v || loop_.isDefinedOutsideOfLoop(v))
        continue;
      std::optional<int64_t> size = getConstantIntValue(read.getMixedSizes()[d]);
      if (blockDim >= 0 || !size || !isBlockOffset(v, *size) ||
          (block_ && block_ != *size))
        return refuse("the block reads are not [b * B, b * B + B) along one "
                      "dimension for block b, with one B");
      blockDim = d;
      block_ = *size;
    }
    // A read that does not move with the block is the same every block.
  }
  if (!block_)
    return refuse("the loop reads the same slices in every iteration, no "
                  "blocks");
  return success();
}

/// `init` (an empty tensor or a fill inside the loop, or a tensor from
/// outside of the right shape) rebuilt with `shape`.
FailureOr<Value> BlockedLoop::initOfShape(Value init,
                                          ArrayRef<OpFoldResult> shape,
                                          IRMapping &map) {
  auto type = cast<RankedTensorType>(init.getType());
  SmallVector<int64_t> staticShape;
  SmallVector<Value> dynamic;
  dispatchIndexOpFoldResults(shape, dynamic, staticShape);
  if (loop_.isDefinedOutsideOfLoop(init) && type.getShape() == ArrayRef(staticShape))
    return init;
  auto empty = make<tensor::EmptyOp>(shape, type.getElementType());
  if (init.getDefiningOp<tensor::EmptyOp>())
    return empty.getResult();
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return make<linalg::FillOp>(map.lookupOrDefault(fill.getInputs()[0]),
                                empty.getResult())
        .getResult(0);
  return refuse("an output of the block's ops is neither empty nor filled");
}

/// `g` cloned over its mapped inputs, its outputs shaped from them.
FailureOr<Value> BlockedLoop::cloneGeneric(linalg::GenericOp g, IRMapping &map,
                                           Value initOverride) {
  if (g.getNumDpsInits() != 1)
    return refuse("a generic of the block has several outputs");
  SmallVector<Value> inputs;
  for (Value in : g.getDpsInputs())
    inputs.push_back(map.lookupOrDefault(in));
  SmallVector<OpFoldResult> loops(g.getNumLoops());
  SmallVector<std::optional<bool>> grown(g.getNumLoops());
  auto maps = g.getIndexingMapsArray();
  for (auto [in, old, m] : llvm::zip(inputs, g.getDpsInputs(), maps)) {
    auto type = cast<RankedTensorType>(in.getType());
    for (auto [k, e] : llvm::enumerate(m.getResults())) {
      auto d = dyn_cast<AffineDimExpr>(e);
      if (!d)
        continue;
      // The only extent the raise makes dynamic is the whole read's length
      // (a tensor.dim of the scores would count as one more use of them).
      auto oldType = cast<RankedTensorType>(old.getType());
      if (oldType.isDynamicDim(k))
        return refuse("the block's ops have dynamic extents");
      // A loop over a block's positions runs over the whole read in every
      // operand, or the block's ops read something not blocked with it.
      bool isGrown = type.getDimSize(k) != oldType.getDimSize(k);
      std::optional<bool> &seen = grown[d.getPosition()];
      if (seen && *seen != isGrown)
        return refuse("the block's ops combine a block with a tensor that is "
                      "not read in blocks");
      seen = isGrown;
      loops[d.getPosition()] = extent(type, k);
    }
  }
  Value init = g.getDpsInits()[0];
  AffineMap out = maps.back();
  auto initType = cast<RankedTensorType>(init.getType());
  SmallVector<OpFoldResult> shape;
  for (auto [k, e] : llvm::enumerate(out.getResults())) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d) {
      shape.push_back(b_.getIndexAttr(initType.getDimSize(k)));
      continue;
    }
    OpFoldResult size = loops[d.getPosition()];
    if (!size) {
      if (initType.isDynamicDim(k))
        return refuse("the block's ops have dynamic extents");
      size = b_.getIndexAttr(initType.getDimSize(k));
    }
    shape.push_back(size);
  }
  FailureOr<Value> newInit = initOverride ? FailureOr<Value>(initOverride)
                                          : initOfShape(init, shape, map);
  if (failed(newInit))
    return failure();
  OperationState state(g.getLoc(), g->getName());
  state.addOperands(inputs);
  state.addOperands(*newInit);
  state.addTypes(newInit->getType());
  state.addAttributes(g->getAttrs());
  state.addRegion();
  Operation *clone = b_.create(state);
  created_.push_back(clone);
  g.getRegion().cloneInto(&clone->getRegion(0), map);
  return clone->getResult(0);
}

/// Clones the slice (block reads, their offsets, the block's ops) before
/// the loop, over the whole read, with the block index 0.
LogicalResult BlockedLoop::cloneOver(ArrayRef<Operation *> slice,
                                     IRMapping &map) {
  for (Operation *op : slice) {
    if (auto read = dyn_cast<tensor::ExtractSliceOp>(op)) {
      SmallVector<OpFoldResult> offsets = read.getMixedOffsets(),
                                sizes = read.getMixedSizes();
      for (auto [d, off] : llvm::enumerate(offsets))
        if (auto v = dyn_cast<Value>(off); v && !loop_.isDefinedOutsideOfLoop(v)) {
          offsets[d] = b_.getIndexAttr(0);
          sizes[d] = getAsOpFoldResult(total_);
        }
      auto whole = make<tensor::ExtractSliceOp>(read.getSource(), offsets,
                                                sizes, read.getMixedStrides());
      map.map(read.getResult(), whole.getResult());
      continue;
    }
    // Outputs are rebuilt with their generic's shape.
    if (isa<tensor::EmptyOp, linalg::FillOp>(op))
      continue;
    if (auto g = dyn_cast<linalg::GenericOp>(op)) {
      for (Value in : g.getDpsInputs())
        if (Operation *def = in.getDefiningOp();
            def && isa<tensor::EmptyOp, linalg::FillOp>(def) &&
            !map.contains(in) && !loop_.isDefinedOutsideOfLoop(in)) {
          Operation *c = b_.clone(*def, map);
          created_.push_back(c);
        }
      FailureOr<Value> r = cloneGeneric(g, map);
      if (failed(r))
        return failure();
      map.map(g.getResult(0), *r);
      continue;
    }
    created_.push_back(b_.clone(*op, map));
  }
  return success();
}

/// Block b's scaled scores at t are the whole read's at b * B + t: proven
/// by evaluating both from made-up scores and tensor arguments, for a few
/// blocks and positions (every integer argument set to the position).
LogicalResult BlockedLoop::checkShift(Value blockScores, Value wholeScores,
                                      Value wholeScaled) {
  auto blockType = cast<RankedTensorType>(blockScores.getType());
  auto wholeType = cast<RankedTensorType>(wholeScores.getType());
  int token = -1;
  for (int64_t d = 0; d < blockType.getRank(); ++d)
    if (blockType.getDimSize(d) != wholeType.getDimSize(d)) {
      if (token >= 0)
        return refuse("the block's scores are not one per position of the "
                      "block");
      token = d;
    }
  if (token >= 0 && blockType.getDimSize(token) != block_)
    return refuse("the block's scores are not one per position of the block");
  auto func = loop_->getParentOfType<func::FuncOp>();
  for (int64_t posValue : {int64_t(0), block_ - 1, block_ + 1, 3 * block_})
    for (int64_t blockIndex : {0, 1, 2}) {
      if (token < 0 && blockIndex)
        break;
      for (int variant = 0; variant < 2; ++variant) {
        SmallVector<int64_t> at, whole;
        for (int64_t d = 0; d < blockType.getRank(); ++d) {
          int64_t n = blockType.getDimSize(d);
          int64_t i = ShapedType::isDynamic(n) ? variant : (n - 1) * variant;
          at.push_back(i);
          whole.push_back(d == token ? blockIndex * block_ + i : i);
        }
        // Integer arguments get the position; tensor arguments (a mask
        // passed in, read per block) made-up elements, the same for both.
        auto bindArguments = [&](ElementEvaluator &e) {
          for (BlockArgument a : func.getArguments()) {
            if (a.getType().isIntOrIndex())
              e.bind(a, [posValue](ArrayRef<int64_t>) {
                return double(posValue);
              });
            else if (isa<RankedTensorType>(a.getType()))
              e.bind(a, [n = a.getArgNumber()](ArrayRef<int64_t> idx) {
                return std::optional<double>(sampleValue(idx) + 0.01 * n);
              });
          }
        };
        ElementEvaluator eb(
            blockScores,
            [&](ArrayRef<int64_t> idx) {
              SmallVector<int64_t> shifted(idx);
              if (token >= 0)
                shifted[token] += blockIndex * block_;
              return std::optional<double>(sampleValue(shifted));
            },
            Value(), 0,
            "it reads a function argument that is not an integer");
        bindArguments(eb);
        eb.bind(loop_.getInductionVar(), [blockIndex](ArrayRef<int64_t>) {
          return double(blockIndex);
        });
        std::optional<double> got = eb.element(scaled_, at);
        if (!got)
          return refuse("the block's scaled scores cannot be evaluated (" +
                        eb.why() + ")");
        ElementEvaluator ew(wholeScores, sampleValue, Value(), 0,
                            "it reads a function argument that is not an "
                            "integer");
        bindArguments(ew);
        std::optional<double> want = ew.element(wholeScaled, whole);
        if (!want || !sameSample(*got, *want))
          return refuse("the block's scores are not scaled and masked as the "
                        "same positions of the whole read");
      }
    }
  return success();
}

LogicalResult BlockedLoop::raise() {
  if (!matchPattern(loop_.getLowerBound(), m_Zero()) ||
      !matchPattern(loop_.getStep(), m_One()))
    return refuse("the block loop does not count from 0 in steps of 1");
  if (loop_.getNumRegionIterArgs() != 3 ||
      !llvm::all_of(loop_.getResultTypes(), [](Type t) {
        auto r = dyn_cast<RankedTensorType>(t);
        return r && isa<FloatType>(r.getElementType());
      }))
    return refuse("the loop does not carry a running max, a running sum and "
                  "a weighted sum (three float tensors)");
  if (failed(recurrence()))
    return failure();
  llvm::SetVector<Operation *> slice;
  if (failed(collect(scaled_, slice, {})) || failed(collect(values_, slice, {})))
    return failure();
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  if (failed(blockReads(ordered)))
    return failure();
  // The block index may only place the reads and the mask: every other use
  // lies between the scores contraction and the softmax.
  Value scores = scaled_;
  for (int step = 0; step < 12; ++step) {
    auto g = scores.getDefiningOp<linalg::GenericOp>();
    if (!g || g->getBlock() != loop_.getBody())
      return refuse("the block's softmax input is not computed from a "
                    "q.k contraction inside the loop");
    if (isMulAddContraction(g))
      break;
    // The scores' path: the one computed block value; a block read beside
    // it (a mask passed in) is evaluated with the scores below.
    Value onPath, read;
    for (Value in : g.getDpsInputs()) {
      if (loop_.isDefinedOutsideOfLoop(in) || in.getDefiningOp<linalg::FillOp>())
        continue;
      if (in.getDefiningOp<tensor::ExtractSliceOp>()) {
        read = in;
        continue;
      }
      if (onPath)
        return refuse("the block's scores combine two block values");
      onPath = in;
    }
    if (!onPath)
      onPath = read;
    if (!onPath)
      return refuse("the block's softmax input is not computed from a "
                    "q.k contraction inside the loop");
    scores = onPath;
  }
  if (!isa_and_nonnull<linalg::GenericOp>(scores.getDefiningOp()) ||
      !isMulAddContraction(scores.getDefiningOp<linalg::GenericOp>()))
    return refuse("the block's softmax input is not computed from a q.k "
                  "contraction inside the loop");
  llvm::SetVector<Operation *> beforeScores;
  if (failed(collect(scores, beforeScores, {})) ||
      failed(collect(values_, beforeScores, {})))
    return failure();
  // Scalars computed from the block index (its offset, for a mask).
  Value iv = loop_.getInductionVar();
  llvm::SmallPtrSet<Value, 8> fromIv = {iv};
  for (Operation &op : *loop_.getBody())
    if (op.getNumRegions() == 0 &&
        llvm::none_of(op.getResultTypes(),
                      [](Type t) { return isa<ShapedType>(t); }) &&
        llvm::any_of(op.getOperands(),
                     [&](Value v) { return fromIv.contains(v); }))
      fromIv.insert(op.result_begin(), op.result_end());
  for (Operation *op : beforeScores) {
    if (isa<tensor::ExtractSliceOp>(op) || fromIv.contains(op->getResult(0)))
      continue;
    llvm::SetVector<Value> used;
    getUsedValuesDefinedAbove(op->getRegions(), used);
    used.insert(op->operand_begin(), op->operand_end());
    if (llvm::any_of(used, [&](Value u) { return fromIv.contains(u); }))
      return refuse("the block index is used before the scores");
  }
  b_.setInsertionPoint(loop_);
  if (std::optional<int64_t> n = getConstantIntValue(loop_.getUpperBound()))
    total_ = make<arith::ConstantIndexOp>(*n * block_).getResult();
  else
    total_ = make<arith::MulIOp>(
                 loop_.getUpperBound(),
                 make<arith::ConstantIndexOp>(block_).getResult())
                 .getResult();
  IRMapping map;
  map.map(iv, make<arith::ConstantIndexOp>(0).getResult());
  if (failed(cloneOver(ordered, map)))
    return failure();
  if (failed(checkShift(scores, map.lookup(scores), map.lookup(scaled_))))
    return failure();
  // The softmax over the whole read, then its weighted sum of the values.
  auto inits = loop_.getInitArgs();
  FailureOr<Value> max = cloneGeneric(max_, map, inits[iM_]);
  if (failed(max))
    return failure();
  map.map(newMax_, *max);
  llvm::SetVector<Operation *> weightOps;
  if (failed(collect(weights_, weightOps, {scaled_, newMax_})))
    return failure();
  SmallVector<Operation *> weightOrder(weightOps.begin(), weightOps.end());
  llvm::sort(weightOrder, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  if (failed(cloneOver(weightOrder, map)))
    return failure();
  FailureOr<Value> sum = cloneGeneric(sum_, map, inits[iL_]);
  if (failed(sum))
    return failure();
  Value exps = map.lookup(weights_);
  auto expType = cast<RankedTensorType>(exps.getType());
  auto sumMaps = sum_.getIndexingMapsArray();
  SmallVector<OpFoldResult> expShape;
  for (int64_t d = 0; d < expType.getRank(); ++d)
    expShape.push_back(extent(expType, d));
  auto empty = make<tensor::EmptyOp>(expShape, expType.getElementType());
  SmallVector<utils::IteratorType> parallel(sum_.getNumLoops(),
                                            utils::IteratorType::parallel);
  auto normalized = make<linalg::GenericOp>(
      TypeRange{expType}, ValueRange{exps, *sum}, ValueRange{empty},
      ArrayRef<AffineMap>{sumMaps[0], sumMaps[1], sumMaps[0]}, parallel,
      [](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(
            nb, nl, arith::DivFOp::create(nb, nl, args[0], args[1]).getResult());
      });
  map.map(weights_, normalized.getResult(0));
  FailureOr<Value> out = cloneGeneric(weighted_, map, inits[iA_]);
  if (failed(out))
    return failure();
  divide_.getResult(0).replaceAllUsesWith(*out);
  divide_->erase();
  loop_->erase();
  return success();
}

} // namespace

void mlir::kvq::raiseBlockedSoftmax(func::FuncOp f) {
  SmallVector<scf::ForOp> loops;
  f.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops) {
    BlockedLoop blocked(loop);
    if (!blocked.readsInBlocks())
      continue;
    if (failed(blocked.raise()))
      loop->setAttr(kBlockedWhyAttr,
                    StringAttr::get(loop.getContext(), blocked.why()));
  }
}
