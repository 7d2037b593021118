//===- config.cpp - Configuration defaults and validation -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_config_init (the seeds' defaults, but for kvquant's refit_interval)
// and kvq_config_validate, which gives each kind of bad configuration its
// own status and a one-line message: the rules and messages of
// kvq/config_rules.h, which the dialect's verifiers print too.
//
//===----------------------------------------------------------------------===//
#include "config.h"
#include "guard.h"
#include "status.h"

#include "kvq/config_rules.h"

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
  // The rules the dialect applies too (kvq/config_rules.h), then what only
  // the runtime can be given: a backend and an allocator.
  ConfigFields fields;
  CacheShape shape;
#define KVQ_JUDGE(type, name) fields.name = c.name;
  KVQ_CONFIG_METHOD_FIELDS(KVQ_JUDGE)
  KVQ_CONFIG_ROPE_FIELDS(KVQ_JUDGE)
#undef KVQ_JUDGE
#define KVQ_JUDGE_SHAPE(type, name) shape.name = c.name;
  KVQ_CONFIG_SHAPE_FIELDS(KVQ_JUDGE_SHAPE)
#undef KVQ_JUDGE_SHAPE
  if (ConfigVerdict v = checkConfig(fields, shape); v.failed())
    return fail(v.status, "%s", v.message);
  if (c.backend != KVQ_BACKEND_CPU)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "backend %d is not built into this runtime (cpu only)",
                c.backend);
  if ((c.allocator.alloc == nullptr) != (c.allocator.release == nullptr))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "allocator: set both alloc and release, or neither");
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

kvq_config kvq::flatConfigBase() {
  kvq_config cfg;
  kvq_config_init(&cfg, KVQ_METHOD_FP16); // zeroes the allocator: malloc
  return cfg;
}
