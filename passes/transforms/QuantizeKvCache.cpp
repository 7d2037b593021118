//===- QuantizeKvCache.cpp - find a model's KV cache, make it a !kvq.cache ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq-quantize-kv-cache. Per function, on a copy of it:
//  0. kvcache/MemrefState: state kept in memref arguments updated in place
//     read as tensors (threaded through the body, returned), or refused;
//  1. kvcache/Canonicalize: the frontends' spellings of one thing brought
//     to one (named ops generalized, repeat_kv, scatter and concat writes,
//     K/V stacked in one tensor split);
//  2. kvcache/AttentionMatcher: cache chains (a tensor argument written by
//     insert_slice and returned) and every attention over them, with each
//     fact kvq.cache_attend relies on proven (read = written prefix or a
//     hidden rest, causal mask, scale, head grouping), or one refusal;
//  3. kvcache/AttentionRewriter: the chains become one !kvq.cache argument,
//     writes kvq.cache_update, attentions kvq.cache_attend.
// Only an adopted copy replaces the function; every other function stays
// as it was, with one remark (emitted here) saying why. An adopted function
// on buffers takes its other buffers again (restoreBufferBoundary).
//
//===----------------------------------------------------------------------===//

#include "kvq/passes/Passes.h"
#include "passes/TosaInput.h"
#include "passes/transforms/CacheConfigOptions.h"
#include "passes/transforms/kvcache/BlockedSoftmax.h"
#include "passes/transforms/kvcache/AttentionMatcher.h"
#include "passes/transforms/kvcache/AttentionRewriter.h"
#include "passes/transforms/kvcache/Canonicalize.h"
#include "passes/transforms/kvcache/MemrefState.h"
#include "passes/transforms/kvcache/RopeMatcher.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/ScopeExit.h"

#include <cmath>

