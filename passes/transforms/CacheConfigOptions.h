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

#include <string>

namespace mlir::kvq {

/// The option values of a pass; empty strings and negative numbers mean
/// "not given" (keep the base configuration's value).
struct CacheConfigOptions {
  std::string method, residualMode;
  int64_t bits = -1, keyBits = -1, valueBits = -1, groupSize = -1;
  int64_t residualLength = -1, sinks = -1, lloydIters = -1;
  int64_t refitInterval = -1, kvquantSinks = -1, kvquantGroupSize = -1;
  double outlierFraction = -1.0;

  template <typename Pass> static CacheConfigOptions of(const Pass &p) {
    CacheConfigOptions o;
    o.method = p.method;
    o.residualMode = p.residualMode;
    o.bits = p.bits;
    o.keyBits = p.keyBits;
    o.valueBits = p.valueBits;
    o.groupSize = p.groupSize;
    o.residualLength = p.residualLength;
    o.sinks = p.sinks;
    o.lloydIters = p.lloydIters;
    o.refitInterval = p.refitInterval;
    o.kvquantSinks = p.kvquantSinks;
    o.kvquantGroupSize = p.kvquantGroupSize;
    o.outlierFraction = p.outlierFraction;
    return o;
  }
};

/// `base` with the given options applied: a given method restarts from that
/// method's defaults, then each given parameter overrides one field. Fails
/// with a diagnostic at `loc` (prefixed by `passName`) when the result is
/// not a valid configuration.
FailureOr<CacheConfigAttr> applyCacheConfigOptions(CacheConfigAttr base,
                                                   const CacheConfigOptions &o,
                                                   Location loc,
                                                   StringRef passName);

/// `config` with its `rope` parameter replaced.
CacheConfigAttr withRope(CacheConfigAttr config, RopeAttr rope);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_CACHECONFIGOPTIONS_H
