//===- KvqAttrs.cpp - kvq attribute verification and defaults -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache configuration's invariants: supported bit widths, positive
// sizes, the outlier fraction's range. Shape-dependent rules (group size vs
// head_dim) live on !kvq.cache, which knows the shape.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"

#include "kvq/config_limits.h"

using namespace mlir;
using namespace mlir::kvq;

bool CacheConfigAttr::isSupportedBits(int64_t bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

CacheConfigAttr CacheConfigAttr::getDefault(MLIRContext *context,
                                            Method method) {
  namespace kq = ::kvq;
  int64_t bits = method == Method::KVQuant ? kq::kDefaultKvquantBits
                                           : kq::kDefaultKiviBits;
  if (method == Method::Fp16)
    bits = 16;
  return CacheConfigAttr::get(
      context, method, bits, bits, kq::kDefaultGroupSize,
      kq::kDefaultResidualLength, ResidualMode::Sliding,
      /*n_sink_tokens=*/std::nullopt,
      llvm::APFloat(kq::kDefaultOutlierFraction), kq::kDefaultLloydIters,
      kq::kDefaultRefitInterval, kq::kDefaultKvquantNSink,
      kq::kKvquantGroupSize, /*rope=*/RopeAttr());
}

LogicalResult RopeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               llvm::APFloat theta, RopeStyle) {
  // The runtime's rule and message; head_dim is checked on !kvq.cache.
  if (const char *why = ::kvq::ropeRule(theta.convertToDouble(), 2))
    return emitError() << why << ", got " << theta.convertToDouble();
  return success();
}

int64_t CacheConfigAttr::getSinkTokens() const {
  if (std::optional<int64_t> given = getNSinkTokens())
    return *given;
  return getMethod() == Method::KiviSink ? ::kvq::kDefaultKiviSinkTokens : 0;
}

LogicalResult CacheConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, Method method,
    int64_t keyBits, int64_t valueBits, int64_t groupSize,
    int64_t residualLength, ResidualMode residualMode,
    std::optional<int64_t> nSinkTokensGiven, llvm::APFloat outlierFractionValue,
    int64_t lloydIters, int64_t refitInterval, int64_t kvquantNSink,
    int64_t kvquantGroupSize, RopeAttr) {
  if (method != Method::Fp16) {
    for (auto [name, bits] :
         {std::pair<StringRef, int64_t>{"key_bits", keyBits},
          {"value_bits", valueBits}})
      if (!isSupportedBits(bits))
        return emitError() << "unsupported " << name << " " << bits
                           << "; supported bit widths are 2, 3, 4 and 8";
  }
  auto positive = [&](StringRef name, int64_t value) -> LogicalResult {
    if (value > 0)
      return success();
    return emitError() << name << " must be positive, got " << value;
  };
  auto nonNegative = [&](StringRef name, int64_t value) -> LogicalResult {
    if (value >= 0)
      return success();
    return emitError() << name << " must be non-negative, got " << value;
  };
  // Upper bounds are the runtime's (kvq/config_limits.h): what verifies
  // here is created there, and fits the i32 fields of the C ABI.
  auto atMost = [&](StringRef name, int64_t value,
                    int64_t bound) -> LogicalResult {
    if (value <= bound)
      return success();
    return emitError() << name << " " << value << " exceeds the runtime's "
                       << "limit of " << bound;
  };
  namespace limits = ::kvq::limits;
  const int64_t nSinkTokens = nSinkTokensGiven.value_or(0);
  if (failed(atMost("group_size", groupSize, limits::kHeadDim)) ||
      failed(atMost("residual_length", residualLength, limits::kWaitTokens)) ||
      failed(atMost("n_sink_tokens", nSinkTokens, limits::kSinkTokens)) ||
      failed(atMost("lloyd_iters", lloydIters, limits::kLloydIters)) ||
      failed(atMost("refit_interval", refitInterval, limits::kWaitTokens)) ||
      failed(atMost("kvquant_n_sink", kvquantNSink, limits::kSinkTokens)))
    return failure();
  if (failed(positive("group_size", groupSize)) ||
      failed(nonNegative("residual_length", residualLength)) ||
      failed(nonNegative("n_sink_tokens", nSinkTokens)) ||
      failed(nonNegative("lloyd_iters", lloydIters)) ||
      failed(nonNegative("refit_interval", refitInterval)) ||
      failed(nonNegative("kvquant_n_sink", kvquantNSink)) ||
      failed(positive("kvquant_group_size", kvquantGroupSize)))
    return failure();
  double outlierFraction = outlierFractionValue.convertToDouble();
  if (!(outlierFraction >= 0.0 && outlierFraction < 1.0))
    return emitError() << "outlier_fraction " << outlierFraction
                       << " is outside [0, 1)";
  if (residualMode == ResidualMode::Block &&
      (residualLength == 0 || residualLength % groupSize != 0))
    return emitError() << "residual_mode block flushes residual_length ("
                       << residualLength
                       << ") keys at a time, which must be a positive "
                          "multiple of group_size ("
                       << groupSize << ")";
  // The runtime's rule, with its message (kvq/config_limits.h).
  if (method == Method::Kivi)
    if (const char *why = ::kvq::plainKiviSinkTokensRule(nSinkTokens))
      return emitError() << "n_sink_tokens = " << nSinkTokens << " " << why;
  // The runtime fits key levels per channel over the whole prefill and
  // value levels per token over head_dim, so a group size would change
  // nothing; accepting other values would suggest otherwise.
  if (kvquantGroupSize != ::kvq::kKvquantGroupSize)
    return emitError() << "kvquant_group_size " << kvquantGroupSize
                       << " has no effect in kvq (key levels are fit per "
                          "channel over the prefill, value levels per token "
                          "over head_dim); leave it at "
                       << ::kvq::kKvquantGroupSize;
  return success();
}