namespace mlir::kvq {
#define GEN_PASS_DEF_KVQQUANTIZEKVCACHE
#include "kvq/passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {

constexpr StringLiteral kPass = "kvq-quantize-kv-cache";


bool containsTosa(func::FuncOp f) {
  return f.walk([](Operation *op) {
            return isa_and_present<tosa::TosaDialect>(op->getDialect())
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          }).wasInterrupted();
}

struct QuantizeKvCachePass
    : public kvq::impl::KvqQuantizeKvCacheBase<QuantizeKvCachePass> {
  using KvqQuantizeKvCacheBase::KvqQuantizeKvCacheBase;
  friend struct mlir::kvq::CacheConfigOptions;

  void getDependentDialects(DialectRegistry &registry) const override {
    KvqQuantizeKvCacheBase::getDependentDialects(registry);
    // An adopted function on buffers reads and writes them back through it.
    registry.insert<bufferization::BufferizationDialect>();
    OpPassManager tosa(func::FuncOp::getOperationName());
    addTosaToLinalg(tosa);
    tosa.getDependentDialects(registry);
  }

  /// A copy of `f` with its TOSA converted to linalg (TosaInput.h), owned
  /// by the caller; failure, with a remark naming upstream's error, when
  /// the conversion fails.
  FailureOr<func::FuncOp> convertTosa(func::FuncOp f) {
    ModuleOp module = getOperation();
    auto copy = cast<func::FuncOp>(f->clone());
    // A dynamic pipeline runs on an op inside the pass's own.
    module.push_back(copy);
    std::string upstream;
    Location where = f.getLoc();
    LogicalResult converted = success();
    {
      ScopedDiagnosticHandler quiet(&getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error && upstream.empty()) {
          upstream = d.str();
          where = d.getLocation();
        }
        return success();
      });
      OpPassManager pm(func::FuncOp::getOperationName());
      addTosaToLinalg(pm);
      converted = runPipeline(pm, copy);
    }
    copy->remove();
    if (succeeded(converted)) {
      // The conversions leave dead reshapes (tosa.tile's) that would read
      // as other uses of a cache.
      IRRewriter rewriter(&getContext());
      (void)runRegionDCE(rewriter, copy->getRegions());
      return copy;
    }
    copy->erase();
    emitRemark(where) << kPass << ": @" << f.getSymName()
                      << ": not adopted: its TOSA does not convert to "
                              "linalg (upstream tosa-to-linalg: "
                           << upstream << ")";
    return failure();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
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
    if (maxContext < 0) {
      emitError(module.getLoc())
          << kPass << ": max-context must be 0 (off) or a number of "
          << "positions, got " << static_cast<int64_t>(maxContext);
      return signalPassFailure();
    }
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
      // The matcher reads a canonical copy (named linalg ops generalized);
      // a function that is not adopted keeps its own IR. When that copy is
      // refused, a second one with the caches reshaped (K and V stacked in
      // one tensor split into two, flattened heads split out) is tried.
      func::FuncOp original = f;
      if (std::optional<Refusal> state = globalStateRefusal(f)) {
        emitRemark(state->loc)
            << kPass << ": @" << f.getSymName() << ": " << state->reason;
        continue;
      }
      // A function in TOSA is matched (and, when adopted, replaced) as the
      // linalg upstream's conversions make of it.
      func::FuncOp source = original, converted;
      llvm::scope_exit dropConverted([&] {
        if (converted)
          converted->erase();
      });
      // State kept in memref arguments is matched in its tensor form
      // (MemrefState.h); the adopted function takes buffers again.
      SmallVector<BufferResult> bufferResults;
      bool onBuffers = holdsBufferState(original);
      if (onBuffers) {
        std::optional<Refusal> why;
        FailureOr<func::FuncOp> tensors =
            tensorizeBufferState(original, bufferResults, why);
        if (failed(tensors)) {
          emitRemark(why->loc)
              << kPass << ": @" << f.getSymName() << ": " << why->reason;
          continue;
        }
        source = converted = *tensors;
      } else if (containsTosa(original)) {
        FailureOr<func::FuncOp> linalg = convertTosa(original);
        if (failed(linalg))
          continue;
        source = converted = *linalg;
      }
      bool pairSplit = false;
      auto canonicalCopy = [&](bool reshapeCaches) {
        auto copy = cast<func::FuncOp>(source->clone());
        inlineCalls(copy, symbols);
        // Before the reshapes are taken back: a scatter into the heads
        // flattened with the positions ([1, H * S, D]) folds into a write
        // of the cache as passed in ([1, H, S, D]).
        foldScatterLoops(copy);
        stripCacheReshapes(copy);
        unrollLayerLoops(copy);
        generalizeForMatching(copy);
        raiseBlockedSoftmax(copy);
        expandGroupedHeadMaps(copy);
        detachSlotWrites(copy);
        splitScaledExps(copy);
        scatterWritesToInsertSlices(copy);
        // Both run: a K|V pair may also have its heads flattened.
        bool reshaped = false;
        if (reshapeCaches) {
          pairSplit = splitStackedPairs(copy);
          reshaped = unflattenHeads(copy) || pairSplit;
        }
        if (reshapeCaches && !reshaped) {
          copy->erase();
          return func::FuncOp();
        }
        return copy;
      };
      llvm::scope_exit discard([&] {
        if (f != original)
          f->erase();
      });
      std::optional<FunctionMatcher> matcher;
      std::optional<Refusal> refused;
      for (bool reshapeCaches : {false, true}) {
        func::FuncOp copy = canonicalCopy(reshapeCaches);
        if (!copy)
          break;
        if (f != original)
          f->erase();
        f = copy;
        matcher.reset();
        matcher.emplace(f);
        matcher->implicitPos = growConcatCaches(f, maxContext);
        matcher->implicitCapacity = maxContext;
        if (succeeded(matcher->match())) {
          refused.reset();
          break;
        }
        // The first copy's refusal, unless K and V were split: then the
        // split copy's speaks of them as the graph means them.
        if (!refused || pairSplit)
          refused = matcher->refusal;
      }
      if (refused) {
        emitRemark(refused->loc)
            << kPass << ": @" << f.getSymName() << ": " << refused->reason;
        continue;
      }
      FunctionMatcher &m = *matcher;
      if (m.chains.empty())
        continue;
      if (!SymbolTable::symbolKnownUseEmpty(original, module)) {
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
          int64_t context = a.k.chain->sizeOf(Role::Token);
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
      // On buffers, the results are counted as the tensor form has them
      // (before the caches' reshapes), as restoreBufferBoundary reads them.
      llvm::BitVector cacheResults(onBuffers ? bufferResults.size()
                                             : f.getNumResults());
      llvm::BitVector chainResults(f.getNumResults());
      for (auto &chain : m.chains)
        chainResults.set(chain->resultIndex);
      bool untagged = false;
      for (unsigned i = 0; i < f.getNumResults(); ++i) {
        int at = onBuffers ? tensorFormResult(f, i) : static_cast<int>(i);
        if (at >= 0 && chainResults.test(i))
          cacheResults.set(at);
        untagged |= at < 0 && !chainResults.test(i);
      }
      if (onBuffers)
        dropTensorFormResultTags(f);
      // A split result is a K|V pair whose halves are both caches (the
      // matcher refuses a cache-like value it does not adopt).
      assert(!untagged && "a split result that is not a cache");
      if (untagged) {
        emitError(f.getLoc())
            << kPass << ": @" << f.getSymName()
            << ": internal error: a split buffer result is not a cache";
        anyFailed = true;
        continue;
      }
      rewriteFunction(m, type, preRopeKeys);
      if (onBuffers)
        restoreBufferBoundary(f, bufferResults, cacheResults,
                              original.getFunctionType());
      for (const Refusal &assumed : m.assumptions)
        emitRemark(assumed.loc)
            << kPass << ": @" << f.getSymName() << ": " << assumed.reason;
      // The rewritten copy takes the original's place.
      module.getBody()->getOperations().insert(original->getIterator(), f);
      original->erase();
      original = f;
    }
    if (anyFailed)
      return signalPassFailure();
    if (cacheType)
      addHostHelpers(module, *cacheType);
  }
};

} // namespace
