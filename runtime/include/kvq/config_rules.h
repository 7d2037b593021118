//===- config_rules.h - rules of a kvq cache configuration -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every rule a cache configuration must satisfy, written once, with its one
// message. kvq_config_validate (runtime/base/config.cpp) and the dialect's
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
#include <type_traits>
#include <utility>

namespace kvq {

/// The code widths the runtime stores (2, 3, 4, 8).
inline bool isSupportedBits(long long bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

/// A field of kvq_config as the rules judge it: integers widened to int64_t
/// so that the dialect's i64 parameters arrive unchanged (a value that does
/// not fit the int32 field is refused, not truncated); the floats are what
/// the C ABI carries (the dialect rounds its doubles as the lowering does,
/// so both sides judge the same value).
template <typename Field>
using Judged = std::conditional_t<std::is_integral_v<Field>, int64_t, Field>;

#define KVQ_JUDGED_FIELD(type, name) Judged<type> name{};
/// A configuration as the runtime receives it: kvq_config's method and RoPE
/// fields (kvq/config_fields.h), the zero of each by default.
struct ConfigFields {
  KVQ_CONFIG_METHOD_FIELDS(KVQ_JUDGED_FIELD)
  KVQ_CONFIG_ROPE_FIELDS(KVQ_JUDGED_FIELD)
};

/// The shape of a cache: kvq_config's num_layers, num_kv_heads, head_dim
/// (!kvq.cache's layers, kv_heads, head_dim).
struct CacheShape {
  KVQ_CONFIG_SHAPE_FIELDS(KVQ_JUDGED_FIELD)
};
#undef KVQ_JUDGED_FIELD

/// The verdict of a rule: KVQ_OK, or the status kvq_config_validate returns
/// and the one message every checker prints.
struct ConfigVerdict {
  kvq_status status = KVQ_OK;
  char message[256] = "";

  bool failed() const { return status != KVQ_OK; }
};

namespace detail {
/// An integer field's value; 0 for a float field (whose conversion to an
/// integer could be undefined).
template <typename T> constexpr int64_t integerOrZero(T value) {
  if constexpr (std::is_integral_v<T>)
    return value;
  else
    return 0;
}

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
  if (c.rope_style < KVQ_ROPE_NONE || c.rope_style > KVQ_ROPE_HALF)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "unknown rope_style %lld",
                  static_cast<long long>(c.rope_style));
  if (c.rope_style != KVQ_ROPE_NONE)
    if (ConfigVerdict v = checkRopeTheta(c.rope_theta); v.failed())
      return v;
  // kvq_config's fields are int32: a wider value (only the dialect can hold
  // one) would reach the runtime truncated, so it is refused for every
  // method, read or not.
  const struct {
    const char *name;
    int64_t value;
    bool isInteger;
  } fields[] = {
#define KVQ_FIELD_VALUE(type, name)                                            \
  {#name, detail::integerOrZero(c.name), std::is_integral_v<type>},
      KVQ_CONFIG_METHOD_FIELDS(KVQ_FIELD_VALUE)
#undef KVQ_FIELD_VALUE
  };
  for (const auto &field : fields)
    if (field.isInteger && (field.value < INT32_MIN || field.value > INT32_MAX))
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "%s %lld does not fit the int32 field of kvq_config",
                    field.name, static_cast<long long>(field.value));
  if (c.method == KVQ_METHOD_FP16)
    return {}; // the quantization fields are unused
  for (const auto &[name, bits] :
       {std::pair<const char *, int64_t>{"key_bits", c.key_bits},
        {"value_bits", c.value_bits}})
    if (!isSupportedBits(bits))
      return refuse(KVQ_ERR_UNSUPPORTED_BITS,
                    "unsupported %s %lld%s; supported bit widths are 2, 3, 4 "
                    "and 8",
                    name, static_cast<long long>(bits),
                    bits == kFp16Bits ? " (fp16's width, which #kvq.config "
                                        "implies when it is left out)"
                                      : "");
  if (c.method == KVQ_METHOD_KVQUANT) {
    if (!(c.outlier_fraction >= 0.0f && c.outlier_fraction < 1.0f))
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "outlier_fraction %g is not in [0, 1)",
                    static_cast<double>(c.outlier_fraction));
    for (ConfigVerdict v :
         {detail::inRange("lloyd_iters", c.lloyd_iters, limits::kLloydIters),
          detail::inRange("refit_interval", c.refit_interval,
                          limits::kWaitTokens),
          detail::inRange("kvquant_n_sink", c.kvquant_n_sink,
                          limits::kSinkTokens)})
      if (v.failed())
        return v;
    // Key levels are fit per channel over the whole prefill and value
    // levels per token over head_dim, so a group size would change
    // nothing; accepting other values would suggest otherwise.
    if (c.kvquant_group_size != kKvquantGroupSize)
      return refuse(KVQ_ERR_INVALID_ARGUMENT,
                    "kvquant_group_size %lld has no effect in kvq (key levels "
                    "are fit per channel over the prefill, value levels per "
                    "token over head_dim); leave it at %d",
                    static_cast<long long>(c.kvquant_group_size),
                    kKvquantGroupSize);
    return {};
  }
  // kivi / kivi_sink
  if (c.group_size <= 0)
    return refuse(KVQ_ERR_BAD_GROUP_SIZE, "group_size %lld must be positive",
                  static_cast<long long>(c.group_size));
  if (ConfigVerdict v = detail::inRange("residual_length", c.residual_length,
                                        limits::kWaitTokens);
      v.failed())
    return v;
  if (c.residual_mode != KVQ_RESIDUAL_SLIDING &&
      c.residual_mode != KVQ_RESIDUAL_BLOCK)
    return refuse(KVQ_ERR_INVALID_ARGUMENT, "unknown residual_mode %lld",
                  static_cast<long long>(c.residual_mode));
  if (c.residual_mode == KVQ_RESIDUAL_BLOCK &&
      (c.residual_length == 0 || c.residual_length % c.group_size != 0))
    return refuse(KVQ_ERR_BAD_GROUP_SIZE,
                  "residual_mode block flushes residual_length (%lld) keys at "
                  "a time, which must be a positive multiple of group_size "
                  "(%lld)",
                  static_cast<long long>(c.residual_length),
                  static_cast<long long>(c.group_size));
  if (ConfigVerdict v = detail::inRange("n_sink_tokens", c.n_sink_tokens,
                                        limits::kSinkTokens);
      v.failed())
    return v;
  if (c.method == KVQ_METHOD_KIVI)
    if (const char *why = plainKiviSinkTokensRule(c.n_sink_tokens))
      return refuse(KVQ_ERR_INVALID_ARGUMENT, "n_sink_tokens = %lld %s",
                    static_cast<long long>(c.n_sink_tokens), why);
  return {};
}

