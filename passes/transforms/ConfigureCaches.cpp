//===- ConfigureCaches.cpp - set the config of every !kvq.cache -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq-configure-caches: rewrites the #kvq.config of every !kvq.cache type in
// a module, so one graph compiles for every method.
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"
#include "passes/transforms/CacheConfigOptions.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::kvq {
#define GEN_PASS_DEF_KVQCONFIGURECACHES
#include "kvq/passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {
struct ConfigureCachesPass
    : public kvq::impl::KvqConfigureCachesBase<ConfigureCachesPass> {
  using KvqConfigureCachesBase::KvqConfigureCachesBase;
  friend struct mlir::kvq::CacheConfigOptions;

  void runOnOperation() override;

private:
  /// The configuration `old` becomes under the pass options, or failure
  /// (with a diagnostic at `loc`) when the options make it invalid.
  FailureOr<CacheType> reconfigure(CacheType old, Location loc);
};
} // namespace

FailureOr<CacheType> ConfigureCachesPass::reconfigure(CacheType old,
                                                      Location loc) {
  FailureOr<CacheConfigAttr> config =
      applyCacheConfigOptions(old.getConfig(), CacheConfigOptions::of(*this),
                              loc, "kvq-configure-caches");
  if (failed(config))
    return failure();
  MLIRContext *ctx = &getContext();
  auto emit = [&] { return emitError(loc) << "kvq-configure-caches: "; };
  CacheType updated =
      CacheType::getChecked(emit, ctx, old.getLayers(), old.getKvHeads(),
                            old.getHeadDim(), old.getElementType(), *config);
  if (!updated)
    return failure();
  return updated;
}

void ConfigureCachesPass::runOnOperation() {
  ModuleOp module = getOperation();
  // Each distinct cache type is reconfigured once; the replacer then swaps
  // it everywhere it appears (signatures, block arguments, results).
  llvm::DenseMap<Type, Type> rewritten;
  // Diagnostics point at the first op that uses a cache type (its operands,
  // results or, for a function, its signature).
  llvm::DenseMap<Type, Location> firstUse;
  module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    auto note = [&](Type t) {
      t.walk([&](CacheType c) { firstUse.try_emplace(c, op->getLoc()); });
    };
    if (auto f = dyn_cast<FunctionOpInterface>(op))
      note(f.getFunctionType());
    for (Type t : op->getOperandTypes())
      note(t);
    for (Type t : op->getResultTypes())
      note(t);
  });
  bool failedAny = false;
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](CacheType type) -> std::optional<Type> {
    auto [it, inserted] = rewritten.try_emplace(type, type);
    if (inserted) {
      auto use = firstUse.find(type);
      FailureOr<CacheType> updated = reconfigure(
          type, use != firstUse.end() ? use->second : module.getLoc());
      if (failed(updated))
        failedAny = true;
      else
        it->second = *updated;
    }
    return it->second;
  });
  replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
  if (failedAny)
    signalPassFailure();
}
