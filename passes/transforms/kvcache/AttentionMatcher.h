//===- AttentionMatcher.h - a function's KV caches and attentions -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What the cache pass finds in a function (on its canonical copy): cache
// chains (a tensor argument written by insert_slice and returned), their
// writes and reads, and each attention over them with everything
// kvq.cache_attend relies on proven. The matcher changes nothing but the
// copy's spelling; a refusal names the op that blocks and the rule.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_ATTENTIONMATCHER_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_ATTENTIONMATCHER_H

#include "passes/transforms/kvcache/Layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::kvq {

/// Why a function was not adopted: the op to point at and the reason.
struct Refusal {
  Location loc;
  std::string reason;
};

/// The refusal of a function that keeps a cache-like tensor (floating
/// point, rank 3 or more) in module state it writes (`ml_program.global`,
/// `tosa.variable`) instead of passing it in and returning it; none when it
/// writes no such state.
std::optional<Refusal> globalStateRefusal(func::FuncOp f);

/// One tensor argument threaded through insert_slice writes to a return.
struct CacheChain {
  BlockArgument arg;
  unsigned resultIndex = 0;
  /// What each dimension holds, from the first write: exactly one Token
  /// (the dynamic offset), at most one Slot (the layer of stacked caches),
  /// Head (absent for one KV head), Channel, and Units.
  SmallVector<Role> roles;
  bool stacked = false; // has a Slot dimension
  SmallVector<tensor::InsertSliceOp> writes;
  SmallVector<tensor::ExtractSliceOp> reads;
  /// Layer of this chain when per-layer (its rank among K or V chains).
  int64_t perLayerIndex = -1;

  int64_t sizeOf(Role r) const {
    auto type = cast<RankedTensorType>(arg.getType());
    for (auto [i, role] : llvm::enumerate(roles))
      if (role == r)
        return type.getDimSize(i);
    return 1;
  }
};

struct Write {
  CacheChain *chain = nullptr;
  int64_t layer = 0;
  Value pos; // token offset written
  int64_t tokens = 0;
  Value data; // the written K/V, in the roles `dataRoles`
  Roles dataRoles;
  /// The write itself: the rewrite reads its source when it runs, since an
  /// earlier layer's rewrite may have replaced the value `data` was.
  tensor::InsertSliceOp op;
  /// Set on a read's copy: how many positions it reads (a constant, or a
  /// function of `pos`), and whether that is more than the written prefix
  /// `pos + tokens` (a static cache read whole, which a mask must hide).
  OpFoldResult readLength;
  bool pastPrefix = false;
  Operation *read = nullptr;

  std::optional<int64_t> readLengthAt(int64_t posValue) const;
};

/// A matched attention: what the rewrite needs.
struct Attention {
  Write k, v;
  OpOperand *queryOperand = nullptr; // read again at rewrite time
  Roles queryRoles;                  // of the query operand's dimensions
  int64_t qHeads = 0;
  /// Factor the queries are multiplied by so that kvq.cache_attend's
  /// 1/sqrt(head_dim) gives the graph's own scale.
  double queryFactor = 1.0;
  Value output;       // the weighted sum
  Roles outputRoles;  // of its dimensions
  Operation *anchor = nullptr; // the weighted-sum op
};

class FunctionMatcher {
public:
  explicit FunctionMatcher(func::FuncOp f) : func(f) {}

  /// Finds the chains and attentions; a refusal when something cache-like
  /// cannot be adopted. No cache at all: success with no chains.
  LogicalResult match();

  func::FuncOp func;
  std::vector<std::unique_ptr<CacheChain>> chains;
  std::vector<Attention> attentions;
  std::optional<Refusal> refusal;
  /// What an adoption takes on trust (a mask passed in as an argument),
  /// said in a remark when the function is rewritten.
  std::vector<Refusal> assumptions;
  /// The position argument growConcatCaches added to the matcher's copy
  /// (the caches' length before the step), or null.
  BlockArgument implicitPos;
  int64_t implicitCapacity = 0;
  int64_t kvHeads = 0, headDim = 0, layers = 0;
  Type elementType;

private:
  LogicalResult refuse(Location loc, const Twine &why) {
    refusal = Refusal{loc, why.str()};
    return failure();
  }
  LogicalResult findChains();
  LogicalResult describeWrite(CacheChain &chain, tensor::InsertSliceOp w);
  FailureOr<Write> describeRead(tensor::ExtractSliceOp read, Roles &roles);
  FailureOr<std::pair<Write, Roles>> traceCacheOperand(Value operand,
                                                       Operation *user);
  LogicalResult matchAround(Operation *softmax, Value x, Value p, unsigned tPos,
                            unsigned rank, unsigned xUses);
  FailureOr<double>
  checkScaleAndMask(Operation *softmax, Value x, Value scores,
                    const Roles &roles, const Write &kw,
                    ArrayRef<std::pair<Operation *, unsigned>> between);
  DenseMap<Operation *, Write> writeOf; // insert_slice -> its description
  DenseMap<Operation *, CacheChain *> chainOfRead;
  llvm::SmallPtrSet<Operation *, 16> adoptedReads;
};

} // namespace mlir::kvq

#endif
