//===- config.cpp - Configuration defaults and validation -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_config_init (the seeds' defaults, but for kvquant's refit_interval)
// and kvq_config_validate, which gives each kind of bad configuration its
// own status and a one-line message.
//
//===----------------------------------------------------------------------===//
#include "config.h"
#include "guard.h"
#include "kernels.h"
#include "status.h"

#include <cmath>
#include <cstring>

static_assert(KVQ_DEFAULT_REFIT_INTERVAL == kvq::kDefaultRefitInterval,
              "runtime.h's macro and config_limits.h's default differ");

extern "C" KVQ_RT_EXPORT void kvq_config_init(kvq_config *cfg,
                                              kvq_method method) {
  if (!cfg)
    return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->method = method;
  int bits = method == KVQ_METHOD_KVQUANT ? kvq::kDefaultKvquantBits
                                          : kvq::kDefaultKiviBits;
  cfg->key_bits = bits;
  cfg->value_bits = bits;
  cfg->group_size = kvq::kDefaultGroupSize;
  cfg->residual_length = kvq::kDefaultResidualLength;
  cfg->residual_mode = KVQ_RESIDUAL_SLIDING;
  cfg->n_sink_tokens =
      method == KVQ_METHOD_KIVI_SINK ? kvq::kDefaultKiviSinkTokens : 0;
  cfg->outlier_fraction = static_cast<float>(kvq::kDefaultOutlierFraction);
  cfg->lloyd_iters = kvq::kDefaultLloydIters;
  // Not the seeds' 0: frozen prefill levels do not cover post-RoPE decode
  // keys (docs/RUNTIME.md). Same value for every method, as in the dialect.
  cfg->refit_interval = kvq::kDefaultRefitInterval;
  cfg->kvquant_n_sink = kvq::kDefaultKvquantNSink;
  cfg->kvquant_group_size = kvq::kKvquantGroupSize;
  cfg->num_layers = 1;
  cfg->num_kv_heads = 1;
  cfg->head_dim = 128;
  cfg->backend = KVQ_BACKEND_CPU;
  cfg->rope_style = KVQ_ROPE_NONE;
  cfg->rope_theta = kvq::kDefaultRopeTheta;
}

