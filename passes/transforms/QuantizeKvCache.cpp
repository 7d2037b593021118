//===- QuantizeKvCache.cpp - find a model's KV cache, make it a !kvq.cache ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq-quantize-kv-cache. Per function:
//  1. cache chains: a tensor argument written by tensor.insert_slice (each
//     write feeding the next) whose last value is returned;
//  2. for each softmax, the attention around it: the scores contraction
//     (queries x a read of a K chain), scale, causal mask, and the weighted
//     sum of a read of a V chain;
//  3. every fact kvq.cache_attend relies on is checked (read = the written
//     prefix, scale 1/sqrt(head_dim), causal mask, head grouping);
//  4. only when every chain use was adopted does the rewrite start (the
//     matcher changes nothing); otherwise the function stays untouched and a
//     remark says why.
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"
#include "passes/transforms/CacheConfigOptions.h"
#include "passes/transforms/kvcache/RopeMatcher.h"

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
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace mlir::kvq {
#define GEN_PASS_DEF_KVQQUANTIZEKVCACHE
#include "kvq/passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {

constexpr StringLiteral kPass = "kvq-quantize-kv-cache";

/// Why a function was not adopted: the op to point at and the reason.
struct Refusal {
  Location loc;
  std::string reason;
};

/// One tensor argument threaded through insert_slice writes to a return.
struct CacheChain {
  BlockArgument arg;
  unsigned resultIndex = 0;
  bool stacked = false; // [layers, context, kv_heads, head_dim]
  SmallVector<tensor::InsertSliceOp> writes;
  SmallVector<tensor::ExtractSliceOp> reads;
  /// Layer of this chain when per-layer (its rank among K or V chains).
  int64_t perLayerIndex = -1;
};

struct Write {
  CacheChain *chain = nullptr;
  int64_t layer = 0;
  Value pos; // token offset written
  int64_t tokens = 0;
  Value data; // [tokens, kv_heads, head_dim]
  /// The write itself: the rewrite reads its source when it runs, since an
  /// earlier layer's rewrite may have replaced the value `data` was.
  tensor::InsertSliceOp op;
};

/// A matched attention: what the rewrite needs.
struct Attention {
  Write k, v;
  Value queries;                     // as the scores contraction reads them
  OpOperand *queryOperand = nullptr; // read again at rewrite time
  AffineMap queryMap;             // its indexing map in the scores contraction
  unsigned qN, qHead, qGroup, qC; // loop dims of the scores contraction
  bool grouped = false;           // queries carry [kv_heads, group] dims
  Value output;                   // the weighted sum
  AffineMap outputMap;            // its indexing map in the weighted sum
  unsigned oN, oHead, oGroup, oC;
  Operation *anchor = nullptr; // the weighted-sum op
};

//===----------------------------------------------------------------------===//
// Small evaluators
//===----------------------------------------------------------------------===//

/// Evaluates an index/integer value built from constants, `pos` and
/// add/sub/mul/casts, with `pos` = posValue.
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
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp>(op))
    return evalInt(op->getOperand(0), pos, posValue, depth + 1);
  return std::nullopt;
}

/// Interprets the body of an elementwise mask generic for loop indices
/// `indices`: returns true when it yields `ninf` (masked), false when it
/// yields the scores block argument, nullopt for anything else.
std::optional<bool> evalMask(linalg::GenericOp g, ArrayRef<int64_t> indices,
                             Value pos, int64_t posValue) {
  Block &body = g.getRegion().front();
  // Inline maps: the causal-mask check interprets a body of a few ops for
  // every (query, position) pair it samples, tens of thousands of calls per
  // prefill layer, and heap maps made that most of a compile under ASan.
  llvm::SmallDenseMap<Value, int64_t, 32> ints;
  llvm::SmallDenseMap<Value, Value, 8>
      floats; // select results -> chosen operand
  auto get = [&](Value v) -> std::optional<int64_t> {
    auto it = ints.find(v);
    if (it != ints.end())
      return it->second;
    if (v.getParentBlock() != &body || isa<BlockArgument>(v))
      return evalInt(v, pos, posValue);
    return std::nullopt;
  };
  for (Operation &op : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(op)) {
      if (index.getDim() >= indices.size())
        return std::nullopt;
      ints[index] = indices[index.getDim()];
    } else if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        ints[c] = i.getValue().getSExtValue();
    } else if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
      auto a = get(op.getOperand(0)), b = get(op.getOperand(1));
      if (!a || !b)
        return std::nullopt;
      ints[op.getResult(0)] = isa<arith::AddIOp>(op)   ? *a + *b
                              : isa<arith::SubIOp>(op) ? *a - *b
                                                       : *a * *b;
    } else if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op)) {
      auto a = get(op.getOperand(0));
      if (!a)
        return std::nullopt;
      ints[op.getResult(0)] = *a;
    } else if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      auto a = get(cmp.getLhs()), b = get(cmp.getRhs());
      if (!a || !b)
        return std::nullopt;
      bool r = false;
      uint64_t ua = uint64_t(*a), ub = uint64_t(*b);
      switch (cmp.getPredicate()) {
      case arith::CmpIPredicate::eq:
        r = *a == *b;
        break;
      case arith::CmpIPredicate::ne:
        r = *a != *b;
        break;
      case arith::CmpIPredicate::slt:
        r = *a < *b;
        break;
      case arith::CmpIPredicate::sle:
        r = *a <= *b;
        break;
      case arith::CmpIPredicate::sgt:
        r = *a > *b;
        break;
      case arith::CmpIPredicate::sge:
        r = *a >= *b;
        break;
      case arith::CmpIPredicate::ult:
        r = ua < ub;
        break;
      case arith::CmpIPredicate::ule:
        r = ua <= ub;
        break;
      case arith::CmpIPredicate::ugt:
        r = ua > ub;
        break;
      case arith::CmpIPredicate::uge:
        r = ua >= ub;
        break;
      }
      ints[cmp] = r;
    } else if (auto sel = dyn_cast<arith::SelectOp>(op)) {
      auto c = get(sel.getCondition());
      if (!c)
        return std::nullopt;
      floats[sel] = *c ? sel.getTrueValue() : sel.getFalseValue();
    } else {
      return std::nullopt;
    }
  }
  Value yielded = body.getTerminator()->getOperand(0);
  auto it = floats.find(yielded);
  Value chosen = it == floats.end() ? yielded : it->second;
  if (chosen == body.getArgument(0))
    return false;
  FloatAttr f;
  if (matchPattern(chosen, m_Constant(&f)) &&
      (f.getValue().isNegative() &&
       (f.getValue().isInfinity() || f.getValueAsDouble() <= -1e30)))
    return true;
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

