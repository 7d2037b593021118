/*===- kvq/runtime_metal.h - C ABI of the kvq Metal backend -------*- C -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * The Metal flavour of runtime.h: the same stateless kernels with a device
 * context first, and the same cache entry points with a kvq_metal_ prefix.
 * Graphs lowered with convert-kvq-to-runtime{target=metal} (--kvq-to-metal)
 * call exactly these symbols, as kvq/entry_points.def lists them (the
 * runtime's build checks each signature). kvq_nuq_fit_scratch_size and
 * kvq_check_status are shared with runtime.h (the Metal library exports
 * the whole CPU ABI too).
 *
 * Conventions are those of runtime.h (statuses, outputs written only on
 * success, kvq_last_error, fp16 as uint16_t bits), plus:
 *  - Results are bit-identical to the CPU kernels (codes, scales, levels,
 *    masks, norms, positions); cache attention agrees within a stated
 *    tolerance (docs/METAL.md).
 *  - Host pointers are staged through device buffers; every call waits for
 *    its GPU work, so buffers may be reused as soon as a call returns.
 *  - The context is process-wide and thread-safe to share; one cache must
 *    not be used from two threads at once.
 *
 *===----------------------------------------------------------------------===*/
#ifndef KVQ_RUNTIME_METAL_H
#define KVQ_RUNTIME_METAL_H

#include "kvq/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The process-wide Metal context (device, queue, pipeline cache), created
/// on first use. Null when no Metal device is available; kvq_last_error()
/// then says why, and every kernel given a null context fails with
/// KVQ_ERR_NULL_POINTER. On Linux test builds this is the CPU emulation of
/// the same kernels. Never free it.
KVQ_RT_EXPORT void *kvq_metal_default_context(void);

/// Name of the device behind a context ("" for null).
KVQ_RT_EXPORT const char *kvq_metal_device_name(void *ctx);

/*===----------------------------------------------------------------------===*
 * Stateless kernels: ctx, then the arguments of the runtime.h kernel.
 *===----------------------------------------------------------------------===*/

/// kvq_group_quant on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_group_quant(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, const uint8_t *exclude,
    kvq_code_layout layout, uint8_t *codes, uint16_t *scale, uint16_t *zero);

/// kvq_group_dequant on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_group_dequant(
    void *ctx, const uint8_t *codes, kvq_code_layout layout,
    const uint16_t *scale, const uint16_t *zero, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, void *out, kvq_dtype dtype);

/// kvq_nuq_fit on the GPU. scratch/scratch_floats are checked as on the CPU
/// (the GPU uses its own per-vector scratch).
KVQ_RT_EXPORT kvq_status
kvq_metal_nuq_fit(void *ctx, const void *x, kvq_dtype dtype, int64_t rows,
                  int64_t cols, kvq_axis axis, int32_t group, int32_t bits,
                  int32_t iters, const uint8_t *exclude, float *scratch,
                  int64_t scratch_floats, uint16_t *levels);

/// kvq_nuq_quant on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_nuq_quant(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, const uint16_t *levels,
    kvq_code_layout layout, uint8_t *codes);

/// kvq_nuq_dequant on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_nuq_dequant(
    void *ctx, const uint8_t *codes, kvq_code_layout layout,
    const uint16_t *levels, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, int32_t bits, void *out, kvq_dtype dtype);

/// kvq_outlier_split on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_outlier_split(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, float fraction, const uint8_t *exclude,
    uint8_t *outlier_mask, float *threshold);

/// kvq_outlier_screen on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_outlier_screen(void *ctx, const void *x,
                                                  kvq_dtype dtype, int64_t rows,
                                                  int64_t cols,
                                                  const float *threshold,
                                                  uint8_t *outlier_mask);

/// kvq_key_norm on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_key_norm(void *ctx, const void *keys,
                                            kvq_dtype dtype, int64_t tokens,
                                            int32_t kv_heads, int32_t head_dim,
                                            float *norms);

/// kvq_sink_select on the GPU.
KVQ_RT_EXPORT kvq_status kvq_metal_sink_select(void *ctx, const float *norms,
                                               int64_t tokens, int32_t k,
                                               int64_t *positions);

/*===----------------------------------------------------------------------===*
 * The Metal KV cache: state in device buffers, attention on the GPU.
 *===----------------------------------------------------------------------===*/

/// Opaque Metal cache handle (distinct from kvq_cache_t).
typedef struct kvq_metal_cache kvq_metal_cache_t;

