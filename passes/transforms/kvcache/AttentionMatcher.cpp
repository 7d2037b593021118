//===- AttentionMatcher.cpp - a function's KV caches and attentions -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/transforms/kvcache/AttentionMatcher.h"
#include "passes/transforms/kvcache/BlockedSoftmax.h"
#include "passes/transforms/kvcache/Canonicalize.h"
#include "passes/transforms/kvcache/ElementEvaluator.h"
#include "passes/transforms/kvcache/GenericForms.h"


#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
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

//===----------------------------------------------------------------------===//
// Small evaluators
//===----------------------------------------------------------------------===//

/// Evaluates an index/integer value built from constants, `pos` and
/// add/sub/mul/div/max/min/casts, with `pos` = posValue (divisions only of
/// non-negative values by positive ones, where all spellings agree).
std::optional<int64_t> evalInt(Value v, Value pos, int64_t posValue,
                               int depth = 0) {
  if (depth > 16)
    return std::nullopt;
  if (v == pos)
    return posValue;
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant)))
    return constant.getSExtValue();
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto bin = [&](auto f) -> std::optional<int64_t> {
    auto a = evalInt(op->getOperand(0), pos, posValue, depth + 1);
    auto b = evalInt(op->getOperand(1), pos, posValue, depth + 1);
    if (!a || !b)
      return std::nullopt;
    return f(*a, *b);
  };
  if (isa<arith::AddIOp>(op))
    return bin([](int64_t a, int64_t b) { return a + b; });
  if (isa<arith::SubIOp>(op))
    return bin([](int64_t a, int64_t b) { return a - b; });
  if (isa<arith::MulIOp>(op))
    return bin([](int64_t a, int64_t b) { return a * b; });
  // StableHLO's dynamic_update_slice clamps its start index.
  if (isa<arith::MaxSIOp, arith::MaxUIOp>(op))
    return bin([](int64_t a, int64_t b) { return std::max(a, b); });
  if (isa<arith::MinSIOp, arith::MinUIOp>(op))
    return bin([](int64_t a, int64_t b) { return std::min(a, b); });
  // Blocked attention reads whole blocks: ceil((pos + 1) / B) * B.
  auto div = [&](auto f) -> std::optional<int64_t> {
    auto a = evalInt(op->getOperand(0), pos, posValue, depth + 1);
    auto b = evalInt(op->getOperand(1), pos, posValue, depth + 1);
    if (!a || !b || *b <= 0 || *a < 0)
      return std::nullopt;
    return f(*a, *b);
  };
  if (isa<arith::CeilDivUIOp, arith::CeilDivSIOp>(op))
    return div([](int64_t a, int64_t b) { return (a + b - 1) / b; });
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::FloorDivSIOp>(op))
    return div([](int64_t a, int64_t b) { return a / b; });
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp>(op))
    return evalInt(op->getOperand(0), pos, posValue, depth + 1);
  return std::nullopt;
}


//===----------------------------------------------------------------------===//
// Structural helpers
//===----------------------------------------------------------------------===//

bool isIdentityElementwise(linalg::GenericOp g) {
  return llvm::all_of(g.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isIdentity(); }) &&
         g.getNumReductionLoops() == 0;
}

/// A generic whose body converts its one input with OpT (extf of a cache
/// read).
template <typename OpT> bool isConversion(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || !isIdentityElementwise(g))
    return false;
  Block &b = g.getRegion().front();
  return b.getOperations().size() == 2 && isa<OpT>(b.front()) &&
         b.front().getOperand(0) == b.getArgument(0);
}

/// The element type of the !kvq.cache holding a cache tensor: its own, or
/// f32 for bf16 (widening is exact, and the runtime quantizes f32 and f16
/// input alike).
Type cacheElementType(RankedTensorType cache) {
  Type el = cache.getElementType();
  return el.isBF16() ? Float32Type::get(el.getContext()) : el;
}

/// The output map of a reduction over the last of `rank` dims: the others
/// in order, and with torch's keepdim a constant 0 in the reduced place.
bool isReducedMap(AffineMap m, unsigned rank, MLIRContext *ctx) {
  AffineMap reduced =
      AffineMap::getMultiDimIdentityMap(rank, ctx).dropResult(rank - 1);
  return m == reduced ||
         m == reduced.insertResult(getAffineConstantExpr(0, ctx), rank - 1);
}

/// Reduces the last of `rank` dims: input identity, outputs all but the
/// last.
bool isLastDimReduction(linalg::GenericOp g, unsigned rank) {
  auto maps = g.getIndexingMapsArray();
  auto iters = g.getIteratorTypesArray();
  if (maps.size() < 2 || !maps[0].isIdentity() || iters.size() != rank ||
      iters[rank - 1] != utils::IteratorType::reduction)
    return false;
  return llvm::all_of(ArrayRef(maps).drop_front(), [&](AffineMap m) {
    return isReducedMap(m, rank, g.getContext());
  });
}


/// tighter than [0, last] is not a clamp to the cache and is kept.
Value stripClamp(Value v, int64_t last) {
  for (int i = 0; i < 4; ++i) {
    Operation *op = v.getDefiningOp();
    if (!op || !isa<arith::MaxSIOp, arith::MinSIOp>(op))
      return v;
    APInt c;
    int other = -1;
    if (matchPattern(op->getOperand(1), m_ConstantInt(&c)))
      other = 0;
    else if (matchPattern(op->getOperand(0), m_ConstantInt(&c)))
      other = 1;
    if (other < 0)
      return v;
    int64_t bound = c.getSExtValue();
    if (isa<arith::MaxSIOp>(op) ? bound > 0 : bound < last)
      return v;
    v = op->getOperand(other);
  }
  return v;
}

/// Whether `v` flows into `ret` through the ops that grow or rewrite a
/// tensor (concat, slice writes, casts).
bool reachesReturn(Value v, Operation *ret, int depth = 0) {
  if (depth > 64)
    return false;
  for (Operation *u : v.getUsers()) {
    if (u == ret)
      return true;
    if (isa<tensor::ConcatOp, tensor::InsertSliceOp, tensor::CastOp>(u) &&
        reachesReturn(u->getResult(0), ret, depth + 1))
      return true;
  }
  return false;
}

/// The single user of `v`, or null.
Operation *singleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

/// Whether `v` is computed from a q·k contraction through reshapes and
/// elementwise generics.
bool leadsToScores(Value v, int depth = 0) {
  if (depth > 12)
    return false;
  Operation *def = v.getDefiningOp();
  if (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
    return leadsToScores(def->getOperand(0), depth + 1);
  auto g = dyn_cast_or_null<linalg::GenericOp>(def);
  if (!g)
    return false;
  if (isMulAddContraction(g))
    return true;
  if (g.getNumReductionLoops() != 0)
    return false;
  return llvm::any_of(g.getDpsInputs(),
                      [&](Value in) { return leadsToScores(in, depth + 1); });
}

/// The one input of an elementwise generic that carries the scores (the
/// others are a mask or nothing), or none.
std::optional<unsigned> scoresOperand(linalg::GenericOp g) {
  std::optional<unsigned> found;
  for (auto [i, in] : llvm::enumerate(g.getDpsInputs()))
    if (leadsToScores(in)) {
      if (found)
        return std::nullopt;
      found = i;
    }
  return found;
}

/// Function arguments that the values `roots` are computed from (captured
/// in generic bodies too).
SmallVector<BlockArgument> argumentsBehind(ArrayRef<Value> roots) {
  SmallVector<BlockArgument> args;
  SmallVector<Value> work(roots.begin(), roots.end());
  llvm::SmallPtrSet<void *, 32> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v.getAsOpaquePointer()).second || seen.size() > 512)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (isa<func::FuncOp>(arg.getOwner()->getParentOp()))
        args.push_back(arg);
      continue;
    }
    Operation *def = v.getDefiningOp();
    for (Value o : def->getOperands())
      work.push_back(o);
    def->walk([&](Operation *inner) {
      for (Value o : inner->getOperands())
        if (!def->isAncestor(o.getParentBlock()->getParentOp()))
          work.push_back(o);
    });
  }
  return args;
}

