/*===- kvq/config_fields.h - the scalar fields of kvq_config ------*- C -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * kvq_config's fields but the allocator, in declaration order, as X-macro
 * lists: X(type, name) per field. Everything that spells the configuration
 * field by field derives from them:
 *  - kvq_cache_create_flat and kvq_metal_cache_create_flat take one
 *    parameter per field (KVQ_CONFIG_PARAM), and entry_points.def's
 *    CacheCreate signature lists their types (KVQ_CONFIG_PARAM_TYPE);
 *  - the flat constructors set a kvq_config from those parameters;
 *  - convert-kvq-to-runtime passes one operand per field;
 *  - config_rules.h's ConfigFields and CacheShape mirror the method, RoPE
 *    and shape fields, widened to int64_t, and its int32 range check
 *    names every integer field.
 * runtime/api/compiled_abi.cpp static_asserts that the lists are exactly
 * kvq_config's fields, with these types, in this order.
 *
 *===----------------------------------------------------------------------===*/
#ifndef KVQ_CONFIG_FIELDS_H
#define KVQ_CONFIG_FIELDS_H

/* clang-format off */
/* What a #kvq.config holds: the method and its parameters. */
#define KVQ_CONFIG_METHOD_FIELDS(X)                                           \
  X(int32_t, method)                                                          \
  X(int32_t, key_bits)                                                        \
  X(int32_t, value_bits)                                                      \
  X(int32_t, group_size)                                                      \
  X(int32_t, residual_length)                                                 \
  X(int32_t, residual_mode)                                                   \
  X(int32_t, n_sink_tokens)                                                   \
  X(float, outlier_fraction)                                                  \
  X(int32_t, lloyd_iters)                                                     \
  X(int32_t, refit_interval)                                                  \
  X(int32_t, kvquant_n_sink)                                                  \
  X(int32_t, kvquant_group_size)

/* What a !kvq.cache type holds besides its configuration. */
#define KVQ_CONFIG_SHAPE_FIELDS(X)                                            \
  X(int32_t, num_layers)                                                      \
  X(int32_t, num_kv_heads)                                                    \
  X(int32_t, head_dim)

/* Where the cache lives (the lowering's target). */
#define KVQ_CONFIG_BACKEND_FIELDS(X)                                          \
  X(int32_t, backend)

/* The keys' RoPE (#kvq.rope; none: KVQ_ROPE_NONE). */
#define KVQ_CONFIG_ROPE_FIELDS(X)                                             \
  X(int32_t, rope_style)                                                      \
  X(float, rope_theta)

/* Every field but the allocator, in kvq_config's order. */
#define KVQ_CONFIG_FIELDS(X)                                                  \
  KVQ_CONFIG_METHOD_FIELDS(X)                                                 \
  KVQ_CONFIG_SHAPE_FIELDS(X)                                                  \
  KVQ_CONFIG_BACKEND_FIELDS(X)                                                \
  KVQ_CONFIG_ROPE_FIELDS(X)
/* clang-format on */

/* A field as a parameter ("int32_t method,") and as a parameter type
 * ("int32_t,"); a parameter list built from them ends with another one. */
#define KVQ_CONFIG_PARAM(type, name) type name,
#define KVQ_CONFIG_PARAM_TYPE(type, name) type,

#endif /* KVQ_CONFIG_FIELDS_H */
