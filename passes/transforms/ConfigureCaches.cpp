//===- ConfigureCaches.cpp - set the config of every !kvq.cache -----------===//
//
// kvq-configure-caches: rewrites the #kvq.config of every !kvq.cache type in
// a module, so one graph compiles for every method.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::kvq {
#define GEN_PASS_DEF_KVQCONFIGURECACHES
#include "passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {
struct ConfigureCachesPass
    : public kvq::impl::KvqConfigureCachesBase<ConfigureCachesPass> {
  using KvqConfigureCachesBase::KvqConfigureCachesBase;

  void runOnOperation() override;

private:
  /// The configuration `old` becomes under the pass options, or failure
  /// (with a diagnostic at `loc`) when the options make it invalid.
  FailureOr<CacheType> reconfigure(CacheType old, Location loc);
};
} // namespace

/// Keeps `current` when an integer option was left at its -1 default.
static int64_t pick(int64_t option, int64_t current) {
  return option >= 0 ? option : current;
}

FailureOr<CacheType> ConfigureCachesPass::reconfigure(CacheType old,
                                                      Location loc) {
  MLIRContext *ctx = &getContext();
  CacheConfigAttr base = old.getConfig();
  if (!method.empty()) {
    std::optional<Method> parsed = symbolizeMethod(method);
    if (!parsed) {
      emitError(loc) << "kvq-configure-caches: unknown method '" << method
                     << "'; expected fp16, kivi, kivi_sink or kvquant";
      return failure();
    }
    base = CacheConfigAttr::getDefault(ctx, *parsed);
  }
  ResidualMode mode = base.getResidualMode();
  if (!residualMode.empty()) {
    std::optional<ResidualMode> parsed = symbolizeResidualMode(residualMode);
    if (!parsed) {
      emitError(loc) << "kvq-configure-caches: unknown residual-mode '"
                     << residualMode << "'; expected sliding or block";
      return failure();
    }
    mode = *parsed;
  }
  int64_t bothBits = pick(bits, -1);
  auto emit = [&] { return emitError(loc) << "kvq-configure-caches: "; };
  CacheConfigAttr config = CacheConfigAttr::getChecked(
      emit, ctx, base.getMethod(),
      pick(keyBits, pick(bothBits, base.getKeyBits())),
      pick(valueBits, pick(bothBits, base.getValueBits())),
      pick(groupSize, base.getGroupSize()),
      pick(residualLength, base.getResidualLength()), mode,
      pick(sinks, base.getNSinkTokens()),
      outlierFraction >= 0.0 ? llvm::APFloat(double(outlierFraction))
                             : base.getOutlierFraction(),
      pick(lloydIters, base.getLloydIters()),
      pick(refitInterval, base.getRefitInterval()),
      pick(kvquantSinks, base.getKvquantNSink()),
      pick(kvquantGroupSize, base.getKvquantGroupSize()));
  if (!config)
    return failure();
  CacheType updated =
      CacheType::getChecked(emit, ctx, old.getLayers(), old.getKvHeads(),
                            old.getHeadDim(), old.getElementType(), config);
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