/// The dims of `map`'s results, which must all be distinct loop dims.
std::optional<SmallVector<unsigned>> dimsOf(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d || llvm::is_contained(dims, d.getPosition()))
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  return dims;
}

/// Puts a full tensor.extract_slice between the written cache value `v`
/// and each use that reads it whole (not a write, a read slice or the
/// return).
void wrapWholeReads(Value v, Operation *ret) {
  SmallVector<OpOperand *> whole;
  for (OpOperand &use : v.getUses()) {
    Operation *u = use.getOwner();
    auto ins = dyn_cast<tensor::InsertSliceOp>(u);
    bool readsWhole =
        isa<linalg::LinalgOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
            u) ||
        (ins && use.getOperandNumber() !=
                    ins.getDestMutable().getOperandNumber());
    if (!readsWhole)
      continue;
    whole.push_back(&use);
  }
  auto type = cast<RankedTensorType>(v.getType());
  if (whole.empty() || !type.hasStaticShape())
    return;
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  SmallVector<OpFoldResult> zeros(type.getRank(), b.getIndexAttr(0)),
      ones(type.getRank(), b.getIndexAttr(1)), sizes;
  for (int64_t n : type.getShape())
    sizes.push_back(b.getIndexAttr(n));
  Value all = tensor::ExtractSliceOp::create(b, v.getLoc(), v, zeros, sizes,
                                             ones);
  for (OpOperand *use : whole)
    use->set(all);
}

/// Whether `pos` is a remainder (possibly index-cast): a ring buffer's
/// write slot.
bool wrapsAround(Value pos) {
  if (auto c = pos.getDefiningOp<arith::IndexCastOp>())
    pos = c.getIn();
  if (isa_and_present<arith::RemUIOp, arith::RemSIOp>(pos.getDefiningOp()))
    return true;
  auto apply = pos.getDefiningOp<affine::AffineApplyOp>();
  if (!apply)
    return false;
  bool mod = false;
  apply.getAffineMap().getResult(0).walk([&](AffineExpr e) {
    mod |= e.getKind() == AffineExprKind::Mod;
  });
  return mod;
}

} // namespace

std::optional<Refusal> mlir::kvq::globalStateRefusal(func::FuncOp f) {
  std::optional<Refusal> found;
  f.walk([&](Operation *op) {
    StringRef kind, name;
    Value stored;
    if (auto st = dyn_cast<ml_program::GlobalStoreOp>(op)) {
      kind = "ml_program.global";
      name = st.getGlobal().getLeafReference();
      stored = st.getValue();
    } else if (auto wr = dyn_cast<tosa::VariableWriteOp>(op)) {
      kind = "tosa.variable";
      name = wr.getName();
      stored = wr.getInput1();
    } else {
      return WalkResult::advance();
    }
    auto type = dyn_cast<RankedTensorType>(stored.getType());
    if (!type || type.getRank() < 3 ||
        !isa<FloatType>(type.getElementType()))
      return WalkResult::advance();
    found = Refusal{op->getLoc(),
                    ("not adopted: the cache-like state is module state the "
                     "function writes (" +
                     kind + " @" + name +
                     "); kvq adopts caches passed in as tensor arguments "
                     "and returned")
                        .str()};
    return WalkResult::interrupt();
  });
  return found;
}

std::optional<int64_t> Write::readLengthAt(int64_t posValue) const {
  if (auto v = dyn_cast_if_present<Value>(readLength))
    return evalInt(v, pos, posValue);
  return getConstantIntValue(readLength);
}

LogicalResult FunctionMatcher::findChains() {
  if (!func.getBody().hasOneBlock())
    return success();
  Block &entry = func.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return success();
  for (BlockArgument arg : entry.getArguments()) {
    // Memref state never gets here: the pass matches such a function in
    // its tensor form (MemrefState.h) or refuses it first.
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    // A cache-like argument the pass cannot adopt gets a remark saying why,
    // never silence: grown, scattered into or gathered from.
    for (OpOperand &use : arg.getUses()) {
      Operation *u = use.getOwner();
      if (isa<tensor::ConcatOp>(u) && reachesReturn(u->getResult(0), ret))
        return refuse(u->getLoc(),
                      "not adopted: the cache grows by tensor.concat and has "
                      "no capacity; set the pass option max-context=N to "
                      "adopt it as a cache of N positions");
      if (isa<tensor::ScatterOp>(u))
        return refuse(u->getLoc(),
                      "not adopted: the cache is written through "
                      "'tensor.scatter' at runtime indices; kvq follows "
                      "tensor.insert_slice writes at the step's position");
      if (auto g = dyn_cast<linalg::GenericOp>(u);
          g && g.isDpsInit(&use) && g.payloadUsesValueFromOperand(&use) &&
          !g.getRegion().front().getOps<tensor::ExtractOp>().empty())
        return refuse(u->getLoc(),
                      "not adopted: the cache is written by a linalg.generic "
                      "that extracts its indices at runtime (a scatter); kvq "
                      "follows tensor.insert_slice writes at the step's "
                      "position");
      if (auto why = u->getAttrOfType<StringAttr>(kScatterLoopAttr))
        return refuse(u->getLoc(),
                      "not adopted: the cache is written by a scatter (rows "
                      "written at indices read from a tensor) that " +
                          why.getValue() +
                          "; kvq follows writes of every head at the step's "
                          "position");
      // A loop that carries the argument and writes it (the matcher's copy
      // has the loops with a constant trip count unrolled).
      if (auto loop = dyn_cast<LoopLikeOpInterface>(u);
          loop &&
          llvm::any_of(u->getResults(),
                       [&](Value r) { return reachesReturn(r, ret); }) &&
          llvm::any_of(u->getRegions(), [](Region &r) {
            return !r.getOps<tensor::InsertSliceOp>().empty();
          }))
        return refuse(u->getLoc(),
                      "not adopted: the cache is carried by a loop whose "
                      "trip count is not a constant of at most 256; kvq "
                      "unrolls loops over layers of a known count");
      // Gathered state (a page table), not a gathered weight (embeddings).
      if (isa<tensor::GatherOp>(u) && reachesReturn(arg, ret))
        return refuse(u->getLoc(),
                      "not adopted: the cache is read through 'tensor.gather' "
                      "at runtime indices (a page table); kvq does not adopt "
                      "paged caches");
    }
    bool written = llvm::any_of(arg.getUsers(), [&](Operation *u) {
      auto ins = dyn_cast<tensor::InsertSliceOp>(u);
      return ins && ins.getDest() == arg;
    });
    if (!written) {
      // Written only through a reshape of it that stripCacheReshapes could
      // not take back (not returned as a reshape of the written value).
      Value inner = arg;
      Operation *first = nullptr;
      while (inner.hasOneUse() && isRelabel(*inner.getUsers().begin())) {
        Operation *r = *inner.getUsers().begin();
        first = first ? first : r;
        inner = r->getResult(0);
      }
      if (first && llvm::any_of(inner.getUses(), [](OpOperand &use) {
            auto w = dyn_cast<tensor::InsertSliceOp>(use.getOwner());
            return w && use.get() == w.getDest();
          }))
        return refuse(first->getLoc(),
                      "not adopted: the cache is reshaped before it is "
                      "written and not returned as that written value "
                      "reshaped back; kvq follows a cache returned in the "
                      "shape it was passed in");
      continue;
    }
    Type el = type.getElementType();
    if (!(el.isF16() || el.isF32() || el.isBF16())) {
      std::string name;
      llvm::raw_string_ostream os(name);
      os << el;
      return refuse(arg.getLoc(), "not adopted: the cache tensor's element "
                                  "type is " +
                                      name +
                                      "; kvq adopts f32, f16 and bf16 caches");
    }
    auto chain = std::make_unique<CacheChain>();
    chain->arg = arg;
    Value v = arg;
    while (true) {
      // A written per-layer cache used whole (a static cache's full-capacity
      // read) reads through a full extract_slice like any other read; this
      // runs on the matcher's copy of the function.
      if (v != arg && !chain->stacked)
        wrapWholeReads(v, ret);
      tensor::InsertSliceOp next;
      bool returned = false;
      for (OpOperand &use : v.getUses()) {
        Operation *u = use.getOwner();
        if (auto ins = dyn_cast<tensor::InsertSliceOp>(u);
            ins &&
            use.getOperandNumber() == ins.getDestMutable().getOperandNumber()) {
          if (next)
            return refuse(ins.getLoc(), "not adopted: the cache tensor is "
                                        "written twice from one value");
          next = ins;
        } else if (u->getParentOfType<LoopLikeOpInterface>() &&
                   isa<tensor::ExtractSliceOp, tensor::ExtractOp>(u)) {
          // Loops over layers are unrolled on the copy, and blocked
          // softmax loops raised (BlockedSoftmax.h): a read left in a loop
          // reads part of the cache per iteration.
          if (isa<tensor::ExtractOp>(u))
            return refuse(u->getLoc(),
                          "not adopted: the cache is read element by element "
                          "inside a loop (attention written as explicit "
                          "loops); kvq follows attention written as tensor "
                          "and linalg ops, or blocked over whole blocks");
          StringAttr why;
          for (Operation *l = u->getParentOp(); l && !why;
               l = l->getParentOp())
            why = l->getAttrOfType<StringAttr>(kBlockedWhyAttr);
          return refuse(u->getLoc(),
                        why ? "not adopted: the cache is read in blocks "
                              "inside a loop that kvq cannot read as one "
                              "online softmax: " +
                                  why.getValue()
                            : Twine("not adopted: the cache is read in "
                                    "blocks inside a loop whose body does "
                                    "not read them directly (kvq raises a "
                                    "flash-decoding loop over its own block "
                                    "reads)"));
        } else if (auto ext = dyn_cast<tensor::ExtractSliceOp>(u)) {
          chain->reads.push_back(ext);
          chainOfRead[ext] = chain.get();
        } else if (u == ret) {
          returned = true;
          chain->resultIndex = use.getOperandNumber();
        } else {
          return refuse(u->getLoc(),
                        "not adopted: the cache tensor is used by '" +
                            u->getName().getStringRef() +
                            "', which kvq cannot follow");
        }
      }
      if (next && returned)
        return refuse(ret.getLoc(), "not adopted: a cache value is both "
                                    "returned and written again");
      if (next) {
        chain->writes.push_back(next);
        if (failed(describeWrite(*chain, next)))
          return failure();
        v = next.getResult();
        continue;
      }
      if (!returned)
        return refuse(chain->writes.back().getLoc(),
                      "not adopted: the written cache is not returned, so it "
                      "is not the model's state");
      break;
    }
    chains.push_back(std::move(chain));
  }
  return success();
}

