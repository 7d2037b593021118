//===- config_rules.h - rules of a kvq cache configuration -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every rule a cache configuration must satisfy, written once, with its one
// message. kvq_config_validate (runtime/api/config.cpp) and the dialect's
// verifiers (#kvq.rope, #kvq.config, !kvq.cache) call these functions and
// print the message they return, so the dialect rejects exactly what the
// runtime rejects, with the same words (test/unit/dialect/
// ConfigRulesAgreeTest.cpp checks it over a grid of configurations).
//
// Dependency-free (the C header runtime.h and config_limits.h only). Rules
// that need no shape come first and the shape's rules after, in that order
// everywhere: the dialect verifies #kvq.config before it knows the
// !kvq.cache shape, and the first rule broken is the one reported.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_CONFIG_RULES_H
#define KVQ_CONFIG_RULES_H

#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>

namespace kvq {

/// The code widths the runtime stores (2, 3, 4, 8).
inline bool isSupportedBits(long long bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

/// A configuration as the runtime receives it: the fields of kvq_config
/// but the shape, the backend and the allocator. Integers are widened so
/// that the dialect's i64 parameters arrive unchanged; the two floats are
/// what the C ABI carries (the dialect rounds its doubles as the lowering
/// does, so both sides judge the same value).
struct ConfigFields {
  int64_t method = KVQ_METHOD_FP16;
  int64_t keyBits = 0, valueBits = 0;
  int64_t groupSize = 0, residualLength = 0;
  int64_t residualMode = KVQ_RESIDUAL_SLIDING;
  int64_t nSinkTokens = 0;
  float outlierFraction = 0.0f;
  int64_t lloydIters = 0, refitInterval = 0, kvquantNSink = 0;
  int64_t kvquantGroupSize = 0;
  int64_t ropeStyle = KVQ_ROPE_NONE;
  float ropeTheta = 0.0f;
};

/// The shape of a cache (kvq_config's num_layers, num_kv_heads, head_dim;
/// !kvq.cache's layers, kv_heads, head_dim).
struct CacheShape {
  int64_t numLayers = 0, numKvHeads = 0, headDim = 0;
};

/// The verdict of a rule: KVQ_OK, or the status kvq_config_validate returns
/// and the one message every checker prints.
struct ConfigVerdict {
  kvq_status status = KVQ_OK;
  char message[256] = "";

  bool failed() const { return status != KVQ_OK; }
};

namespace detail {
/// A refusal with a printf-formatted message.
template <typename... Args>
ConfigVerdict refuse(kvq_status status, const char *format, Args... args) {
  ConfigVerdict verdict;
  verdict.status = status;
  std::snprintf(verdict.message, sizeof(verdict.message), format, args...);
  return verdict;
}

/// value must be >= 0 and <= bound.
inline ConfigVerdict inRange(const char *field, int64_t value, int64_t bound) {
  if (value < 0)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "%s %lld must be non-negative",
                  field, static_cast<long long>(value));
  if (value > bound)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "%s %lld exceeds the limit of %lld",
                  field, static_cast<long long>(value),
                  static_cast<long long>(bound));
  return {};
}

/// value must be > 0 and <= bound.
inline ConfigVerdict positive(const char *field, int64_t value, int64_t bound) {
  if (value <= 0)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "%s %lld must be positive", field,
                  static_cast<long long>(value));
  return inRange(field, value, bound);
}
} // namespace detail

/// A RoPE cache's theta (ropeRule), alone: the dialect checks it on #kvq.rope.
inline ConfigVerdict checkRopeTheta(float theta) {
  if (const char *why = ropeRule(theta, /*headDim=*/2))
    return detail::refuse(KVQ_ERR_INVALID_ARGUMENT, "%s, got %g", why,
                          static_cast<double>(theta));
  return {};
}

