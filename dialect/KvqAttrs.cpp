//===- KvqAttrs.cpp - kvq attribute verification and defaults -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache configuration's defaults and verifiers: the runtime's rules of
// kvq/config_rules.h, with their messages, on the values the lowering
// passes. Shape-dependent rules (group size vs head_dim) run on !kvq.cache,
// which knows the shape.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFields.h"

using namespace mlir;
using namespace mlir::kvq;

bool CacheConfigAttr::isSupportedBits(int64_t bits) {
  return ::kvq::isSupportedBits(bits);
}

CacheConfigAttr CacheConfigAttr::getDefault(MLIRContext *context,
                                            Method method) {
  namespace kq = ::kvq;
  int64_t bits = method == Method::KVQuant ? kq::kDefaultKvquantBits
                                           : kq::kDefaultKiviBits;
  if (method == Method::Fp16)
    bits = kq::kFp16Bits;
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
  // The runtime's rule and message for the f32 the lowering passes;
  // head_dim is checked on !kvq.cache.
  ::kvq::ConfigVerdict verdict =
      ::kvq::checkRopeTheta(static_cast<float>(theta.convertToDouble()));
  if (verdict.failed())
    return emitError() << verdict.message;
  return success();
}

// The dialect's enums carry the runtime's C enum values: the verifiers
// below and the lowering (KvqToRuntime.cpp) pass them on unchanged.
static_assert(static_cast<int>(Method::Fp16) == KVQ_METHOD_FP16 &&
                  static_cast<int>(Method::Kivi) == KVQ_METHOD_KIVI &&
                  static_cast<int>(Method::KiviSink) == KVQ_METHOD_KIVI_SINK &&
                  static_cast<int>(Method::KVQuant) == KVQ_METHOD_KVQUANT,
              "Method (KvqAttrs.td) and kvq_method (runtime.h) differ");
static_assert(static_cast<int>(ResidualMode::Sliding) == KVQ_RESIDUAL_SLIDING &&
                  static_cast<int>(ResidualMode::Block) == KVQ_RESIDUAL_BLOCK,
              "ResidualMode (KvqAttrs.td) and kvq_residual_mode differ");
static_assert(static_cast<int>(RopeStyle::Interleaved) ==
                      KVQ_ROPE_INTERLEAVED &&
                  static_cast<int>(RopeStyle::Half) == KVQ_ROPE_HALF,
              "RopeStyle (KvqAttrs.td) and kvq_rope_style (runtime.h) differ");
static_assert(static_cast<int>(QuantAxis::PerToken) == KVQ_AXIS_PER_TOKEN &&
                  static_cast<int>(QuantAxis::PerChannel) ==
                      KVQ_AXIS_PER_CHANNEL,
              "QuantAxis (KvqAttrs.td) and kvq_axis (runtime.h) differ");

/// The kvq_config fields of a configuration's parameters, as the lowering
/// passes them.
static ::kvq::ConfigFields
runtimeFieldsOf(Method method, int64_t keyBits, int64_t valueBits,
                int64_t groupSize, int64_t residualLength,
                ResidualMode residualMode, int64_t nSinkTokens,
                const llvm::APFloat &outlierFraction, int64_t lloydIters,
                int64_t refitInterval, int64_t kvquantNSink,
                int64_t kvquantGroupSize, RopeAttr rope) {
  ::kvq::ConfigFields fields;
  fields.method = static_cast<int64_t>(method);
  fields.key_bits = keyBits;
  fields.value_bits = valueBits;
  fields.group_size = groupSize;
  fields.residual_length = residualLength;
  fields.residual_mode = static_cast<int64_t>(residualMode);
  fields.n_sink_tokens = nSinkTokens;
  fields.outlier_fraction =
      static_cast<float>(outlierFraction.convertToDouble());
  fields.lloyd_iters = lloydIters;
  fields.refit_interval = refitInterval;
  fields.kvquant_n_sink = kvquantNSink;
  fields.kvquant_group_size = kvquantGroupSize;
  fields.rope_style = rope ? static_cast<int64_t>(rope.getStyle())
                           : static_cast<int64_t>(KVQ_ROPE_NONE);
  fields.rope_theta = rope ? static_cast<float>(rope.getThetaValue())
                           : ::kvq::kDefaultRopeTheta;
  return fields;
}

/// n_sink_tokens as the runtime receives it: the value given, else what
/// kvq_config_init sets.
static int64_t sinkTokensOf(Method method, std::optional<int64_t> given) {
  if (given)
    return *given;
  return method == Method::KiviSink ? ::kvq::kDefaultKiviSinkTokens : 0;
}

int64_t CacheConfigAttr::getSinkTokens() const {
  return sinkTokensOf(getMethod(), getNSinkTokens());
}

::kvq::ConfigFields mlir::kvq::runtimeFields(CacheConfigAttr c) {
  return runtimeFieldsOf(
      c.getMethod(), c.getKeyBits(), c.getValueBits(), c.getGroupSize(),
      c.getResidualLength(), c.getResidualMode(), c.getSinkTokens(),
      c.getOutlierFraction(), c.getLloydIters(), c.getRefitInterval(),
      c.getKvquantNSink(), c.getKvquantGroupSize(), c.getRope());
}

LogicalResult CacheConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, Method method,
    int64_t keyBits, int64_t valueBits, int64_t groupSize,
    int64_t residualLength, ResidualMode residualMode,
    std::optional<int64_t> nSinkTokens, llvm::APFloat outlierFraction,
    int64_t lloydIters, int64_t refitInterval, int64_t kvquantNSink,
    int64_t kvquantGroupSize, RopeAttr rope) {
  // key_bits and value_bits are optional with the value fp16 implies
  // (kvq::kFp16Bits); a quantized method left without them meets the
  // runtime's rule for that width, whose message says so.
  // The runtime's rules and messages (kvq/config_rules.h) on what the
  // lowering would pass; those that need the shape run on !kvq.cache.
  ::kvq::ConfigVerdict verdict = ::kvq::checkConfigFields(runtimeFieldsOf(
      method, keyBits, valueBits, groupSize, residualLength, residualMode,
      sinkTokensOf(method, nSinkTokens), outlierFraction, lloydIters,
      refitInterval, kvquantNSink, kvquantGroupSize, rope));
  if (verdict.failed())
    return emitError() << verdict.message;
  return success();
}