/// kvq_cache_create_flat for a Metal cache on the default context. backend
/// must be KVQ_BACKEND_METAL; the other fields are checked by the CPU rules
/// (kvq_config_validate). Every method is supported, with or without a RoPE
/// (pre-RoPE keys: fetch and attention rotate them on the GPU, as the CPU
/// cache does); head_dim > 256 gives KVQ_ERR_INVALID_ARGUMENT
/// (docs/METAL.md).
KVQ_RT_EXPORT kvq_status kvq_metal_cache_create_flat(
    KVQ_CONFIG_FIELDS(KVQ_CONFIG_PARAM) kvq_metal_cache_t **out);

/// Free a Metal cache and its device buffers. Null is a no-op.
KVQ_RT_EXPORT void kvq_metal_cache_destroy(kvq_metal_cache_t *cache);

/// kvq_cache_update: same tokens kept fp16, same codes, same sinks as a CPU
/// cache of the same configuration.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_update(kvq_metal_cache_t *cache,
                                                int32_t layer, const void *keys,
                                                const void *values,
                                                int64_t n_tokens,
                                                kvq_dtype dtype);

/// kvq_cache_length.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_length(const kvq_metal_cache_t *cache,
                                                int32_t layer,
                                                int64_t *n_tokens);

/// kvq_cache_fetch (dequantized, and a pre-RoPE cache's keys rotated, on
/// the GPU; bit-identical to the CPU).
KVQ_RT_EXPORT kvq_status kvq_metal_cache_fetch(const kvq_metal_cache_t *cache,
                                               int32_t layer, void *keys_out,
                                               void *values_out,
                                               int64_t capacity_tokens,
                                               kvq_dtype dtype);

/// kvq_cache_attend: fused decode attention over the quantized layout on
/// the GPU (float accumulation; the CPU reference accumulates in double).
KVQ_RT_EXPORT kvq_status kvq_metal_cache_attend(const kvq_metal_cache_t *cache,
                                                int32_t layer,
                                                const float *queries,
                                                int64_t n_queries,
                                                int32_t q_heads, float *out);

/// kvq_cache_stats: the byte partition of what the device buffers hold
/// (equal to the CPU cache's figures for the same tokens).
KVQ_RT_EXPORT kvq_status kvq_metal_cache_stats(const kvq_metal_cache_t *cache,
                                               int32_t layer, kvq_stats *out);

/// kvq_cache_sink_positions.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_sink_positions(
    const kvq_metal_cache_t *cache, int32_t layer, int64_t *positions,
    int64_t capacity, int64_t *count);

/// kvq_cache_truncate. Every cut taken is exact and equals the CPU cache's,
/// but the Metal cache keeps no rollback history: it takes only cuts that
/// drop tokens still held fp16 and change no kept token (always for fp16;
/// kivi/kivi_sink while no kept row would return to fp16; kvquant among
/// the tokens awaiting a refit), and 0. Others are KVQ_ERR_NOT_EXACT.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_truncate(kvq_metal_cache_t *cache,
                                                  int64_t n_tokens);

/// kvq_cache_fork: an independent copy with its own device buffers.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_fork(const kvq_metal_cache_t *cache,
                                              kvq_metal_cache_t **out);

/// kvq_cache_save, in the same format (docs/RUNTIME.md, "Saved cache
/// format"): the bytes a CPU cache that received the same updates saves,
/// but for the configuration's backend field (KVQ_BACKEND_METAL here) and
/// so the checksum. Same buffer conventions: buffer null is a size query;
/// capacity < *size is KVQ_ERR_BUFFER_TOO_SMALL with *size set.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_save(const kvq_metal_cache_t *cache,
                                              void *buffer, int64_t capacity,
                                              int64_t *size);

/// kvq_cache_load into a Metal cache on the default context: a file saved
/// by either backend (its backend field may be CPU or Metal), with the
/// CPU loader's checks and statuses (KVQ_ERR_CORRUPT_DATA and a one-line
/// message; nothing leaks, nothing outside [data, data + size) is read).
/// A valid file the Metal cache cannot hold (head_dim > 256, a code arena
/// past 4 GiB) is KVQ_ERR_INVALID_ARGUMENT. No allocator: the payload
/// lives in device buffers. The loaded cache equals the saved one (fetch
/// and attention bits, stats, sinks, saved bytes) and evolves like it.
KVQ_RT_EXPORT kvq_status kvq_metal_cache_load(const void *data, int64_t size,
                                              kvq_metal_cache_t **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVQ_RUNTIME_METAL_H */