/// A generic whose body is `yield (acc + a * b)`: a contraction.
bool isMulAddContraction(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 1)
    return false;
  Block &b = g.getRegion().front();
  if (b.getOperations().size() != 3)
    return false;
  auto mul = dyn_cast<arith::MulFOp>(&b.front());
  auto add = dyn_cast<arith::AddFOp>(mul ? mul->getNextNode() : nullptr);
  if (!mul || !add)
    return false;
  Value a0 = b.getArgument(0), a1 = b.getArgument(1), acc = b.getArgument(2);
  bool mulOk = (mul.getLhs() == a0 && mul.getRhs() == a1) ||
               (mul.getLhs() == a1 && mul.getRhs() == a0);
  bool addOk = (add.getLhs() == acc && add.getRhs() == mul) ||
               (add.getRhs() == acc && add.getLhs() == mul);
  return mulOk && addOk && b.getTerminator()->getOperand(0) == add;
}

/// The init of a contraction must start at zero (linalg.fill 0).
bool startsAtZero(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  FloatAttr f;
  return fill && matchPattern(fill.getInputs()[0], m_Constant(&f)) &&
         f.getValue().isZero();
}

/// The single-op body `yield op(arg0, <constant>)` of an elementwise
/// generic, or null.
template <typename OpT>
OpT scalarOpWithConstant(linalg::GenericOp g, double *c) {
  if (g.getNumDpsInputs() != 1 || !isIdentityElementwise(g))
    return nullptr;
  Block &b = g.getRegion().front();
  if (b.getOperations().size() != 2)
    return nullptr;
  auto op = dyn_cast<OpT>(&b.front());
  if (!op || op.getLhs() != b.getArgument(0))
    return nullptr;
  FloatAttr f;
  if (!matchPattern(op.getRhs(), m_Constant(&f)))
    return nullptr;
  *c = f.getValueAsDouble();
  return op;
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

/// A reduction generic `yield OpT(in, acc)` (either order).
template <typename OpT> bool isReduction(linalg::GenericOp g) {
  Block &b = g.getRegion().front();
  if (g.getNumDpsInputs() != 1 || b.getOperations().size() != 2)
    return false;
  auto op = dyn_cast<OpT>(&b.front());
  if (!op)
    return false;
  Value in = b.getArgument(0), acc = b.getArgument(1);
  return ((op.getLhs() == in && op.getRhs() == acc) ||
          (op.getLhs() == acc && op.getRhs() == in)) &&
         b.getTerminator()->getOperand(0) == op;
}

/// Reduces the last of `rank` dims: input identity, output all but the last.
bool isLastDimReduction(linalg::GenericOp g, unsigned rank) {
  auto maps = g.getIndexingMapsArray();
  auto iters = g.getIteratorTypesArray();
  if (maps.size() != 2 || !maps[0].isIdentity() || iters.size() != rank ||
      iters[rank - 1] != utils::IteratorType::reduction)
    return false;
  return maps[1] == AffineMap::getMultiDimIdentityMap(rank, g.getContext())
                        .dropResult(rank - 1);
}

/// An elementwise generic of (a, b) where b is reduced over the last dim.
bool isRowBroadcast(linalg::GenericOp g, Value a, Value b, unsigned rank) {
  auto maps = g.getIndexingMapsArray();
  if (g.getNumDpsInputs() != 2 || g.getDpsInputs()[0] != a ||
      g.getDpsInputs()[1] != b || g.getNumReductionLoops() != 0)
    return false;
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, g.getContext());
  return maps[0] == id && maps[1] == id.dropResult(rank - 1) && maps[2] == id;
}

/// `yield exp(x - m)` over (x, m).
bool isExpOfDifference(linalg::GenericOp g, Value x, Value m, unsigned rank) {
  if (!isRowBroadcast(g, x, m, rank))
    return false;
  Block &b = g.getRegion().front();
  if (b.getOperations().size() != 3)
    return false;
  auto sub = dyn_cast<arith::SubFOp>(&b.front());
  auto exp = dyn_cast<math::ExpOp>(sub ? sub->getNextNode() : nullptr);
  return sub && exp && sub.getLhs() == b.getArgument(0) &&
         sub.getRhs() == b.getArgument(1) && exp.getOperand() == sub &&
         b.getTerminator()->getOperand(0) == exp;
}