LogicalResult FunctionMatcher::describeWrite(CacheChain &chain,
                                             tensor::InsertSliceOp w) {
  auto dest = cast<RankedTensorType>(w.getDest().getType());
  if (!llvm::all_of(w.getMixedStrides(),
                    [](OpFoldResult s) { return isConstantIntValue(s, 1); }))
    return refuse(w.getLoc(), "not adopted: the cache write is strided");
  SmallVector<OpFoldResult> off = w.getMixedOffsets(),
                            sizes = w.getMixedSizes();
  unsigned rank = dest.getRank();
  // The layout, from what the write does to each dimension: the step's
  // position is the one dynamic offset, a constant single index into a
  // longer dimension picks a layer, and the fully written dimensions are
  // (batch of one,) KV heads and channels, in that order.
  SmallVector<Role> roles(rank, Role::Unit);
  SmallVector<int64_t> token, slot, full, partial;
  for (unsigned i = 0; i < rank; ++i) {
    std::optional<int64_t> o = getConstantIntValue(off[i]);
    std::optional<int64_t> n = getConstantIntValue(sizes[i]);
    if (!o)
      token.push_back(i);
    else if (*o == 0 && n == dest.getDimSize(i))
      full.push_back(i);
    else if (n == 1)
      slot.push_back(i);
    else
      partial.push_back(i);
  }
  if (token.empty())
    return refuse(w.getLoc(), "not adopted: the cache is written at a "
                              "constant position, not at the step's position");
  if (!partial.empty()) {
    unsigned i = partial.front();
    std::optional<int64_t> n = getConstantIntValue(sizes[i]);
    return refuse(w.getLoc(),
                  "not adopted: the cache write covers " +
                      (n ? Twine(*n) : Twine("a dynamic number")) + " of the " +
                      Twine(dest.getDimSize(i)) + " entries of dimension " +
                      Twine(i) +
                      "; kvq adopts writes of whole KV heads and channels");
  }
  if (token.size() > 1)
    return refuse(w.getLoc(), "not adopted: the cache write has dynamic "
                              "offsets in dimensions " +
                                  Twine(token[0]) + " and " + Twine(token[1]) +
                                  "; kvq adopts caches written at one "
                                  "position dimension");
  roles[token[0]] = Role::Token;
  SmallVector<int64_t> wide;
  for (int64_t i : full)
    if (dest.getDimSize(i) != 1)
      wide.push_back(i);
  if (wide.size() > 2)
    return refuse(w.getLoc(),
                  "not adopted: the write covers all " +
                      Twine(dest.getDimSize(wide[0])) +
                      " entries of dimension " + Twine(wide[0]) +
                      " besides KV heads and channels: the graph holds a "
                      "batch of " +
                      Twine(dest.getDimSize(wide[0])) +
                      " sequences; a kvq cache holds one sequence");
  if (wide.empty())
    return refuse(w.getLoc(), "not adopted: the cache write covers no "
                              "channel dimension");
  roles[wide.back()] = Role::Channel;
  if (wide.size() == 2)
    roles[wide.front()] = Role::Head;
  for (int64_t i : slot)
    if (dest.getDimSize(i) != 1)
      roles[i] = Role::Slot;
  if (llvm::count(roles, Role::Slot) > 1)
    return refuse(w.getLoc(),
                  "not adopted: the cache write picks one entry of "
                  "dimensions " +
                      Twine(slot[0]) + " and " + Twine(slot[1]) +
                      " (keys and values stacked in one tensor with the "
                      "layers?); kvq adopts K and V as two tensors, or as "
                      "the two entries of one dimension of size 2 when "
                      "both are written and read");
  if (dest.isDynamicDim(token[0]))
    return refuse(w.getLoc(), "not adopted: the cache's capacity (dimension " +
                                  Twine(token[0]) + ") is dynamic");
  if (chain.roles.empty()) {
    chain.roles = roles;
    chain.stacked = llvm::is_contained(roles, Role::Slot);
  } else if (chain.roles != roles) {
    return refuse(w.getLoc(), "not adopted: this write treats the cache's "
                              "dimensions differently from its first write");
  }
  Write d;
  d.chain = &chain;
  unsigned t = token[0];
  if (chain.stacked) {
    int s = llvm::find(roles, Role::Slot) - roles.begin();
    d.layer = *getConstantIntValue(off[s]);
  }
  std::optional<int64_t> n = getConstantIntValue(sizes[t]);
  if (!n)
    return refuse(w.getLoc(), "not adopted: the number of tokens written is "
                              "not static");
  d.tokens = *n;
  d.pos = stripClamp(cast<Value>(off[t]), dest.getDimSize(t) - d.tokens);
  if (wrapsAround(d.pos))
    return refuse(w.getLoc(),
                  "not adopted: the cache is written at a position taken "
                  "modulo a capacity (a ring buffer, as a sliding window "
                  "keeps it), so old positions are overwritten; a kvq cache "
                  "keeps every position");
  // The written data's roles: the dimensions it keeps of the cache's.
  auto src = cast<RankedTensorType>(w.getSource().getType());
  SmallVector<int64_t> staticSizes;
  for (OpFoldResult sz : sizes)
    staticSizes.push_back(getConstantIntValue(sz).value_or(ShapedType::kDynamic));
  std::optional<llvm::SmallDenseSet<unsigned>> dropped =
      computeRankReductionMask(staticSizes, src.getShape());
  if (!dropped)
    return refuse(w.getLoc(), "not adopted: the written K/V's shape does not "
                              "match the write's sizes");
  for (unsigned i = 0; i < rank; ++i)
    if (!dropped->contains(i))
      d.dataRoles.dims.push_back(roles[i] == Role::Slot ? Role::Unit
                                                         : roles[i]);
  d.data = w.getSource();
  d.op = w;
  writeOf[w] = d;
  return success();
}