/// The rules that need no shape, in the order they are checked. A method
/// is judged only on the fields it reads.
inline ConfigVerdict checkConfigFields(const ConfigFields &c) {
  using detail::refuse;
  if (c.method < KVQ_METHOD_FP16 || c.method > KVQ_METHOD_KVQUANT)
    return refuse(KVQ_ERR_UNKNOWN_METHOD, "unknown method %lld",
                  static_cast<long long>(c.method));
  if (c.ropeStyle < KVQ_ROPE_NONE || c.ropeStyle > KVQ_ROPE_HALF)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "unknown rope_style %lld",
                  static_cast<long long>(c.ropeStyle));
  if (c.ropeStyle != KVQ_ROPE_NONE)
    if (ConfigVerdict v = checkRopeTheta(c.ropeTheta); v.failed())
      return v;
  // kvq_config's fields are int32: a wider value (only the dialect can hold
  // one) would reach the runtime truncated, so it is refused for every
  // method, read or not.
  const struct {
    const char *name;
    int64_t value;
  } ints[] = {{"key_bits", c.keyBits},
              {"value_bits", c.valueBits},
              {"group_size", c.groupSize},
              {"residual_length", c.residualLength},
              {"n_sink_tokens", c.nSinkTokens},
              {"lloyd_iters", c.lloydIters},
              {"refit_interval", c.refitInterval},
              {"kvquant_n_sink", c.kvquantNSink},
              {"kvquant_group_size", c.kvquantGroupSize}};
  for (const auto &field : ints)
    if (field.value < INT32_MIN || field.value > INT32_MAX)
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "%s %lld does not fit the int32 field of kvq_config",
                    field.name, static_cast<long long>(field.value));
  if (c.method == KVQ_METHOD_FP16)
    return {}; // the quantization fields are unused
  for (const auto &[name, bits] :
       {std::pair<const char *, int64_t>{"key_bits", c.keyBits},
        {"value_bits", c.valueBits}})
    if (!isSupportedBits(bits))
      return refuse(KVQ_ERR_UNSUPPORTED_BITS,
                    "unsupported %s %lld; supported bit widths are 2, 3, 4 "
                    "and 8",
                    name, static_cast<long long>(bits));
  if (c.method == KVQ_METHOD_KVQUANT) {
    if (!(c.outlierFraction >= 0.0f && c.outlierFraction < 1.0f))
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "outlier_fraction %g is not in [0, 1)",
                    static_cast<double>(c.outlierFraction));
    for (ConfigVerdict v :
         {detail::inRange("lloyd_iters", c.lloydIters, limits::kLloydIters),
          detail::inRange("refit_interval", c.refitInterval,
                          limits::kWaitTokens),
          detail::inRange("kvquant_n_sink", c.kvquantNSink,
                          limits::kSinkTokens)})
      if (v.failed())
        return v;
    // Key levels are fit per channel over the whole prefill and value
    // levels per token over head_dim, so a group size would change
    // nothing; accepting other values would suggest otherwise.
    if (c.kvquantGroupSize != kKvquantGroupSize)
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "kvquant_group_size %lld has no effect in kvq (key levels "
                    "are fit per channel over the prefill, value levels per "
                    "token over head_dim); leave it at %d",
                    static_cast<long long>(c.kvquantGroupSize),
                    kKvquantGroupSize);
    return {};
  }
  // kivi / kivi_sink
  if (c.groupSize <= 0)
    return refuse(KVQ_ERR_BAD_GROUP_SIZE, "group_size %lld must be positive",
                  static_cast<long long>(c.groupSize));
  if (ConfigVerdict v = detail::inRange("residual_length", c.residualLength,
                                        limits::kWaitTokens);
      v.failed())
    return v;
  if (c.residualMode != KVQ_RESIDUAL_SLIDING &&
      c.residualMode != KVQ_RESIDUAL_BLOCK)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "unknown residual_mode %lld",
                  static_cast<long long>(c.residualMode));
  if (c.residualMode == KVQ_RESIDUAL_BLOCK &&
      (c.residualLength == 0 || c.residualLength % c.groupSize != 0))
    return refuse(KVQ_ERR_BAD_GROUP_SIZE,
                  "residual_mode block flushes residual_length (%lld) keys at "
                  "a time, which must be a positive multiple of group_size "
                  "(%lld)",
                  static_cast<long long>(c.residualLength),
                  static_cast<long long>(c.groupSize));
  if (ConfigVerdict v =
          detail::inRange("n_sink_tokens", c.nSinkTokens, limits::kSinkTokens);
      v.failed())
    return v;
  if (c.method == KVQ_METHOD_KIVI)
    if (const char *why = plainKiviSinkTokensRule(c.nSinkTokens))
      return refuse(KVQ_ERR_INVALID_ARGUMENT, "n_sink_tokens = %lld %s",
                    static_cast<long long>(c.nSinkTokens), why);
  return {};
}

/// The rules of the shape, and those tying the fields to it; checked after
/// checkConfigFields.
inline ConfigVerdict checkConfigShape(const ConfigFields &c,
                                      const CacheShape &s) {
  for (ConfigVerdict v :
       {detail::positive("num_layers", s.numLayers, limits::kLayers),
        detail::positive("num_kv_heads", s.numKvHeads, limits::kKvHeads),
        detail::positive("head_dim", s.headDim, limits::kHeadDim)})
    if (v.failed())
      return v;
  if (s.numKvHeads * s.headDim > kMaxChannels)
    return detail::refuse(
        KVQ_ERR_INVALID_ARGUMENT,
        "num_kv_heads x head_dim = %lld exceeds the limit of %lld channels "
        "per layer",
        static_cast<long long>(s.numKvHeads * s.headDim),
        static_cast<long long>(kMaxChannels));
  if ((c.method == KVQ_METHOD_KIVI || c.method == KVQ_METHOD_KIVI_SINK) &&
      (c.groupSize <= 0 || s.headDim % c.groupSize != 0))
    return detail::refuse(
        KVQ_ERR_BAD_GROUP_SIZE, "group_size %lld does not divide head_dim %lld",
        static_cast<long long>(c.groupSize), static_cast<long long>(s.headDim));
  if (c.ropeStyle != KVQ_ROPE_NONE)
    if (const char *why = ropeRule(c.ropeTheta, s.headDim))
      return detail::refuse(KVQ_ERR_INVALID_ARGUMENT, "%s, got head_dim %lld",
                            why, static_cast<long long>(s.headDim));
  return {};
}

/// Every rule of a configuration and its shape, fields first.
inline ConfigVerdict checkConfig(const ConfigFields &c, const CacheShape &s) {
  if (ConfigVerdict v = checkConfigFields(c); v.failed())
    return v;
  return checkConfigShape(c, s);
}

} // namespace kvq

#endif // KVQ_CONFIG_RULES_H