/// `yield e / z` over (e, z).
bool isQuotient(linalg::GenericOp g, Value e, Value z, unsigned rank) {
  if (!isRowBroadcast(g, e, z, rank))
    return false;
  Block &b = g.getRegion().front();
  auto div = dyn_cast<arith::DivFOp>(&b.front());
  return b.getOperations().size() == 2 && div &&
         div.getLhs() == b.getArgument(0) && div.getRhs() == b.getArgument(1) &&
         b.getTerminator()->getOperand(0) == div;
}

/// The position under StableHLO's clamp of a dynamic_update_slice start,
/// `min(max(p, 0), last)` in either order: in range that clamp is the
/// identity, so reads written in terms of p line up with the write. A bound
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

//===----------------------------------------------------------------------===//
// The matcher
//===----------------------------------------------------------------------===//

class FunctionMatcher {
public:
  explicit FunctionMatcher(func::FuncOp f) : func(f) {}

  /// Finds the chains and attentions; a refusal when something cache-like
  /// cannot be adopted. No cache at all: success with no chains.
  LogicalResult match();

  func::FuncOp func;
  std::vector<std::unique_ptr<CacheChain>> chains;
  SmallVector<Attention> attentions;
  std::optional<Refusal> refusal;
  int64_t kvHeads = 0, headDim = 0, layers = 0;
  Type elementType;

private:
  LogicalResult refuse(Location loc, const Twine &why) {
    refusal = Refusal{loc, why.str()};
    return failure();
  }
  LogicalResult findChains();
  LogicalResult describeWrite(CacheChain &chain, tensor::InsertSliceOp w);
  FailureOr<Write> describeRead(tensor::ExtractSliceOp read);
  FailureOr<Write> peelToRead(Value v, Operation *user, int64_t *group,
                              bool *broadcast);
  LogicalResult matchAround(Operation *softmax, Value x, Value p, unsigned tPos,
                            unsigned rank, unsigned xUses);
  DenseMap<Operation *, Write> writeOf; // insert_slice -> its description
  DenseMap<Operation *, CacheChain *> chainOfRead;
  llvm::SmallPtrSet<Operation *, 16> adoptedReads;
};