FailureOr<Write> FunctionMatcher::describeRead(tensor::ExtractSliceOp read,
                                               Roles &readRoles) {
  CacheChain &chain = *chainOfRead.lookup(read);
  SmallVector<OpFoldResult> off = read.getMixedOffsets(),
                            sizes = read.getMixedSizes();
  auto type = cast<RankedTensorType>(read.getSourceType());
  int64_t layer = 0;
  unsigned t = 0;
  for (auto [i, role] : llvm::enumerate(chain.roles)) {
    if (!isConstantIntValue(read.getMixedStrides()[i], 1))
      return refuse(read.getLoc(), "not adopted: the cache read is strided");
    if (role == Role::Slot) {
      std::optional<int64_t> l = getConstantIntValue(off[i]);
      if (!l || !isConstantIntValue(sizes[i], 1))
        return refuse(read.getLoc(), "not adopted: the layer of a stacked "
                                     "cache read is not a constant");
      layer = *l;
      continue;
    }
    if (role == Role::Token)
      t = i;
    if (!isConstantIntValue(off[i], 0))
      return refuse(read.getLoc(), "not adopted: the cache read does not "
                                   "start at position 0 of every head");
    if (role != Role::Token && !isConstantIntValue(sizes[i], type.getDimSize(i)))
      return refuse(read.getLoc(), "not adopted: the cache read does not "
                                   "cover every KV head and channel");
  }
  // The write this read sees last for its layer.
  const Write *last = nullptr;
  Value source = read.getSource();
  for (tensor::InsertSliceOp w : chain.writes) {
    const Write &d = writeOf[w];
    if (d.layer == layer)
      last = &d;
    if (w.getResult() == source)
      break;
  }
  if (!last || source == chain.arg)
    return refuse(read.getLoc(), "not adopted: attention reads a cache layer "
                                 "before the step writes it");
  // Length read: the written prefix pos + tokens for every pos, or more (a
  // static cache read whole; matchAround then proves a mask hides the rest).
  Write seen = *last;
  seen.readLength = sizes[t];
  seen.read = read;
  int64_t capacity = type.getDimSize(t);
  bool evaluated = false;
  // The last position a step can write at is sampled too: a read of a
  // constant length shorter than the cache misses it.
  SmallVector<int64_t> samples = {0, 1, 7, 130};
  if (!ShapedType::isDynamic(capacity) && capacity >= last->tokens)
    samples.push_back(capacity - last->tokens);
  for (int64_t p : samples) {
    std::optional<int64_t> got = seen.readLengthAt(p);
    if (!got)
      return refuse(read.getLoc(),
                    "not adopted: the cache read's length cannot be evaluated "
                    "from the step's position (kvq evaluates constants, pos, "
                    "add/sub/mul/div, max/min and casts)");
    // Positions past the capacity fail the step's position check.
    if (!ShapedType::isDynamic(capacity) && p + last->tokens > capacity)
      continue;
    evaluated = true;
    if (!ShapedType::isDynamic(capacity) && *got > capacity)
      return refuse(read.getLoc(),
                    "not adopted: attention reads " + Twine(*got) +
                        " positions at pos = " + Twine(p) +
                        ", past the cache's " + Twine(capacity));
    if (*got < p + last->tokens)
      return refuse(read.getLoc(),
                    "not adopted: attention reads " + Twine(*got) +
                        " positions at pos = " + Twine(p) + ", fewer than the "
                        "written prefix pos + " + Twine(last->tokens));
    seen.pastPrefix |= *got > p + last->tokens;
  }
  if (!evaluated)
    return refuse(read.getLoc(), "not adopted: the cache holds fewer "
                                 "positions than one step writes");
  llvm::SmallBitVector droppedDims = read.getDroppedDims();
  readRoles = Roles();
  for (auto [i, role] : llvm::enumerate(chain.roles))
    if (!droppedDims.test(i))
      readRoles.dims.push_back(role == Role::Slot ? Role::Unit : role);
  return seen;
}

/// Follows an attention operand back through the data movement frontends
/// put between a cache read and the contraction (conversions, transposes,
/// repeat_kv, reshapes, a constant scale) to a cache read. Failure without
/// a refusal: the operand is not a cache read.
FailureOr<std::pair<Write, Roles>>
FunctionMatcher::traceCacheOperand(Value operand, Operation *user) {
  std::optional<Write> found;
  tensor::ExtractSliceOp readOp;
  auto atRead = [&](Value end) -> FailureOr<Roles> {
    auto read = end.getDefiningOp<tensor::ExtractSliceOp>();
    if (!read || !chainOfRead.count(read))
      return failure();
    Roles roles;
    FailureOr<Write> w = describeRead(read, roles);
    if (failed(w))
      return failure();
    found = *w;
    readOp = read;
    return roles;
  };
  std::string why;
  Operation *where = nullptr;
  FailureOr<Trace> trace = traceRoles(operand, atRead, why, where);
  if (refusal)
    return failure();
  if (!found)
    return failure();
  if (failed(trace))
    return (void)refuse(where->getLoc(), "not adopted: " + Twine(why)),
           failure();
  // Every value between the read and the contraction feeds only this way.
  for (Value v = operand;;) {
    if (!v.hasOneUse())
      return (void)refuse(user->getLoc(), "not adopted: a cache read feeds "
                                          "more than the attention"),
             failure();
    Operation *def = v.getDefiningOp();
    if (def == readOp.getOperation())
      break;
    v = def->getOperand(0);
  }
  adoptedReads.insert(readOp);
  return std::make_pair(*found, trace->roles);
}

