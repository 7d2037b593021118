//===- CacheConfigOptions.cpp - pass options that set a #kvq.config -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "passes/transforms/CacheConfigOptions.h"

using namespace mlir;
using namespace mlir::kvq;

/// Keeps `current` when an integer option was not given.
static int64_t pick(int64_t option, int64_t current) {
  return option >= 0 ? option : current;
}

FailureOr<CacheConfigAttr>
mlir::kvq::applyCacheConfigOptions(CacheConfigAttr base,
                                   const CacheConfigOptions &o, Location loc,
                                   StringRef passName) {
  MLIRContext *ctx = loc.getContext();
  // The RoPE says what the keys arriving at the cache are (pre- or
  // post-rotation), a fact of the graph, not a quantization choice: it
  // survives a change of method.
  RopeAttr rope = base.getRope();
  if (!o.method.empty()) {
    std::optional<Method> parsed = symbolizeMethod(o.method);
    if (!parsed) {
      emitError(loc) << passName << ": unknown method '" << o.method
                     << "'; expected fp16, kivi, kivi_sink or kvquant";
      return failure();
    }
    base = CacheConfigAttr::getDefault(ctx, *parsed);
  }
  ResidualMode mode = base.getResidualMode();
  if (!o.residualMode.empty()) {
    std::optional<ResidualMode> parsed = symbolizeResidualMode(o.residualMode);
    if (!parsed) {
      emitError(loc) << passName << ": unknown residual-mode '"
                     << o.residualMode << "'; expected sliding or block";
      return failure();
    }
    mode = *parsed;
  }
  auto emit = [&] { return emitError(loc) << passName << ": "; };
  CacheConfigAttr config = CacheConfigAttr::getChecked(
      emit, ctx, base.getMethod(),
      pick(o.keyBits, pick(o.bits, base.getKeyBits())),
      pick(o.valueBits, pick(o.bits, base.getValueBits())),
      pick(o.groupSize, base.getGroupSize()),
      pick(o.residualLength, base.getResidualLength()), mode,
      o.sinks >= 0 ? std::optional<int64_t>(o.sinks) : base.getNSinkTokens(),
      o.outlierFraction >= 0.0 ? llvm::APFloat(o.outlierFraction)
                               : base.getOutlierFraction(),
      pick(o.lloydIters, base.getLloydIters()),
      pick(o.refitInterval, base.getRefitInterval()),
      pick(o.kvquantSinks, base.getKvquantNSink()),
      pick(o.kvquantGroupSize, base.getKvquantGroupSize()), rope);
  if (!config)
    return failure();
  return config;
}

CacheConfigAttr mlir::kvq::withRope(CacheConfigAttr c, RopeAttr rope) {
  return CacheConfigAttr::get(
      c.getContext(), c.getMethod(), c.getKeyBits(), c.getValueBits(),
      c.getGroupSize(), c.getResidualLength(), c.getResidualMode(),
      c.getNSinkTokens(), c.getOutlierFraction(), c.getLloydIters(),
      c.getRefitInterval(), c.getKvquantNSink(), c.getKvquantGroupSize(), rope);
}