/// The rules of the shape, and those tying the fields to it; checked after
/// checkConfigFields.
inline ConfigVerdict checkConfigShape(const ConfigFields &c,
                                      const CacheShape &s) {
  for (ConfigVerdict v :
       {detail::positive("num_layers", s.num_layers, limits::kLayers),
        detail::positive("num_kv_heads", s.num_kv_heads, limits::kKvHeads),
        detail::positive("head_dim", s.head_dim, limits::kHeadDim)})
    if (v.failed())
      return v;
  if (s.num_kv_heads * s.head_dim > kMaxChannels)
    return detail::refuse(
        KVQ_ERR_INVALID_ARGUMENT,
        "num_kv_heads x head_dim = %lld exceeds the limit of %lld channels "
        "per layer",
        static_cast<long long>(s.num_kv_heads * s.head_dim),
        static_cast<long long>(kMaxChannels));
  if ((c.method == KVQ_METHOD_KIVI || c.method == KVQ_METHOD_KIVI_SINK) &&
      (c.group_size <= 0 || s.head_dim % c.group_size != 0))
    return detail::refuse(KVQ_ERR_BAD_GROUP_SIZE,
                          "group_size %lld does not divide head_dim %lld",
                          static_cast<long long>(c.group_size),
                          static_cast<long long>(s.head_dim));
  if (c.rope_style != KVQ_ROPE_NONE)
    if (const char *why = ropeRule(c.rope_theta, s.head_dim))
      return detail::refuse(KVQ_ERR_INVALID_ARGUMENT, "%s, got head_dim %lld",
                            why, static_cast<long long>(s.head_dim));
  return {};
}

/// Every rule of a configuration and its shape, fields first.
inline ConfigVerdict checkConfig(const ConfigFields &c, const CacheShape &s) {
  if (ConfigVerdict v = checkConfigFields(c); v.failed())
    return v;
  return checkConfigShape(c, s);
}

/// The kvq_config of a configuration, its shape and a backend, as a
/// compiled graph passes it to kvq_cache_create_flat (allocator zeroed).
/// For fields checkConfig accepted, where every narrowing is exact.
inline kvq_config runtimeConfig(const ConfigFields &c, const CacheShape &s,
                                int32_t backend) {
  kvq_config cfg{};
#define KVQ_NARROW(type, name) cfg.name = static_cast<type>(c.name);
  KVQ_CONFIG_METHOD_FIELDS(KVQ_NARROW)
  KVQ_CONFIG_ROPE_FIELDS(KVQ_NARROW)
#undef KVQ_NARROW
#define KVQ_NARROW_SHAPE(type, name) cfg.name = static_cast<type>(s.name);
  KVQ_CONFIG_SHAPE_FIELDS(KVQ_NARROW_SHAPE)
#undef KVQ_NARROW_SHAPE
  cfg.backend = backend;
  return cfg;
}

} // namespace kvq

#endif // KVQ_CONFIG_RULES_H
