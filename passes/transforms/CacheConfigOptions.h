//===- CacheConfigOptions.h -------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Pass options that set a #kvq.config.
//
// kvq-configure-caches and kvq-quantize-kv-cache take the same options for
// a cache configuration; both turn them into a CacheConfigAttr here.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_CACHECONFIGOPTIONS_H
#define KVQ_PASSES_TRANSFORMS_CACHECONFIGOPTIONS_H

#include "kvq/dialect/KvqDialect.h"

#include <optional>

namespace mlir::kvq {

/// The options a pass was given (std::nullopt: not given, keep the base
/// configuration's value).
struct CacheConfigOptions {
  std::optional<Method> method;
  std::optional<ResidualMode> residualMode;
  std::optional<int64_t> bits, keyBits, valueBits, groupSize;
  std::optional<int64_t> residualLength, sinks, lloydIters;
  std::optional<int64_t> refitInterval, kvquantSinks, kvquantGroupSize;
  std::optional<double> outlierFraction;

  template <typename Pass> static CacheConfigOptions of(const Pass &p) {
    CacheConfigOptions o;
    o.method = p.method.getValue();
    o.residualMode = p.residualMode.getValue();
    o.bits = p.bits.getValue();
    o.keyBits = p.keyBits.getValue();
    o.valueBits = p.valueBits.getValue();
    o.groupSize = p.groupSize.getValue();
    o.residualLength = p.residualLength.getValue();
    o.sinks = p.sinks.getValue();
    o.lloydIters = p.lloydIters.getValue();
    o.refitInterval = p.refitInterval.getValue();
    o.kvquantSinks = p.kvquantSinks.getValue();
    o.kvquantGroupSize = p.kvquantGroupSize.getValue();
    o.outlierFraction = p.outlierFraction.getValue();
    return o;
  }
};

/// `base` with the given options applied: a given method restarts from that
/// method's defaults, then each given parameter overrides one field. Fails
/// with a diagnostic at `loc` (prefixed by `passName`) when the result is
/// not a valid configuration, or when bits are given for method fp16
/// (which stores fp16 whatever they say).
FailureOr<CacheConfigAttr> applyCacheConfigOptions(CacheConfigAttr base,
                                                   const CacheConfigOptions &o,
                                                   Location loc,
                                                   StringRef passName);

/// `config` with its `rope` parameter replaced.
CacheConfigAttr withRope(CacheConfigAttr config, RopeAttr rope);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_CACHECONFIGOPTIONS_H