/// Proves that the softmax input `x` is c * scores where the causal mask
/// shows a position (t <= pos + n) and hidden where it does not, for sampled
/// positions, queries and heads, by evaluating `x` with every score set to
/// a constant. A mask passed in as a function argument is taken to be the
/// causal mask ([.., queries, positions], additive 0/-inf or boolean), and
/// said so. Returns c.
FailureOr<double> FunctionMatcher::checkScaleAndMask(
    Operation *softmax, Value x, Value scoresValue, const Roles &roles,
    const Write &kw, ArrayRef<std::pair<Operation *, unsigned>> between) {
  auto no = [&](Location loc, const Twine &why) -> FailureOr<double> {
    (void)refuse(loc, why);
    return failure();
  };
  // Where a wrong mask is pointed at: the first op that brings in another
  // operand or reads loop indices.
  Operation *maskOp = nullptr;
  SmallVector<Value> sideInputs;
  for (auto [op, operand] : llvm::reverse(between)) {
    auto g = dyn_cast<linalg::GenericOp>(op);
    if (!g)
      continue;
    bool side = g.getNumDpsInputs() > 1 ||
                !g.getRegion().front().getOps<linalg::IndexOp>().empty();
    for (auto [i, in] : llvm::enumerate(g.getDpsInputs()))
      if (i != operand)
        sideInputs.push_back(in);
    g.getRegion().walk([&](Operation *inner) {
      for (Value o : inner->getOperands())
        if (!g->isAncestor(o.getParentBlock()->getParentOp()) &&
            !o.getDefiningOp<arith::ConstantOp>()) {
          sideInputs.push_back(o);
          side = true;
        }
    });
    if (side && !maskOp)
      maskOp = op;
  }
  // The step's position as the graph holds it (an index cast from an
  // integer argument, or an element of a position tensor) evaluates to the
  // sampled position wherever the mask reads it.
  Value posArg = kw.pos;
  while (Operation *def = posArg.getDefiningOp()) {
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(def))
      posArg = def->getOperand(0);
    else if (auto e = dyn_cast<tensor::ExtractOp>(def))
      posArg = e.getTensor();
    else
      break;
  }
  SmallVector<BlockArgument> maskArgs;
  for (BlockArgument arg : argumentsBehind(sideInputs)) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (arg == posArg || !type || type.getRank() < 2 ||
        !(isa<FloatType>(type.getElementType()) ||
          type.getElementType().isInteger(1)) ||
        llvm::is_contained(maskArgs, arg))
      continue;
    maskArgs.push_back(arg);
  }
  auto evaluate = [&](double score, ArrayRef<int64_t> idx, int64_t posValue,
                      Location &where,
                      std::string &why) -> std::optional<double> {
    ElementEvaluator e(
        scoresValue, [score](ArrayRef<int64_t>) { return score; }, kw.pos,
        posValue,
        "it reads a function argument other than the step's position and a "
        "[.., queries, positions] mask");
    if (posArg != kw.pos)
      e.bind(posArg, [posValue](ArrayRef<int64_t>) { return double(posValue); });
    for (BlockArgument arg : maskArgs) {
      bool boolean =
          cast<RankedTensorType>(arg.getType()).getElementType().isInteger(1);
      e.bind(arg, [posValue, boolean](ArrayRef<int64_t> i) {
        bool shown = i.back() <= posValue + i[i.size() - 2];
        if (boolean)
          return shown ? 1.0 : 0.0;
        return shown ? 0.0 : -std::numeric_limits<double>::infinity();
      });
    }
    std::optional<double> r = e.element(x, idx);
    if (!r) {
      where = e.where();
      why = e.why();
    }
    return r;
  };
  auto xType = cast<RankedTensorType>(x.getType());
  int nDim = roles.find(Role::Query), tDim = roles.find(Role::Token);
  int64_t capacity = kw.chain->sizeOf(Role::Token);
  const double s1 = 0.75, s2 = -2.5;
  double c = std::numeric_limits<double>::quiet_NaN();
  for (int64_t posValue : {0, 1, 7, 130}) {
    std::optional<int64_t> len = kw.readLengthAt(posValue);
    if (!len || posValue + kw.tokens > capacity)
      continue;
    SmallVector<int64_t> ns, ts;
    for (int64_t n = 0; n < kw.tokens; ++n)
      if (kw.tokens <= 8 || n < 2 || n == kw.tokens / 2 || n == kw.tokens - 1)
        ns.push_back(n);
    int64_t near = posValue + kw.tokens + 32;
    for (int64_t t = 0; t < *len; ++t)
      if (*len <= 256 || t < near || t >= *len - 32)
        ts.push_back(t);
    for (bool last : {false, true}) {
      SmallVector<int64_t> idx(xType.getRank(), 0);
      if (last)
        for (int64_t d = 0; d < xType.getRank(); ++d)
          if (!xType.isDynamicDim(d))
            idx[d] = xType.getDimSize(d) - 1;
      for (int64_t n : ns)
        for (int64_t t : ts) {
          if (nDim >= 0)
            idx[nDim] = n;
          idx[tDim] = t;
          Location where = softmax->getLoc();
          std::string why;
          std::optional<double> x1 = evaluate(s1, idx, posValue, where, why);
          std::optional<double> x2 =
              x1 ? evaluate(s2, idx, posValue, where, why) : std::nullopt;
          if (!x2)
            return no(where, "not adopted: kvq cannot evaluate what lies "
                                 "between the scores and the softmax: " +
                                     Twine(why));
          bool shown = t <= posValue + n;
          // A shown position's value follows its score; one that does not,
          // or sits 1e4 below it, is masked.
          bool follows = std::isfinite(*x1) && std::isfinite(*x2) &&
                         *x1 != *x2 && *x1 > -1e4 && *x2 > -1e4;
          if (shown && follows) {
            double slope = (*x1 - *x2) / (s1 - s2);
            if (std::isnan(c))
              c = slope;
            bool linear = std::abs(*x1 - slope * s1) <=
                          1e-6 * (1 + std::abs(*x1));
            if (!linear || std::abs(slope - c) > 1e-6 * std::abs(c))
              return no(maskOp ? maskOp->getLoc() : softmax->getLoc(),
                            "not adopted: the softmax does not get the "
                            "scores times one constant at the positions it "
                            "sees");
            continue;
          }
          auto hidden = [&](double v, double score) {
            return v == -std::numeric_limits<double>::infinity() ||
                   (!std::isnan(c) && v <= c * score - 1e4);
          };
          bool isHidden = hidden(*x1, s1) && hidden(*x2, s2);
          // A value that ignores the score where nothing masks it: the
          // scores are multiplied by 0.
          if (shown && !maskOp && *x1 == *x2 && std::isfinite(*x1))
            return no(softmax->getLoc(),
                          "not adopted: the scores are scaled by 0");
          if (shown || !isHidden) {
            if (shown || t < posValue + kw.tokens) {
              if (!maskOp && kw.tokens > 1)
                return no(softmax->getLoc(),
                              "not adopted: attention over several new "
                              "tokens without a causal mask");
              return no(maskOp ? maskOp->getLoc() : softmax->getLoc(),
                            "not adopted: the mask is not the causal mask "
                            "(position pos + n sees positions 0 .. pos + n)");
            }
            return no(kw.read ? kw.read->getLoc() : softmax->getLoc(),
                          "not adopted: attention reads " + Twine(*len) +
                              " positions at pos = " + Twine(posValue) +
                              ", past the written prefix pos + " +
                              Twine(kw.tokens) +
                              ", and no mask hides the rest");
          }
        }
    }
  }
  if (std::isnan(c))
    return no(softmax->getLoc(), "not adopted: no position of the cache "
                                     "could be checked");
  // One remark per argument, however many attentions read the mask.
  for (BlockArgument arg : maskArgs) {
    std::string reason =
        ("adopted on the assumption that argument #" +
         Twine(arg.getArgNumber()) +
         " is the causal attention mask (position pos + n sees "
         "positions 0 .. pos + n; no padding)")
            .str();
    if (llvm::none_of(assumptions, [&](const Refusal &r) {
          return r.reason == reason;
        }))
      assumptions.push_back({arg.getLoc(), std::move(reason)});
  }
  return c;
}