kvq_status kvq::validateConfig(const kvq_config &c) {
  if (c.method < KVQ_METHOD_FP16 || c.method > KVQ_METHOD_KVQUANT)
    return fail(KVQ_ERR_UNKNOWN_METHOD, "unknown method %d", c.method);
  if (c.num_layers <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "num_layers (%d), num_kv_heads (%d) and head_dim (%d) must "
                "be positive",
                c.num_layers, c.num_kv_heads, c.head_dim);
  if (c.num_layers > limits::kLayers)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "num_layers %d exceeds %d",
                c.num_layers, limits::kLayers);
  if (c.num_kv_heads > limits::kKvHeads)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "num_kv_heads %d exceeds %d",
                c.num_kv_heads, limits::kKvHeads);
  if (c.head_dim > limits::kHeadDim)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "head_dim %d exceeds %d", c.head_dim,
                limits::kHeadDim);
  if (int64_t{c.num_kv_heads} * c.head_dim > kMaxChannels)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "num_kv_heads * head_dim = %lld exceeds %lld channels",
                static_cast<long long>(int64_t{c.num_kv_heads} * c.head_dim),
                static_cast<long long>(kMaxChannels));
  if (c.backend != KVQ_BACKEND_CPU)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "backend %d is not built into this runtime (cpu only)",
                c.backend);
  if (c.rope_style < KVQ_ROPE_NONE || c.rope_style > KVQ_ROPE_HALF)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown rope_style %d",
                c.rope_style);
  if (c.rope_style != KVQ_ROPE_NONE)
    if (const char *why = ropeRule(c.rope_theta, c.head_dim))
      return fail(KVQ_ERR_INVALID_ARGUMENT, "%s (rope_theta %g, head_dim %d)",
                  why, static_cast<double>(c.rope_theta), c.head_dim);
  if ((c.allocator.alloc == nullptr) != (c.allocator.release == nullptr))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "allocator: set both alloc and release, or neither");
  if (c.method == KVQ_METHOD_FP16)
    return KVQ_OK; // the quantization fields are unused
  if (!supportedBits(c.key_bits) || !supportedBits(c.value_bits))
    return fail(KVQ_ERR_UNSUPPORTED_BITS,
                "key_bits %d / value_bits %d: only 2, 3, 4 and 8 are "
                "supported",
                c.key_bits, c.value_bits);
  if (c.method == KVQ_METHOD_KVQUANT) {
    if (!(c.outlier_fraction >= 0.0f && c.outlier_fraction < 1.0f))
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "outlier_fraction %g is not in [0, 1)",
                  static_cast<double>(c.outlier_fraction));
    if (c.lloyd_iters < 0 || c.refit_interval < 0 || c.kvquant_n_sink < 0)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "lloyd_iters, refit_interval and kvquant_n_sink must be "
                  ">= 0");
    if (c.lloyd_iters > limits::kLloydIters)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "lloyd_iters %d exceeds %d (the fit converges in tens of "
                  "sweeps)",
                  c.lloyd_iters, limits::kLloydIters);
    if (c.refit_interval > limits::kWaitTokens)
      return fail(KVQ_ERR_INVALID_ARGUMENT, "refit_interval %d exceeds %d",
                  c.refit_interval, limits::kWaitTokens);
    if (c.kvquant_n_sink > limits::kSinkTokens)
      return fail(KVQ_ERR_INVALID_ARGUMENT, "kvquant_n_sink %d exceeds %d",
                  c.kvquant_n_sink, limits::kSinkTokens);
    if (c.kvquant_group_size != kKvquantGroupSize)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "kvquant_group_size = %d: kvq fits key levels per channel "
                  "over all prefill tokens and value levels per token over "
                  "head_dim, so the group size has no effect; leave it at %d",
                  c.kvquant_group_size, kKvquantGroupSize);
    return KVQ_OK;
  }
  // kivi / kivi_sink
  if (c.group_size <= 0 || c.head_dim % c.group_size != 0)
    return fail(KVQ_ERR_BAD_GROUP_SIZE,
                "group_size %d does not divide head_dim %d", c.group_size,
                c.head_dim);
  if (c.residual_length < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "residual_length %d < 0",
                c.residual_length);
  if (c.residual_length > limits::kWaitTokens)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "residual_length %d exceeds %d",
                c.residual_length, limits::kWaitTokens);
  if (c.residual_mode != KVQ_RESIDUAL_SLIDING &&
      c.residual_mode != KVQ_RESIDUAL_BLOCK)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown residual_mode %d",
                c.residual_mode);
  if (c.residual_mode == KVQ_RESIDUAL_BLOCK &&
      (c.residual_length == 0 || c.residual_length % c.group_size != 0))
    return fail(KVQ_ERR_BAD_GROUP_SIZE,
                "residual_mode block flushes R keys at a time: R = %d must "
                "be a positive multiple of group_size %d",
                c.residual_length, c.group_size);
  if (c.n_sink_tokens < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "n_sink_tokens %d < 0",
                c.n_sink_tokens);
  if (c.n_sink_tokens > limits::kSinkTokens)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "n_sink_tokens %d exceeds %d",
                c.n_sink_tokens, limits::kSinkTokens);
  if (c.method == KVQ_METHOD_KIVI)
    if (const char *why = plainKiviSinkTokensRule(c.n_sink_tokens))
      return fail(KVQ_ERR_INVALID_ARGUMENT, "n_sink_tokens = %d %s",
                  c.n_sink_tokens, why);
  return KVQ_OK;
}

extern "C" KVQ_RT_EXPORT kvq_status kvq_config_validate(const kvq_config *cfg) {
  return kvq::guarded("kvq_config_validate", [&]() -> kvq_status {
    if (!cfg)
      return kvq::fail(KVQ_ERR_NULL_POINTER,
                       "kvq_config_validate: cfg is null");
    return kvq::validateConfig(*cfg);
  });
}

kvq_config kvq::flatConfig(int32_t method, int32_t keyBits, int32_t valueBits,
                           int32_t groupSize, int32_t residualLength,
                           int32_t residualMode, int32_t nSinkTokens,
                           float outlierFraction, int32_t lloydIters,
                           int32_t refitInterval, int32_t kvquantNSink,
                           int32_t kvquantGroupSize, int32_t numLayers,
                           int32_t numKvHeads, int32_t headDim, int32_t backend,
                           int32_t ropeStyle, float ropeTheta) {
  kvq_config cfg;
  // Every field but the allocator is set below: init only zeroes that one.
  kvq_config_init(&cfg, KVQ_METHOD_FP16);
  cfg.method = method;
  cfg.key_bits = keyBits;
  cfg.value_bits = valueBits;
  cfg.group_size = groupSize;
  cfg.residual_length = residualLength;
  cfg.residual_mode = residualMode;
  cfg.n_sink_tokens = nSinkTokens;
  cfg.outlier_fraction = outlierFraction;
  cfg.lloyd_iters = lloydIters;
  cfg.refit_interval = refitInterval;
  cfg.kvquant_n_sink = kvquantNSink;
  cfg.kvquant_group_size = kvquantGroupSize;
  cfg.num_layers = numLayers;
  cfg.num_kv_heads = numKvHeads;
  cfg.head_dim = headDim;
  cfg.backend = backend;
  cfg.rope_style = ropeStyle;
  cfg.rope_theta = ropeTheta;
  return cfg;
}
