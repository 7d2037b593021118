//===- CacheConfigOptions.cpp - pass options that set a #kvq.config -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "passes/transforms/CacheConfigOptions.h"

using namespace mlir;
using namespace mlir::kvq;

FailureOr<CacheConfigAttr>
mlir::kvq::applyCacheConfigOptions(CacheConfigAttr base,
                                   const CacheConfigOptions &o, Location loc,
                                   StringRef passName) {
  MLIRContext *ctx = loc.getContext();
  // The RoPE says what the keys arriving at the cache are (pre- or
  // post-rotation), a fact of the graph, not a quantization choice: it
  // survives a change of method.
  RopeAttr rope = base.getRope();
  if (o.method)
    base = CacheConfigAttr::getDefault(ctx, *o.method);
  auto emit = [&] { return emitError(loc) << passName << ": "; };
  if (base.getMethod() == Method::Fp16 &&
      (o.bits || o.keyBits || o.valueBits)) {
    emit() << "bits, key-bits and value-bits do not apply to method fp16 "
              "(it stores fp16 K/V)";
    return failure();
  }
  CacheConfigAttr config = CacheConfigAttr::getChecked(
      emit, ctx, base.getMethod(),
      o.keyBits.value_or(o.bits.value_or(base.getKeyBits())),
      o.valueBits.value_or(o.bits.value_or(base.getValueBits())),
      o.groupSize.value_or(base.getGroupSize()),
      o.residualLength.value_or(base.getResidualLength()),
      o.residualMode.value_or(base.getResidualMode()),
      o.sinks ? o.sinks : base.getNSinkTokens(),
      o.outlierFraction ? llvm::APFloat(*o.outlierFraction)
                        : base.getOutlierFraction(),
      o.lloydIters.value_or(base.getLloydIters()),
      o.refitInterval.value_or(base.getRefitInterval()),
      o.kvquantSinks.value_or(base.getKvquantNSink()),
      o.kvquantGroupSize.value_or(base.getKvquantGroupSize()), rope);
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