/// Matches the attention around a softmax of `x` (rank `rank`, softmax over
/// dim `tPos`) producing `p`.
LogicalResult FunctionMatcher::matchAround(Operation *softmax, Value x, Value p,
                                           unsigned tPos, unsigned rank,
                                           unsigned xUses) {
  // The softmax input feeds only the softmax (linalg.softmax: one use; the
  // expansion: its max and its exp).
  if (x.getNumUses() != xUses)
    return refuse(softmax->getLoc(), "not adopted: the attention scores are "
                                     "also used outside the attention");
  // Backward from the softmax input to the scores contraction through
  // reshapes and elementwise generics (scale, conversions, masks). `between`
  // holds each op passed and its operand on the scores' path, last first;
  // the other operands (mask tensors) are evaluated below, not matched.
  SmallVector<std::pair<Operation *, unsigned>> between;
  Value s = x;
  linalg::GenericOp scores;
  for (int step = 0; step < 12; ++step) {
    Operation *def = s.getDefiningOp();
    auto g = dyn_cast_or_null<linalg::GenericOp>(def);
    if (g && isMulAddContraction(g)) {
      scores = g;
      break;
    }
    std::optional<unsigned> onPath;
    if (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
      onPath = 0;
    else if (g && g.getNumReductionLoops() == 0 && g.getNumDpsInits() == 1)
      onPath = scoresOperand(g);
    if (!onPath)
      break;
    if (!def->getOperand(*onPath).hasOneUse())
      return refuse(def->getLoc(), "not adopted: the attention scores are "
                                   "also used outside the attention");
    between.push_back({def, *onPath});
    s = def->getOperand(*onPath);
  }
  if (!scores)
    return refuse(softmax->getLoc(), "not adopted: the softmax input is not "
                                     "a scaled q·k contraction");
  // Which contraction input is the key read?
  std::optional<std::pair<Write, Roles>> key;
  int keyInput = -1;
  for (int i = 0; i < 2 && !key; ++i) {
    auto traced = traceCacheOperand(scores.getDpsInputs()[i], scores);
    if (refusal)
      return failure();
    if (succeeded(traced)) {
      key = *traced;
      keyInput = i;
    }
  }
  if (!key)
    return refuse(scores.getLoc(), "not adopted: neither operand of the "
                                   "scores contraction is a cache read");
  Write kw = key->first;
  Roles kRoles = key->second;
  if (!startsAtZero(scores.getDpsInits()[0]))
    return refuse(scores.getLoc(), "not adopted: the scores contraction does "
                                   "not start from zero");
  auto maps = scores.getIndexingMapsArray();
  auto qDims = dimsOf(maps[1 - keyInput]), kDims = dimsOf(maps[keyInput]),
       sDims = dimsOf(maps[2]);
  if (!qDims || !kDims || !sDims)
    return refuse(scores.getLoc(), "not adopted: the scores contraction's "
                                   "indexing maps are not permutations");
  auto iters = scores.getIteratorTypesArray();
  // Loop roles: the keys' dims first, then the queries' own dims.
  SmallVector<std::optional<Role>> loop(scores.getNumLoops());
  for (auto [i, d] : llvm::enumerate(*kDims))
    loop[d] = kRoles.dims[i];
  Value queries = scores.getDpsInputs()[1 - keyInput];
  auto qType = cast<RankedTensorType>(queries.getType());
  SmallVector<unsigned> own; // query dims that are not the keys'
  for (auto [i, d] : llvm::enumerate(*qDims)) {
    if (loop[d]) {
      if (*loop[d] == Role::Token)
        return refuse(scores.getLoc(), "not adopted: the queries index the "
                                       "cached positions");
      continue;
    }
    if (qType.getDimSize(i) == 1)
      loop[d] = Role::Unit;
    else
      own.push_back(i);
  }
  bool keysRepeated = kRoles.find(Role::QHead) >= 0;
  int64_t group = keysRepeated ? kRoles.group : 1;
  int qHeadDim = -1;
  for (auto [i, d] : llvm::enumerate(*qDims))
    if (loop[d] == Role::Head || loop[d] == Role::QHead)
      qHeadDim = i;
  auto setOwn = [&](unsigned i, Role r) { loop[(*qDims)[i]] = r; };
  if (own.size() == 2) {
    // [.., kv_heads, group, ..]: the group follows the KV head.
    unsigned g = own[0] == unsigned(qHeadDim + 1) ? own[0] : own[1];
    unsigned n = g == own[0] ? own[1] : own[0];
    if (keysRepeated || qHeadDim < 0 || g != unsigned(qHeadDim + 1) ||
        loop[(*qDims)[qHeadDim]] != Role::Head)
      return refuse(scores.getLoc(), "not adopted: the queries are not "
                                     "[tokens, heads, head_dim]");
    setOwn(g, Role::Group);
    setOwn(n, Role::Query);
    group = qType.getDimSize(g);
  } else if (own.size() == 1) {
    int64_t size = qType.getDimSize(own[0]);
    if (kw.tokens > 1 && size == kw.tokens) {
      setOwn(own[0], Role::Query);
    } else if (!keysRepeated && kw.tokens == 1 &&
               (qHeadDim < 0 || own[0] == unsigned(qHeadDim + 1))) {
      setOwn(own[0], Role::Group);
      group = size;
    } else {
      return refuse(scores.getLoc(), "not adopted: " + Twine(size) +
                                         " queries for " + Twine(kw.tokens) +
                                         " written tokens");
    }
  } else if (own.size() > 2) {
    return refuse(scores.getLoc(), "not adopted: the queries are not "
                                   "[tokens, heads, head_dim]");
  }
  for (auto [d, role] : llvm::enumerate(loop)) {
    bool reduced = iters[d] == utils::IteratorType::reduction;
    if (reduced != (role == Role::Channel) && role != Role::Unit)
      return refuse(scores.getLoc(),
                    reduced ? "not adopted: the scores contraction reduces "
                              "over another dimension than head_dim"
                            : "not adopted: the scores contraction does "
                              "not reduce over head_dim");
  }
  int queryLoop = -1;
  for (auto [d, role] : llvm::enumerate(loop))
    if (role == Role::Query)
      queryLoop = d;
  if (queryLoop < 0 && kw.tokens > 1)
    return refuse(scores.getLoc(), "not adopted: 1 query for " +
                                       Twine(kw.tokens) + " written tokens");
  Attention a;
  a.k = kw;
  a.queryOperand = scores.getDpsInputOperand(1 - keyInput);
  for (unsigned d : *qDims)
    a.queryRoles.dims.push_back(*loop[d]);
  a.queryRoles.group = group;
  Type qElement = qType.getElementType();
  if (!(qElement.isF32() || qElement.isF16() || qElement.isBF16()))
    return refuse(scores.getLoc(), "not adopted: queries are not f32, f16 or "
                                   "bf16");
  // Scores layout, carried to the softmax through what lies between; the
  // softmax reduces the cached positions.
  Roles sRoles;
  for (unsigned d : *sDims)
    sRoles.dims.push_back(*loop[d]);
  sRoles.group = group;
  for (auto [op, operand] : llvm::reverse(between)) {
    auto g = dyn_cast<linalg::GenericOp>(op);
    // An elementwise op over the scores' own layout (scale, mask,
    // conversion) keeps the roles, whatever its other operands broadcast.
    if (g && g.getNumDpsInputs() > 1) {
      AffineMap in = g.getIndexingMapsArray()[operand],
                out = g.getIndexingMapsArray()[g.getNumDpsInputs()];
      if (!in.isIdentity() || !out.isIdentity())
        return refuse(op->getLoc(), "not adopted: an op between the scores "
                                    "and the softmax changes their layout");
      continue;
    }
    std::string why;
    FailureOr<Roles> next = stepRoles(op, sRoles, why);
    if (failed(next))
      return refuse(op->getLoc(), "not adopted: " + Twine(why));
    sRoles = *next;
  }
  if (sRoles.dims.size() != rank || sRoles.dims[tPos] != Role::Token)
    return refuse(softmax->getLoc(), "not adopted: the softmax is not over "
                                     "the cached positions");
  // The scale and the mask are read off the values the softmax gets: for
  // scores s, position t and query n, it must see c * s with one constant c
  // where t <= pos + n, and -inf or at most c * s - 1e4 (exp is exactly 0
  // in f32) where t > pos + n. kvq.cache_attend scales by 1/sqrt(head_dim),
  // so c is folded into the queries.
  FailureOr<double> c = checkScaleAndMask(softmax, x, scores.getResult(0),
                                          sRoles, kw, between);
  if (failed(c))
    return failure();
  int64_t hd = kw.chain->sizeOf(Role::Channel);
  a.queryFactor = *c * kRoles.scale * std::sqrt(double(hd));
  sRoles.scale = 1.0;
  // Forward: the weighted sum of values, after conversions and reshapes.
  Value probs = p;
  Operation *user = singleUser(probs);
  for (int step = 0; step < 4; ++step) {
    auto g = dyn_cast_or_null<linalg::GenericOp>(user);
    bool convert = g && (isConversion<arith::ExtFOp>(g) ||
                         isConversion<arith::TruncFOp>(g));
    if (!convert && !isa_and_nonnull<tensor::ExpandShapeOp,
                                     tensor::CollapseShapeOp>(user))
      break;
    std::string why;
    FailureOr<Roles> next = stepRoles(user, sRoles, why);
    if (failed(next))
      return refuse(user->getLoc(), "not adopted: " + Twine(why));
    sRoles = *next;
    probs = user->getResult(0);
    user = singleUser(probs);
  }
  auto sum = dyn_cast_or_null<linalg::GenericOp>(user);
  if (!sum || !isMulAddContraction(sum))
    return refuse(softmax->getLoc(), "not adopted: the probabilities are not "
                                     "only summed with the values");
  int probInput = sum.getDpsInputs()[0] == probs ? 0 : 1;
  auto traced = traceCacheOperand(sum.getDpsInputs()[1 - probInput], sum);
  if (failed(traced))
    return refusal ? failure()
                   : refuse(sum.getLoc(), "not adopted: the values are not a "
                                          "cache read");
  Write vw = traced->first;
  Roles vRoles = traced->second;
  if (vRoles.scale != 1.0)
    return refuse(sum.getLoc(), "not adopted: the values are scaled before "
                                "the weighted sum");
  if (!startsAtZero(sum.getDpsInits()[0]))
    return refuse(sum.getLoc(), "not adopted: the weighted sum does not "
                                "start from zero");
  auto smaps = sum.getIndexingMapsArray();
  auto pDims = dimsOf(smaps[probInput]), vDims = dimsOf(smaps[1 - probInput]),
       oDims = dimsOf(smaps[2]);
  if (!pDims || !vDims || !oDims || pDims->size() != sRoles.dims.size())
    return refuse(sum.getLoc(), "not adopted: the weighted sum's indexing "
                                "maps are not permutations");
  SmallVector<std::optional<Role>> sloop(sum.getNumLoops());
  for (auto [i, d] : llvm::enumerate(*pDims))
    sloop[d] = sRoles.dims[i];
  auto sIters = sum.getIteratorTypesArray();
  for (auto [i, d] : llvm::enumerate(*vDims)) {
    Role r = vRoles.dims[i];
    if (!sloop[d]) {
      sloop[d] = r;
      continue;
    }
    if (*sloop[d] != r && r != Role::Unit && *sloop[d] != Role::Unit)
      return refuse(sum.getLoc(),
                    (*sloop[d] == Role::QHead || r == Role::QHead ||
                     *sloop[d] == Role::Group || r == Role::Group)
                        ? "not adopted: keys and values are grouped "
                          "differently"
                        : "not adopted: the weighted sum does not reduce the "
                          "probabilities against the values of the same "
                          "heads");
  }
  if ((vRoles.find(Role::QHead) >= 0) != keysRepeated ||
      (keysRepeated && vRoles.group != group))
    return refuse(sum.getLoc(), "not adopted: keys and values are grouped "
                                "differently");
  for (auto [d, role] : llvm::enumerate(sloop)) {
    if (!role)
      return refuse(sum.getLoc(), "not adopted: the weighted sum has a loop "
                                  "that neither the probabilities nor the "
                                  "values index");
    bool reduced = sIters[d] == utils::IteratorType::reduction;
    if (reduced != (*role == Role::Token) && *role != Role::Unit)
      return refuse(sum.getLoc(), "not adopted: the weighted sum does not "
                                  "reduce the probabilities against the "
                                  "values of the same heads");
  }
  for (unsigned d : *oDims)
    a.outputRoles.dims.push_back(*sloop[d]);
  a.outputRoles.group = group;
  if (a.outputRoles.find(Role::Channel) < 0)
    return refuse(sum.getLoc(), "not adopted: unexpected attention output "
                                "layout");
  a.output = sum.getResult(0);
  a.anchor = sum;
  a.v = vw;
  int64_t kvh = kw.chain->sizeOf(Role::Head);
  a.qHeads = kvh * group;
  // K and V of one layer, written at one position.
  if (vw.pastPrefix != kw.pastPrefix ||
      (vw.pastPrefix && vw.readLengthAt(0) != kw.readLengthAt(0)))
    return refuse(sum.getLoc(), "not adopted: keys and values are read over "
                                "different lengths");
  if (kw.chain == vw.chain || kw.layer != vw.layer || kw.pos != vw.pos ||
      kw.tokens != vw.tokens)
    return refuse(sum.getLoc(), "not adopted: keys and values come from "
                                "writes of different layers or positions");
  attentions.push_back(a);
  return success();
}

LogicalResult FunctionMatcher::match() {
  if (failed(findChains()))
    return failure();
  if (chains.empty())
    return success();
  // Softmaxes: linalg.softmax, or its expansion over the last dim,
  //   [m = max_t x (from -inf),] e = exp(x [- m]), z = sum_t e (from 0),
  //   p = e / z,
  // where the elementwise steps may be one generic or several (torch's
  // decomposition: sub, exp and div apart; keepdim reductions) and are
  // checked by evaluating them, not by their spelling. Without the max it
  // is the same softmax (exp may overflow where the max form would not;
  // kvq.cache_attend subtracts the max).
  SmallVector<
      std::tuple<Operation *, Value, Value, unsigned, unsigned, unsigned>>
      found;
  std::optional<Refusal> softmaxRefusal;
  auto notSoftmax = [&](Operation *at, const Twine &why) {
    if (!softmaxRefusal)
      softmaxRefusal = Refusal{
          at->getLoc(), ("not adopted: this is not a softmax: " + why).str()};
  };
  // Follows `from` forward through single-use elementwise generics to the
  // first that computes f(x, b); its result, or null.
  auto forwardTo = [&](Operation *from, Value x, Value b,
                       function_ref<double(double, double)> f) -> Value {
    Operation *cur = from;
    for (int step = 0; step < 4 && cur; ++step) {
      auto g = dyn_cast<linalg::GenericOp>(cur);
      if (!g || g.getNumReductionLoops() != 0 || g->getNumResults() != 1)
        return Value();
      Value r = g->getResult(0);
      if (computesElementwise(r, x, b, f))
        return r;
      cur = singleUser(r);
    }
    return Value();
  };
  // The tail shared by both forms: z = sum_t e, p = e / z.
  auto tail = [&](Operation *root, Value x, Value e, unsigned rank,
                  unsigned xUses) {
    linalg::GenericOp sumR;
    Operation *divUser = nullptr;
    for (Operation *u : e.getUsers()) {
      auto g = dyn_cast<linalg::GenericOp>(u);
      if (g && g.getNumDpsInputs() == 1 && g.getNumReductionLoops() == 1 &&
          isReduction<arith::AddFOp>(g))
        sumR = g;
      else
        divUser = u;
    }
    if (!sumR || !divUser || !e.hasNUses(2) ||
        !isLastDimReduction(sumR, rank) || !startsAtZero(sumR.getDpsInits()[0]))
      return notSoftmax(e.getDefiningOp(), "the exps are not summed from zero");
    Value z = sumR.getResult(0);
    Value p = forwardTo(divUser, e, z, [](double a, double b) { return a / b; });
    if (!p)
      return notSoftmax(divUser, "the exps are not divided by their sum");
    found.push_back({root, x, p, rank - 1, rank, xUses});
  };
  llvm::SmallPtrSet<Operation *, 8> claimedExps;
  func.walk([&](Operation *op) {
    if (auto sm = dyn_cast<linalg::SoftmaxOp>(op)) {
      found.push_back({op, sm.getInput(), sm.getResult()[0],
                       unsigned(sm.getDimension()),
                       unsigned(sm.getInputOperandType().getRank()), 1u});
      return;
    }
    auto maxR = dyn_cast<linalg::GenericOp>(op);
    if (!maxR || !isMaxReduction(maxR))
      return;
    Value x = maxR.getDpsInputs()[0];
    unsigned rank = cast<RankedTensorType>(x.getType()).getRank();
    if (!isLastDimReduction(maxR, rank))
      return;
    if (!startsAtLowest(maxR.getDpsInits()[0]))
      return notSoftmax(maxR, "the running max does not start at -inf");
    Value m = maxR.getResult(0);
    Operation *next = nullptr;
    for (Operation *u : x.getUsers())
      if (u != maxR.getOperation())
        next = next && next != u ? maxR.getOperation() : u;
    // The second output (torch's argmax) is not read.
    if (maxR->getNumResults() > 1 &&
        llvm::any_of(maxR->getResults().drop_front(),
                     [](Value r) { return !r.use_empty(); }))
      return notSoftmax(maxR, "the max's index is read");
    if (!next || next == maxR.getOperation())
      return notSoftmax(maxR, "the max is not subtracted before exp");
    Value e = forwardTo(next, x, m,
                        [](double a, double b) { return std::exp(a - b); });
    if (!e)
      return notSoftmax(next, "the max is not subtracted before exp");
    claimedExps.insert(e.getDefiningOp());
    tail(op, x, e, rank, 2u);
  });
  // exp(x) / sum_t exp(x), without the max.
  func.walk([&](linalg::GenericOp g) {
    if (claimedExps.count(g) || g.getNumDpsInputs() != 1 ||
        g.getNumReductionLoops() != 0 ||
        g.getRegion().front().getOps<math::ExpOp>().empty())
      return;
    Value x = g.getDpsInputs()[0], e = g->getResult(0);
    unsigned rank = cast<RankedTensorType>(x.getType()).getRank();
    bool summed = llvm::any_of(e.getUsers(), [&](Operation *u) {
      auto r = dyn_cast<linalg::GenericOp>(u);
      return r && r.getNumReductionLoops() == 1 &&
             isReduction<arith::AddFOp>(r) && isLastDimReduction(r, rank);
    });
    if (!summed || !computesElementwise(
                       e, x, Value(),
                       [](double a, double) { return std::exp(a); }))
      return;
    tail(g, x, e, rank, 1u);
  });
  if (softmaxRefusal) {
    refusal = softmaxRefusal;
    return failure();
  }
  for (auto &[op, x, p, t, rank, uses] : found)
    if (failed(matchAround(op, x, p, t, rank, uses)))
      return failure();
  // Every read of every chain must belong to an adopted attention.
  llvm::SmallPtrSet<Operation *, 16> adoptedWrites;
  for (Attention &a : attentions) {
    for (tensor::InsertSliceOp w : a.k.chain->writes)
      if (writeOf[w].data == a.k.data)
        adoptedWrites.insert(w);
    for (tensor::InsertSliceOp w : a.v.chain->writes)
      if (writeOf[w].data == a.v.data)
        adoptedWrites.insert(w);
  }
  for (auto &chain : chains)
    for (tensor::ExtractSliceOp r : chain->reads)
      if (!adoptedReads.count(r))
        return refuse(r.getLoc(), "not adopted: this cache read does not feed "
                                  "a recognised attention");
  for (auto &chain : chains)
    for (tensor::InsertSliceOp w : chain->writes)
      if (!adoptedWrites.count(w))
        return refuse(w.getLoc(), "not adopted: this cache write is not "
                                  "read by a recognised attention");
  // Shapes agree across chains.
  for (auto &chain : chains) {
    auto type = cast<RankedTensorType>(chain->arg.getType());
    int64_t kvh = chain->sizeOf(Role::Head);
    int64_t d = chain->sizeOf(Role::Channel);
    if ((kvHeads && kvh != kvHeads) || (headDim && d != headDim) ||
        (elementType && elementType != cacheElementType(type)))
      return refuse(chain->arg.getLoc(), "not adopted: cache tensors of "
                                         "different shapes or types");
    kvHeads = kvh;
    headDim = d;
    elementType = cacheElementType(type);
  }
  // Layers: stacked -> dim 0; per-layer -> rank of the chain among K (V)
  // chains by argument number.
  bool stacked = chains.front()->stacked;
  for (auto &chain : chains)
    if (chain->stacked != stacked)
      return refuse(chain->arg.getLoc(), "not adopted: stacked and per-layer "
                                         "cache tensors mixed");
  if (stacked) {
    if (chains.size() != 2)
      return refuse(chains.front()->arg.getLoc(),
                    "not adopted: expected one stacked K and one stacked V "
                    "cache tensor, found " +
                        Twine(chains.size()));
    layers = chains.front()->sizeOf(Role::Slot);
  } else {
    llvm::SetVector<CacheChain *> ks, vs;
    for (Attention &a : attentions) {
      ks.insert(a.k.chain);
      vs.insert(a.v.chain);
    }
    auto byArg = [](CacheChain *x, CacheChain *y) {
      return x->arg.getArgNumber() < y->arg.getArgNumber();
    };
    SmallVector<CacheChain *> kSorted(ks.begin(), ks.end()),
        vSorted(vs.begin(), vs.end());
    llvm::sort(kSorted, byArg);
    llvm::sort(vSorted, byArg);
    for (auto [i, c] : llvm::enumerate(kSorted))
      c->perLayerIndex = i;
    for (auto [i, c] : llvm::enumerate(vSorted))
      c->perLayerIndex = i;
    for (Attention &a : attentions)
      if (a.k.chain->perLayerIndex != a.v.chain->perLayerIndex)
        return refuse(a.anchor->getLoc(),
                      "not adopted: per-layer K and V cache tensors are not "
                      "in the same order");
    layers = kSorted.size();
  }
  return success();
}
