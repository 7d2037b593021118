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
  bool failedAny = false;
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](CacheType type) -> std::optional<Type> {
    auto [it, inserted] = rewritten.try_emplace(type, type);
    if (inserted) {
      FailureOr<CacheType> updated = reconfigure(type, module.getLoc());
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