LogicalResult FunctionMatcher::findChains() {
  if (!func.getBody().hasOneBlock())
    return success();
  Block &entry = func.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return success();
  for (BlockArgument arg : entry.getArguments()) {
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
                      "no capacity; kvq adopts caches of a fixed capacity "
                      "written by tensor.insert_slice at the step's position");
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
    if (!written)
      continue;
    Type el = type.getElementType();
    if (!(el.isF16() || el.isF32())) {
      std::string name;
      llvm::raw_string_ostream os(name);
      os << el;
      return refuse(arg.getLoc(), "not adopted: the cache tensor's element "
                                  "type is " +
                                      name +
                                      "; kvq adopts f32 and f16 caches");
    }
    if (type.getRank() != 3 && type.getRank() != 4)
      return refuse(arg.getLoc(),
                    "not adopted: a rank-" + Twine(type.getRank()) +
                        " cache tensor; kvq adopts [context, kv_heads, "
                        "head_dim] and [layers, context, kv_heads, head_dim] "
                        "caches");
    auto chain = std::make_unique<CacheChain>();
    chain->arg = arg;
    chain->stacked = type.getRank() == 4;
    Value v = arg;
    while (true) {
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
  auto src = dyn_cast<RankedTensorType>(w.getSource().getType());
  if (!llvm::all_of(w.getMixedStrides(),
                    [](OpFoldResult s) { return isConstantIntValue(s, 1); }))
    return refuse(w.getLoc(), "not adopted: the cache write is strided");
  SmallVector<OpFoldResult> off = w.getMixedOffsets(),
                            sizes = w.getMixedSizes();
  unsigned t = chain.stacked ? 1 : 0;
  Write d;
  d.chain = &chain;
  // Where the step's position is written tells the layout.
  for (unsigned i = 0; i < off.size(); ++i)
    if (i != t && isa<Value>(off[i]))
      return refuse(w.getLoc(),
                    "not adopted: the step's position is written at "
                    "dimension " +
                        Twine(i) + " of a rank-" + Twine(off.size()) +
                        " cache; kvq adopts [context, kv_heads, head_dim] and "
                        "[layers, context, kv_heads, head_dim] caches, "
                        "written at dimension " +
                        Twine(t));
  if (chain.stacked && isa<Attribute>(off[0]) &&
      !isConstantIntValue(sizes[0], 1))
    return refuse(w.getLoc(),
                  "not adopted: the write covers " +
                      Twine(getConstantIntValue(sizes[0]).value_or(-1)) +
                      " entries of dimension 0 at once (a batch of "
                      "sequences?); a stacked kvq cache is written one layer "
                      "at a time and holds one sequence");
  if (chain.stacked) {
    std::optional<int64_t> layer = getConstantIntValue(off[0]);
    if (!layer || !isConstantIntValue(sizes[0], 1))
      return refuse(w.getLoc(), "not adopted: the layer of a stacked cache "
                                "write is not a constant");
    d.layer = *layer;
  }
  std::optional<int64_t> n = getConstantIntValue(sizes[t]);
  if (!n)
    return refuse(w.getLoc(), "not adopted: the number of tokens written is "
                              "not static");
  d.tokens = *n;
  for (unsigned i = t + 1; i < off.size(); ++i)
    if (!isConstantIntValue(off[i], 0) ||
        getConstantIntValue(sizes[i]) != dest.getDimSize(i))
      return refuse(w.getLoc(), "not adopted: the cache write does not cover "
                                "every KV head and channel");
  if (auto v = dyn_cast<Value>(off[t]))
    d.pos = stripClamp(v, dest.getDimSize(t) - d.tokens);
  else
    d.pos = nullptr; // constant position; compared through evalInt below
  if (!src || src.getRank() != 3 || src.getDimSize(0) != d.tokens)
    return refuse(w.getLoc(), "not adopted: the written K/V is not "
                              "[tokens, kv_heads, head_dim]");
  if (!d.pos)
    return refuse(w.getLoc(), "not adopted: the cache is written at a "
                              "constant position, not at the step's position");
  d.data = w.getSource();
  d.op = w;
  writeOf[w] = d;
  return success();
}

FailureOr<Write> FunctionMatcher::describeRead(tensor::ExtractSliceOp read) {
  CacheChain &chain = *chainOfRead.lookup(read);
  SmallVector<OpFoldResult> off = read.getMixedOffsets(),
                            sizes = read.getMixedSizes();
  unsigned t = chain.stacked ? 1 : 0;
  int64_t layer = 0;
  if (chain.stacked) {
    std::optional<int64_t> l = getConstantIntValue(off[0]);
    if (!l || !isConstantIntValue(sizes[0], 1))
      return refuse(read.getLoc(), "not adopted: the layer of a stacked "
                                   "cache read is not a constant");
    layer = *l;
  }
  for (unsigned i = t; i < off.size(); ++i)
    if (!isConstantIntValue(off[i], 0) ||
        !isConstantIntValue(read.getMixedStrides()[i], 1))
      return refuse(read.getLoc(), "not adopted: the cache read does not "
                                   "start at position 0 of every head");
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
  // Length read must be pos + tokens for every pos.
  Value len = dyn_cast<Value>(sizes[t]);
  for (int64_t p : {0, 1, 7, 130}) {
    std::optional<int64_t> got =
        len ? evalInt(len, last->pos, p) : getConstantIntValue(sizes[t]);
    if (!got)
      return refuse(read.getLoc(),
                    "not adopted: the cache read's length cannot be evaluated "
                    "from the step's position (kvq evaluates constants, pos, "
                    "add/sub/mul, max/min and casts)");
    if (*got != p + last->tokens)
      return refuse(read.getLoc(),
                    "not adopted: attention reads " + Twine(*got) +
                        " positions at pos = " + Twine(p) + ", not the "
                        "written prefix pos + " + Twine(last->tokens));
  }
  return *last;
}

/// Follows an attention operand back through the ops frontends put between
/// a cache read and the contraction: extf of an f16 cache, and repeat_kv
/// (broadcast + collapse).
FailureOr<Write> FunctionMatcher::peelToRead(Value v, Operation *user,
                                             int64_t *group, bool *broadcast) {
  *group = 1;
  *broadcast = false;
  // Whether a value on the way is also used elsewhere: only a refusal once
  // the way ends at a cache read (the queries may well be shared).
  bool shared = false;
  for (int step = 0; step < 4; ++step) {
    shared = shared || !v.hasOneUse();
    Operation *def = v.getDefiningOp();
    if (auto read = dyn_cast_or_null<tensor::ExtractSliceOp>(def)) {
      if (!chainOfRead.count(read))
        return failure();
      if (shared)
        return refuse(user->getLoc(), "not adopted: a cache read feeds more "
                                      "than the attention");
      FailureOr<Write> w = describeRead(read);
      if (succeeded(w))
        adoptedReads.insert(read);
      return w;
    }
    if (auto g = dyn_cast_or_null<linalg::GenericOp>(def);
        g && isConversion<arith::ExtFOp>(g)) {
      v = g.getDpsInputs()[0];
      continue;
    }
    if (auto collapse = dyn_cast_or_null<tensor::CollapseShapeOp>(def)) {
      auto b = collapse.getSrc().getDefiningOp<linalg::BroadcastOp>();
      auto srcType = cast<RankedTensorType>(collapse.getSrcType());
      if (!b || srcType.getRank() != 4 ||
          collapse.getReassociationIndices() !=
              SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}})
        return failure();
      if (b.getDimensions() != ArrayRef<int64_t>{2})
        return refuse(b.getLoc(),
                      "not adopted: query head h reads KV head h % kv_heads "
                      "(broadcast over dimension 1); kvq.cache_attend groups "
                      "consecutive query heads (h / group)");
      *group = srcType.getDimSize(2);
      *broadcast = true;
      shared = shared || !collapse.getSrc().hasOneUse();
      v = b.getInput();
      continue;
    }
    return failure();
  }
  return failure();
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
  // Backward: mask and scale, then the scores contraction.
  linalg::GenericOp mask;
  bool scaled = false;
  double scaleValue = 0;
  Operation *scaleOp = nullptr;
  Value s = x;
  linalg::GenericOp scores;
  for (int step = 0; step < 4; ++step) {
    auto g = s.getDefiningOp<linalg::GenericOp>();
    if (!g)
      break;
    double c = 0;
    if (isMulAddContraction(g)) {
      scores = g;
      break;
    }
    bool isScale = scalarOpWithConstant<arith::MulFOp>(g, &c) ||
                   scalarOpWithConstant<arith::DivFOp>(g, &c);
    bool isMask = !isScale && g.getNumDpsInputs() == 1 &&
                  isIdentityElementwise(g) &&
                  !g.getRegion().front().getOps<linalg::IndexOp>().empty();
    if (!isScale && !isMask)
      break;
    if (!g.getDpsInputs()[0].hasOneUse())
      return refuse(g.getLoc(), "not adopted: the attention scores are also "
                                "used outside the attention");
    if (isScale) {
      bool isDiv = bool(scalarOpWithConstant<arith::DivFOp>(g, &c));
      scaled = true;
      scaleValue = isDiv ? 1.0 / c : c;
      scaleOp = g;
    } else {
      mask = g;
    }
    s = g.getDpsInputs()[0];
  }
  if (!scores)
    return refuse(softmax->getLoc(), "not adopted: the softmax input is not "
                                     "a scaled q·k contraction");
  // Which contraction input is the key read?
  Write kw, vw;
  int64_t kGroup = 1, vGroup = 1;
  bool kBroadcast = false, vBroadcast = false;
  int keyInput = -1;
  for (int i = 0; i < 2; ++i) {
    FailureOr<Write> w =
        peelToRead(scores.getDpsInputs()[i], scores, &kGroup, &kBroadcast);
    if (succeeded(w)) {
      kw = *w;
      keyInput = i;
      break;
    }
    if (refusal)
      return failure();
  }
  if (keyInput < 0)
    return refuse(scores.getLoc(), "not adopted: neither operand of the "
                                   "scores contraction is a cache read");
  if (!startsAtZero(scores.getDpsInits()[0]))
    return refuse(scores.getLoc(), "not adopted: the scores contraction does "
                                   "not start from zero");
  auto maps = scores.getIndexingMapsArray();
  auto qDims = dimsOf(maps[1 - keyInput]), kDims = dimsOf(maps[keyInput]),
       sDims = dimsOf(maps[2]);
  if (!qDims || !kDims || !sDims || kDims->size() != 3)
    return refuse(scores.getLoc(), "not adopted: the scores contraction's "
                                   "indexing maps are not permutations");
  auto iters = scores.getIteratorTypesArray();
  unsigned c = (*kDims)[2], t = (*kDims)[0], hk = (*kDims)[1];
  if (iters[c] != utils::IteratorType::reduction)
    return refuse(scores.getLoc(), "not adopted: the scores contraction does "
                                   "not reduce over head_dim");
  // Queries: (n, hk, c) or (n, hk, g, c) in some order.
  SmallVector<unsigned> rest;
  for (unsigned d : *qDims)
    if (d != hk && d != c)
      rest.push_back(d);
  if (!llvm::is_contained(*qDims, hk) || !llvm::is_contained(*qDims, c) ||
      rest.empty() || rest.size() > 2 || llvm::is_contained(*qDims, t))
    return refuse(scores.getLoc(), "not adopted: the queries are not "
                                   "[tokens, heads, head_dim]");
  Attention a;
  a.k = kw;
  a.queries = scores.getDpsInputs()[1 - keyInput];
  a.queryOperand = scores.getDpsInputOperand(1 - keyInput);
  a.queryMap = maps[1 - keyInput];
  a.qHead = hk;
  a.qC = c;
  a.grouped = rest.size() == 2;
  if (a.grouped && kBroadcast)
    return refuse(scores.getLoc(), "not adopted: queries grouped twice");
  // In the grouped form the query dims are [.., kv_heads, group, ..]: the
  // dim right after hk in the query tensor is the group.
  if (a.grouped) {
    auto it = llvm::find(*qDims, hk);
    if (it + 1 == qDims->end() || llvm::is_contained(rest, *(it + 1)) == false)
      return refuse(scores.getLoc(), "not adopted: the query group dim does "
                                     "not follow the KV head dim");
    a.qGroup = *(it + 1);
    a.qN = rest[0] == a.qGroup ? rest[1] : rest[0];
  } else {
    a.qN = rest[0];
    a.qGroup = ~0u;
  }
  auto qType = cast<RankedTensorType>(a.queries.getType());
  if (!qType.getElementType().isF32())
    return refuse(scores.getLoc(), "not adopted: queries are not f32 "
                                   "(kvq.cache_attend takes f32 queries)");
  int64_t steps = qType.getDimSize(llvm::find(*qDims, a.qN) - qDims->begin());
  if (steps != kw.tokens)
    return refuse(scores.getLoc(), "not adopted: " + Twine(steps) +
                                       " queries for " + Twine(kw.tokens) +
                                       " written tokens");
  // Scores layout must put t where the softmax reduces.
  if (sDims->size() != rank || (*sDims)[tPos] != t)
    return refuse(softmax->getLoc(), "not adopted: the softmax is not over "
                                     "the cached positions");
  // Scale.
  int64_t hd = cast<RankedTensorType>(kw.data.getType()).getDimSize(2);
  if (!scaled || std::abs(scaleValue * std::sqrt(double(hd)) - 1.0) > 1e-6)
    return refuse(scaled ? scaleOp->getLoc() : scores.getLoc(),
                  "not adopted: scores are not scaled by 1/sqrt(head_dim) "
                  "before the softmax (kvq.cache_attend always is)");
  // Causal mask: masked(n, t) <=> t > pos + n.
  unsigned nPos = llvm::find(*sDims, a.qN) - sDims->begin();
  if (kw.tokens > 1 && !mask)
    return refuse(softmax->getLoc(), "not adopted: attention over several "
                                     "new tokens without a causal mask");
  if (mask) {
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t posv : {0, 1, 7, 130})
      for (int64_t n = 0; n < kw.tokens; ++n)
        for (int64_t tt = 0; tt < posv + kw.tokens; ++tt) {
          idx[nPos] = n;
          idx[tPos] = tt;
          std::optional<bool> m = evalMask(mask, idx, kw.pos, posv);
          if (!m || *m != (tt > posv + n))
            return refuse(mask.getLoc(),
                          "not adopted: the mask is not the causal mask "
                          "(position pos + n sees positions 0 .. pos + n)");
        }
  }
  // Forward: the weighted sum of values.
  Operation *user = singleUser(p);
  auto sum = dyn_cast_or_null<linalg::GenericOp>(user);
  if (!sum || !isMulAddContraction(sum))
    return refuse(softmax->getLoc(), "not adopted: the probabilities are not "
                                     "only summed with the values");
  int probInput = sum.getDpsInputs()[0] == p ? 0 : 1;
  FailureOr<Write> w =
      peelToRead(sum.getDpsInputs()[1 - probInput], sum, &vGroup, &vBroadcast);
  if (failed(w))
    return refusal ? failure()
                   : refuse(sum.getLoc(), "not adopted: the values are not a "
                                          "cache read");
  vw = *w;
  if (!startsAtZero(sum.getDpsInits()[0]))
    return refuse(sum.getLoc(), "not adopted: the weighted sum does not "
                                "start from zero");
  if (vBroadcast != kBroadcast || vGroup != kGroup)
    return refuse(sum.getLoc(), "not adopted: keys and values are grouped "
                                "differently");
  auto smaps = sum.getIndexingMapsArray();
  auto pDims = dimsOf(smaps[probInput]), vDims = dimsOf(smaps[1 - probInput]),
       oDims = dimsOf(smaps[2]);
  if (!pDims || !vDims || !oDims || vDims->size() != 3 || pDims->size() != rank)
    return refuse(sum.getLoc(), "not adopted: the weighted sum's indexing "
                                "maps are not permutations");
  // The same roles through the probabilities' layout.
  unsigned sHk = llvm::find(*sDims, hk) - sDims->begin();
  a.oN = (*pDims)[nPos];
  a.oHead = (*pDims)[sHk];
  unsigned oT = (*pDims)[tPos];
  if (a.grouped)
    a.oGroup = (*pDims)[llvm::find(*sDims, a.qGroup) - sDims->begin()];
  else
    a.oGroup = ~0u;
  if ((*vDims)[0] != oT || (*vDims)[1] != a.oHead ||
      sum.getIteratorTypesArray()[oT] != utils::IteratorType::reduction)
    return refuse(sum.getLoc(), "not adopted: the weighted sum does not "
                                "reduce the probabilities against the values "
                                "of the same heads");
  a.oC = (*vDims)[2];
  if (oDims->size() != (a.grouped ? 4u : 3u))
    return refuse(sum.getLoc(), "not adopted: unexpected attention output "
                                "rank");
  a.output = sum.getResult(0);
  a.outputMap = smaps[2];
  a.anchor = sum;
  a.v = vw;
  // K and V of one layer, written at one position.
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
  // Softmaxes: linalg.softmax, or its expansion rooted at a max reduction:
  // m = max_t x (from -inf), e = exp(x - m), z = sum_t e (from 0), p = e / z.
  SmallVector<
      std::tuple<Operation *, Value, Value, unsigned, unsigned, unsigned>>
      found;
  std::optional<Refusal> softmaxRefusal;
  func.walk([&](Operation *op) {
    if (auto sm = dyn_cast<linalg::SoftmaxOp>(op)) {
      found.push_back({op, sm.getInput(), sm.getResult()[0],
                       unsigned(sm.getDimension()),
                       unsigned(sm.getInputOperandType().getRank()), 1u});
      return;
    }
    auto maxR = dyn_cast<linalg::GenericOp>(op);
    if (!maxR || maxR.getNumReductionLoops() != 1 ||
        maxR.getNumDpsInputs() != 1 || !isReduction<arith::MaximumFOp>(maxR))
      return;
    Value x = maxR.getDpsInputs()[0];
    unsigned rank = cast<RankedTensorType>(x.getType()).getRank();
    auto notSoftmax = [&](Operation *at, const char *why) {
      if (!softmaxRefusal)
        softmaxRefusal =
            Refusal{at->getLoc(), std::string("not adopted: this is not a "
                                              "softmax: ") +
                                      why};
    };
    if (!isLastDimReduction(maxR, rank))
      return;
    FloatAttr init;
    auto fill = maxR.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
    if (!fill || !matchPattern(fill.getInputs()[0], m_Constant(&init)) ||
        !(init.getValue().isInfinity() && init.getValue().isNegative()))
      return notSoftmax(maxR, "the running max does not start at -inf");
    Value m = maxR.getResult(0);
    linalg::GenericOp expG;
    for (Operation *u : x.getUsers())
      if (auto g = dyn_cast<linalg::GenericOp>(u); g && g != maxR)
        expG = g;
    if (!expG || !m.hasOneUse() || *m.getUsers().begin() != expG ||
        !isExpOfDifference(expG, x, m, rank)) {
      // Say what is there: a max that feeds something else than one
      // exp(x - max) generic is a spelling kvq does not follow yet.
      Operation *user = m.hasOneUse() ? *m.getUsers().begin() : nullptr;
      if (!user || user == expG.getOperation())
        return notSoftmax(maxR, "the max is not subtracted before exp");
      if (!softmaxRefusal)
        softmaxRefusal = Refusal{
            user->getLoc(),
            ("not adopted: the softmax's max feeds '" +
             user->getName().getStringRef() +
             "'; kvq matches linalg.softmax and the max / exp(x - max) / sum "
             "/ divide form with the subtraction inside the exp's generic")
                .str()};
      return;
    }
    Value e = expG.getResult(0);
    linalg::GenericOp sumR, divG;
    for (Operation *u : e.getUsers()) {
      auto g = dyn_cast<linalg::GenericOp>(u);
      if (g && g.getNumDpsInputs() == 1 && isReduction<arith::AddFOp>(g))
        sumR = g;
      else if (g && g.getNumDpsInputs() == 2)
        divG = g;
    }
    if (!sumR || !divG || !e.hasNUses(2) || !isLastDimReduction(sumR, rank) ||
        !startsAtZero(sumR.getDpsInits()[0]))
      return notSoftmax(expG, "the exps are not summed from zero");
    Value z = sumR.getResult(0);
    if (!z.hasOneUse() || !isQuotient(divG, e, z, rank))
      return notSoftmax(divG, "the exps are not divided by their sum");
    found.push_back({op, x, divG.getResult(0), rank - 1, rank, 2u});
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
    int64_t kvh = type.getDimSize(type.getRank() - 2);
    int64_t d = type.getDimSize(type.getRank() - 1);
    if ((kvHeads && kvh != kvHeads) || (headDim && d != headDim) ||
        (elementType && elementType != type.getElementType()))
      return refuse(chain->arg.getLoc(), "not adopted: cache tensors of "
                                         "different shapes or types");
    kvHeads = kvh;
    headDim = d;
    elementType = type.getElementType();
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
    layers =
        cast<RankedTensorType>(chains.front()->arg.getType()).getDimSize(0);
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

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

/// `v` transposed so that its dims, now in the order `have`, come in the
/// order `want` (both lists of role ids).
Value permute(OpBuilder &b, Location loc, Value v, ArrayRef<unsigned> have,
              ArrayRef<unsigned> want) {
  SmallVector<int64_t> perm;
  for (unsigned role : want)
    perm.push_back(llvm::find(have, role) - have.begin());
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return v;
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
}

/// Runs the rewrite on `f` (already matched by `m`). preRopeKeys, when not
/// empty, holds each attention's key before its RoPE, written instead.
void rewriteFunction(FunctionMatcher &m, CacheType cacheType,
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
  for (Attention &a : m.attentions) {
    Location aloc = a.anchor->getLoc();
    b.setInsertionPoint(a.anchor);
    int64_t layer = a.k.chain->stacked ? a.k.layer : a.k.chain->perLayerIndex;
    auto layerAttr = b.getI64IntegerAttr(layer);
    // The runtime cache appends: the layer must hold exactly pos tokens.
    Type i64 = b.getI64Type();
    auto stats = CacheStatsOp::create(b, aloc, i64, i64, i64, b.getF64Type(),
                                      cache, layerAttr);
    Value pos = a.k.pos;
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
    Value keys = a.k.op.getSource();
    if (!preRopeKeys.empty()) {
      keys = preRopeKeys[&a - m.attentions.data()];
      auto from = cast<RankedTensorType>(keys.getType());
      Type el = cacheType.getElementType();
      if (from.getElementType() != el) {
        auto to = from.clone(el);
        keys = el.getIntOrFloatBitWidth() < from.getElementTypeBitWidth()
                   ? arith::TruncFOp::create(b, aloc, to, keys).getResult()
                   : arith::ExtFOp::create(b, aloc, to, keys).getResult();
      }
    }
    CacheUpdateOp::create(b, aloc, TypeRange{}, cache, layerAttr, keys,
                          a.v.op.getSource());
    // Queries as [steps, q_heads, head_dim].
    auto qDims = *dimsOf(a.queryMap);
    SmallVector<unsigned> qWant = {a.qN, a.qHead};
    if (a.grouped)
      qWant.push_back(a.qGroup);
    qWant.push_back(a.qC);
    Value q = permute(b, aloc, a.queryOperand->get(), qDims, qWant);
    if (a.grouped)
      q = tensor::CollapseShapeOp::create(
          b, aloc, q, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}});
    auto qType = cast<RankedTensorType>(q.getType());
    Value out = CacheAttendOp::create(b, aloc, qType, cache, layerAttr, q);
    // Back to the weighted sum's layout.
    auto oType = cast<RankedTensorType>(a.output.getType());
    auto oDims = *dimsOf(a.outputMap);
    SmallVector<unsigned> have = {a.oN, a.oHead};
    if (a.grouped) {
      have.push_back(a.oGroup);
      int64_t group =
          oType.getDimSize(llvm::find(oDims, a.oGroup) - oDims.begin());
      int64_t kvh = qType.getDimSize(1) / group;
      out = tensor::ExpandShapeOp::create(
          b, aloc,
          RankedTensorType::get(
              {qType.getDimSize(0), kvh, group, qType.getDimSize(2)},
              b.getF32Type()),
          out, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}});
    }
    have.push_back(a.oC);
    out = permute(b, aloc, out, have, oDims);
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
  if (failed(f.eraseArguments(dropArgs)))
    llvm_unreachable("erasing unused arguments cannot fail");
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), keptTypes));
}

/// @kv_cache_create / @kv_cache_destroy / @kv_cache_stats for the host.
void addHostHelpers(ModuleOp module, CacheType cacheType) {
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

struct QuantizeKvCachePass
    : public kvq::impl::KvqQuantizeKvCacheBase<QuantizeKvCachePass> {
  using KvqQuantizeKvCacheBase::KvqQuantizeKvCacheBase;
  friend struct mlir::kvq::CacheConfigOptions;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    CacheConfigOptions options = CacheConfigOptions::of(*this);
    if (!options.method)
      options.method = Method::Kivi;
    // The configuration for a cache of `headDim` channels, diagnosed at the
    // function adopted: without an explicit group-size, the default shrinks
    // to the largest divisor of head_dim not above it (small models have
    // head_dim < 32).
    auto configFor = [&](int64_t headDim,
                         Location loc) -> FailureOr<CacheConfigAttr> {
      FailureOr<CacheConfigAttr> config = applyCacheConfigOptions(
          CacheConfigAttr::getDefault(ctx, Method::Fp16), options, loc, kPass);
      if (failed(config) || options.groupSize ||
          headDim % config->getGroupSize() == 0)
        return config;
      CacheConfigOptions adjusted = options;
      int64_t group = config->getGroupSize();
      while (headDim % group != 0)
        --group;
      adjusted.groupSize = group;
      return applyCacheConfigOptions(
          CacheConfigAttr::getDefault(ctx, Method::Fp16), adjusted, loc, kPass);
    };
    // Options are checked before any graph is looked at: a bad option is an
    // error on every input, with a cache or without.
    if (failed(applyCacheConfigOptions(
            CacheConfigAttr::getDefault(ctx, Method::Fp16), options,
            module.getLoc(), kPass)))
      return signalPassFailure();
    std::optional<CacheType> cacheType;
    bool anyFailed = false;
    for (func::FuncOp f :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      if (f.isExternal())
        continue;
      FunctionMatcher m(f);
      if (failed(m.match())) {
        emitRemark(m.refusal->loc)
            << kPass << ": @" << f.getSymName() << ": " << m.refusal->reason;
        continue;
      }
      if (m.chains.empty())
        continue;
      if (!SymbolTable::symbolKnownUseEmpty(f, module)) {
        emitRemark(f.getLoc()) << kPass << ": @" << f.getSymName()
                               << ": not adopted: the function has callers "
                                  "in the module, whose cache arguments "
                                  "would change";
        continue;
      }
      auto emit = [&] { return emitError(f.getLoc()) << kPass << ": "; };
      FailureOr<CacheConfigAttr> fitted = configFor(m.headDim, f.getLoc());
      if (failed(fitted)) {
        anyFailed = true;
        continue;
      }
      // pre-rope: every layer's RoPE proven, all the same, or none used.
      SmallVector<Value> preRopeKeys;
      if (preRope) {
        std::optional<RopeMatch> first;
        for (Attention &a : m.attentions) {
          std::string why;
          Location where = a.k.op.getLoc();
          int64_t layer =
              a.k.chain->stacked ? a.k.layer : a.k.chain->perLayerIndex;
          auto chainType = cast<RankedTensorType>(a.k.chain->arg.getType());
          int64_t context = chainType.getDimSize(a.k.chain->stacked ? 1 : 0);
          FailureOr<RopeMatch> r =
              matchRope(a.k.op.getSource(), a.k.pos, context, why, where);
          if (succeeded(r) && first &&
              (r->theta != first->theta || r->style != first->style)) {
            why = "its RoPE differs from layer 0's";
            r = failure();
          }
          if (failed(r)) {
            emitRemark(where) << kPass << ": @" << f.getSymName() << ": layer "
                              << layer << ": keys stay post-RoPE: " << why;
            preRopeKeys.clear();
            first.reset();
            break;
          }
          first = *r;
          preRopeKeys.push_back(r->preRope);
        }
        if (first)
          *fitted =
              withRope(*fitted, RopeAttr::get(ctx, llvm::APFloat(first->theta),
                                              first->style));
      }
      CacheType type = CacheType::getChecked(emit, ctx, m.layers, m.kvHeads,
                                             m.headDim, m.elementType, *fitted);
      if (!type) {
        anyFailed = true;
        continue;
      }
      if (cacheType && *cacheType != type) {
        emitRemark(f.getLoc())
            << kPass << ": @" << f.getSymName()
            << ": not adopted: its cache has another shape than the one "
               "adopted first ("
            << *cacheType << ")";
        continue;
      }
      cacheType = type;
      rewriteFunction(m, type, preRopeKeys);
    }
    if (anyFailed)
      return signalPassFailure();
    if (cacheType)
      addHostHelpers(module, *cacheType);
  }
};

} // namespace
