/*===- kvq/runtime.h - C ABI of the kvq runtime -------------------*- C -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * The stable C contract between compiled model graphs and the kvq runtime:
 * status codes, the cache configuration, the quantized KV cache handle and
 * the stateless kernels behind the kvq dialect's primitive ops.
 *
 * The entry points compiled graphs call are listed with their signatures
 * in kvq/entry_points.def, which the lowering reads; the runtime's build
 * checks that this header declares exactly those signatures.
 *
 * Conventions, for every function below:
 *  - Every entry point returns a kvq_status and writes its outputs only when
 *    it returns KVQ_OK; on failure the cache and all outputs are unchanged
 *    and kvq_last_error() holds a one-line message naming the problem.
 *  - Tensors are dense, row-major (C order). fp16 data is passed as uint16_t
 *    IEEE binary16 bit patterns, so the header needs no half type.
 *  - A "[tokens, channels]" matrix flattens [tokens, kv_heads, head_dim] to
 *    channels = kv_heads * head_dim.
 *  - Stateless kernels take every buffer from the caller and never
 *    allocate (kvq_nuq_fit's work is in its scratch).
 *  - No exception crosses this ABI: sizes derived from arguments are
 *    overflow-checked and bounded (the limits below and in kvq_config) and
 *    give KVQ_ERR_INVALID_ARGUMENT; anything unexpected inside becomes a
 *    status too (docs/RUNTIME.md, "Limits, checked sizes and the
 *    catch-all"). No entry point returns KVQ_OK with non-finite output.
 *  - Thread-safety: distinct caches may be used from distinct threads at the
 *    same time; one cache must not be used from two threads at once. The
 *    stateless kernels are reentrant. kvq_last_error() is thread-local.
 *
 *===----------------------------------------------------------------------===*/
#ifndef KVQ_RUNTIME_H
#define KVQ_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "kvq/config_fields.h"

#if defined(_WIN32)
#define KVQ_RT_EXPORT __declspec(dllexport)
#else
#define KVQ_RT_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Status codes
 *===----------------------------------------------------------------------===*/

/// Result of every runtime entry point. Values are stable (part of the ABI).
/// Every enum has a *_MAX_ENUM sentinel so that any 32-bit value a caller
/// passes is a valid value of the type (the runtime rejects unknown ones
/// with a status instead of relying on undefined behaviour).
typedef enum kvq_status {
  KVQ_OK = 0,
  KVQ_ERR_NULL_POINTER = 1,       ///< a required pointer argument was null
  KVQ_ERR_INVALID_ARGUMENT = 2,   ///< a scalar argument is out of its domain
  KVQ_ERR_UNKNOWN_METHOD = 3,     ///< kvq_config.method is not a kvq_method
  KVQ_ERR_UNSUPPORTED_BITS = 4,   ///< bits not in {2, 3, 4, 8}
  KVQ_ERR_BAD_GROUP_SIZE = 5,     ///< group size does not divide its dimension
  KVQ_ERR_LAYER_OUT_OF_RANGE = 6, ///< layer index outside [0, num_layers)
  KVQ_ERR_EMPTY_INPUT = 7,        ///< zero tokens (or zero elements)
  KVQ_ERR_SHAPE_MISMATCH = 8,     ///< shapes disagree with the cache/kernel
  KVQ_ERR_NON_FINITE = 9,     ///< NaN/Inf input, or not representable as fp16
  KVQ_ERR_OUT_OF_MEMORY = 10, ///< the allocator returned null
  KVQ_ERR_BUFFER_TOO_SMALL = 11, ///< a caller buffer is smaller than needed
  KVQ_ERR_CORRUPT_DATA = 12,     ///< a serialized cache failed its checks
  KVQ_ERR_NOT_EXACT = 13, ///< kvq_cache_truncate cannot cut exactly there
  KVQ_STATUS_MAX_ENUM = 0x7fffffff ///< not a status: makes the enum 32-bit
} kvq_status;

/// Static, human-readable name of a status ("ok", "null pointer", ...).
/// Never returns null; unknown values give "unknown status".
KVQ_RT_EXPORT const char *kvq_status_string(kvq_status status);

/// The message of the last failing call on this thread ("" if none). The
/// pointer stays valid until the next runtime call on the same thread.
KVQ_RT_EXPORT const char *kvq_last_error(void);

/*===----------------------------------------------------------------------===*
 * Enumerations
 *===----------------------------------------------------------------------===*/

/// Quantization method of a cache (seed names in comments).
typedef enum kvq_method {
  KVQ_METHOD_FP16 = 0,      ///< "fp16": no quantization, the baseline
  KVQ_METHOD_KIVI = 1,      ///< "kivi": uniform group quantization
  KVQ_METHOD_KIVI_SINK = 2, ///< "kivi_sink": KIVI + dynamic sink protection
  KVQ_METHOD_KVQUANT = 3,   ///< "kvquant": NUQ + dense-and-sparse + sinks
  KVQ_METHOD_MAX_ENUM = 0x7fffffff
} kvq_method;

/// How KIVI keys leave the fp16 residual window.
typedef enum kvq_residual_mode {
  KVQ_RESIDUAL_SLIDING = 0, ///< keys leave in whole groups of G (seed rule)
  KVQ_RESIDUAL_BLOCK = 1,   ///< keys leave R at a time (KIVI's official code)
  KVQ_RESIDUAL_MAX_ENUM = 0x7fffffff
} kvq_residual_mode;

/// Element type of K/V/Q buffers passed to or returned by the runtime. A
/// buffer passed as `void *` with a dtype must be aligned to its elements
/// (2 bytes for F16, 4 for F32); a misaligned one is
/// KVQ_ERR_INVALID_ARGUMENT, and the call changes nothing.
typedef enum kvq_dtype {
  KVQ_DTYPE_F16 = 0, ///< uint16_t binary16 bit patterns
  KVQ_DTYPE_F32 = 1, ///< float
  KVQ_DTYPE_MAX_ENUM = 0x7fffffff
} kvq_dtype;

/// The dimension of a [rows, cols] matrix that a quantization group runs
/// along. PER_TOKEN: groups of `group` consecutive elements inside one row
/// (one token). PER_CHANNEL: groups of `group` consecutive rows inside one
/// column (one channel, across tokens).
typedef enum kvq_axis {
  KVQ_AXIS_PER_TOKEN = 0,
  KVQ_AXIS_PER_CHANNEL = 1,
  KVQ_AXIS_MAX_ENUM = 0x7fffffff
} kvq_axis;

/// Storage of integer codes in kernel outputs/inputs.
/// UNPACKED: one uint8_t per code. PACKED: an LSB-first bit stream over the
/// elements in row-major order; element i occupies bits [i*b, i*b + b) of
/// the stream, bit j of the stream is bit (j % 8) of byte j / 8. For b = 2
/// that is 4 codes per byte, b = 4 two, b = 8 one, b = 3 eight codes in
/// three bytes. Size: kvq_packed_size(n, b) bytes.
typedef enum kvq_code_layout {
  KVQ_CODES_UNPACKED = 0,
  KVQ_CODES_PACKED = 1,
  KVQ_CODES_MAX_ENUM = 0x7fffffff
} kvq_code_layout;

/// The rotary position embedding of the keys a cache receives
/// (kvq_config.rope_style). NONE: keys are stored and returned as given.
/// Otherwise kvq_cache_update receives keys *before* RoPE (KVQuant's
/// pre-RoPE key quantization), which the cache quantizes, and attention and
/// kvq_cache_fetch use the keys rotated at their positions 0, 1, 2, ...
/// (docs/RUNTIME.md, "Pre-RoPE keys"). INTERLEAVED rotates channel pairs
/// (2i, 2i+1) of a head, as llama2.c and Meta's Llama code; HALF rotates
/// channel i with channel i + head_dim/2, as Hugging Face's Llama.
typedef enum kvq_rope_style {
  KVQ_ROPE_NONE = 0,
  KVQ_ROPE_INTERLEAVED = 1,
  KVQ_ROPE_HALF = 2,
  KVQ_ROPE_MAX_ENUM = 0x7fffffff
} kvq_rope_style;

/// Compute backend of a cache.
typedef enum kvq_backend {
  KVQ_BACKEND_CPU = 0,
  KVQ_BACKEND_METAL = 1,
  KVQ_BACKEND_MAX_ENUM = 0x7fffffff
} kvq_backend;

/*===----------------------------------------------------------------------===*
 * Configuration
 *===----------------------------------------------------------------------===*/

/// Optional allocator for the cache's payload: every block of codes, scales,
/// level tables, outliers and fp16 rows is one exact-size alloc call, so the
/// bytes live in this allocator always equal kvq_stats.total_bytes of the
/// whole cache. Bookkeeping (the handle, per-token index arrays, the
/// rollback history of recent fp16 rows) uses malloc. alloc(user, size) returns
/// size bytes aligned like malloc, or null on failure (the update then fails
/// with KVQ_ERR_OUT_OF_MEMORY and changes nothing); release(user, ptr, size)
/// frees a block alloc returned. Both null means the runtime's own:
/// malloc/free, except that on Linux, once the cache holds 2 MB, blocks of
/// 64 KiB and more (fp16 pages) come from per-cache regions asking for 2 MB
/// pages, kept until the cache is destroyed (docs/RUNTIME.md, "Storage and
/// byte accounting"). Setting only one is KVQ_ERR_INVALID_ARGUMENT.
typedef struct kvq_allocator {
  void *(*alloc)(void *user, size_t size);
  void (*release)(void *user, void *ptr, size_t size);
  void *user;
} kvq_allocator;

/// Every parameter of the seeds has a field. Fill with kvq_config_init().
/// Upper bounds (KVQ_ERR_INVALID_ARGUMENT beyond, the message names the
/// field; reasons in docs/RUNTIME.md): they are far above any model and keep
/// every size the runtime derives inside int64.
typedef struct kvq_config {
  int32_t method;             ///< kvq_method
  int32_t key_bits;           ///< bit_width_inlier (kivi) / kvquant_bits
  int32_t value_bits;         ///< same for values
  int32_t group_size;         ///< kivi_group_size (G), divides head_dim
  int32_t residual_length;    ///< residual_length (R), fp16 recent tokens,
                              ///< <= 2^20
  int32_t residual_mode;      ///< kvq_residual_mode
  int32_t n_sink_tokens;      ///< kivi_sink: top-k high-key-norm tokens,
                              ///< <= 4096 (reserved at create)
  float outlier_fraction;     ///< kvquant_outlier_fraction, in [0, 1)
  int32_t lloyd_iters;        ///< kvquant_lloyd_iters, <= 1000 (the fit
                              ///< converges in tens; more is a hang)
  int32_t refit_interval;     ///< kvquant_refit_interval, 0 = frozen keys
                              ///< (the seed's); default 128; <= 2^20
  int32_t kvquant_n_sink;     ///< kvquant_n_sink: leading prefill tokens fp16,
                              ///< <= 4096
  int32_t kvquant_group_size; ///< must be 32: no effect (docs/RUNTIME.md)
  int32_t num_layers;         ///< layers held by the cache, <= 1024
  int32_t num_kv_heads;       ///< KV heads per layer, <= 1024
  int32_t head_dim;           ///< channels per head; kv_heads * head_dim
                              ///< <= 65535 (16-bit outlier positions)
  int32_t backend;            ///< kvq_backend
  int32_t rope_style;         ///< kvq_rope_style (NONE: post-RoPE keys)
  float rope_theta;           ///< RoPE base: pair i turns by
                              ///< theta^(-2i/head_dim) per position; in
                              ///< (1, 1e9], read when rope_style != NONE
                              ///< (head_dim must then be even)
  kvq_allocator allocator;    ///< zeroed = the runtime's own (above)
} kvq_config;

/// kvquant's default refit_interval: key levels are refit on every 128
/// decoded tokens (which wait fp16 until then). The seeds' default is 0
/// (levels fit at prefill and frozen), which breaks down on post-RoPE keys
/// in decode (docs/RUNTIME.md, "Why kvquant refits by default"); set
/// refit_interval = 0 to get it.
#define KVQ_DEFAULT_REFIT_INTERVAL 128

/// Fill *cfg with the defaults for `method`: the seeds' values -- bits 2
/// (kivi, kivi_sink) or 3 (kvquant) for keys and values, G = 32, R = 32,
/// sliding, 5 sinks (kivi_sink; 0 otherwise), outlier fraction 0.01, 8
/// Lloyd iterations, kvquant_n_sink 1, kvquant_group_size 32 -- except
/// refit_interval = KVQ_DEFAULT_REFIT_INTERVAL (the seeds': 0); 1 layer,
/// 1 KV head, head_dim 128, CPU, no RoPE (rope_theta 10000), malloc. No-op
/// when cfg is null.
KVQ_RT_EXPORT void kvq_config_init(kvq_config *cfg, kvq_method method);

/// Check a configuration without creating a cache.
KVQ_RT_EXPORT kvq_status kvq_config_validate(const kvq_config *cfg);

/*===----------------------------------------------------------------------===*
 * The quantized KV cache
 *===----------------------------------------------------------------------===*/

/// Opaque cache handle: per-layer quantized state of one sequence.
typedef struct kvq_cache kvq_cache_t;

/// The byte partition of a cache (or of one layer). Every cached token is in
/// exactly one of compressed / sink / residual. Byte fields count what the
/// cache really holds for its payload.
typedef struct kvq_stats {
  int64_t tokens;            ///< tokens cached (per layer, summed over layers)
  int64_t compressed_tokens; ///< tokens held as codes
  int64_t sink_tokens;       ///< tokens held fp16 as sinks
  int64_t residual_tokens;   ///< tokens held fp16 in the residual window
  int64_t code_bytes;        ///< packed codes
  int64_t scale_zero_bytes;  ///< fp16 scales and zero points (uniform)
  int64_t level_table_bytes; ///< fp16 NUQ level tables
  int64_t outlier_bytes;     ///< realised outliers: fp16 value + position
  int64_t outlier_count;     ///< realised outliers (elements)
  int64_t sink_bytes;        ///< fp16 sink rows (K and V)
  int64_t residual_bytes;    ///< fp16 residual rows (K and V)
  int64_t total_bytes;       ///< sum of the byte fields above
  int64_t fp16_bytes;        ///< what an fp16 cache would hold for `tokens`
  double effective_bits;     ///< 8 * total_bytes / cached K and V elements
} kvq_stats;

/// Create a cache for cfg. On success *out owns the cache (free it with
/// kvq_cache_destroy). The configuration is copied.
KVQ_RT_EXPORT kvq_status kvq_cache_create(const kvq_config *cfg,
                                          kvq_cache_t **out);

/// Free a cache and everything it holds. Null is a no-op.
KVQ_RT_EXPORT void kvq_cache_destroy(kvq_cache_t *cache);

/// Append n_tokens tokens of K and V to `layer`: keys and values are
/// [n_tokens, num_kv_heads, head_dim] of `dtype`. The first call for a layer
/// is its prefill; later calls are decode steps. A layer holds at most 2^32
/// tokens: n_tokens beyond what is left is KVQ_ERR_INVALID_ARGUMENT.
KVQ_RT_EXPORT kvq_status kvq_cache_update(kvq_cache_t *cache, int32_t layer,
                                          const void *keys, const void *values,
                                          int64_t n_tokens, kvq_dtype dtype);

/// Number of tokens cached for `layer`.
KVQ_RT_EXPORT kvq_status kvq_cache_length(const kvq_cache_t *cache,
                                          int32_t layer, int64_t *n_tokens);

/// Dequantize all cached K and V of `layer` into keys_out and values_out,
/// each [capacity_tokens, num_kv_heads, head_dim] of `dtype`; the first
/// kvq_cache_length() tokens are written. capacity_tokens smaller than the
/// length gives KVQ_ERR_BUFFER_TOO_SMALL. With KVQ_DTYPE_F16, a dequantized
/// value beyond the fp16 range (KIVI, a group spanning [-65504, 65504]) is
/// KVQ_ERR_NON_FINITE and nothing is written (f32 always works).
KVQ_RT_EXPORT kvq_status kvq_cache_fetch(const kvq_cache_t *cache,
                                         int32_t layer, void *keys_out,
                                         void *values_out,
                                         int64_t capacity_tokens,
                                         kvq_dtype dtype);

/// Causal attention of n_queries query steps over the cached tokens of
/// `layer`: queries are [n_queries, q_heads, head_dim] f32, q_heads a
/// multiple of num_kv_heads (grouped-query attention: query head h reads KV
/// head h / (q_heads / num_kv_heads)). Query i sits at position
/// length - n_queries + i and attends to positions 0..that position, with
/// scale 1/sqrt(head_dim). out is [n_queries, q_heads, head_dim] f32.
/// q_heads <= 4096. A query element that is not finite is
/// KVQ_ERR_NON_FINITE; one beyond 2^64 in magnitude (its scores could
/// overflow) is KVQ_ERR_INVALID_ARGUMENT.
KVQ_RT_EXPORT kvq_status kvq_cache_attend(const kvq_cache_t *cache,
                                          int32_t layer, const float *queries,
                                          int64_t n_queries, int32_t q_heads,
                                          float *out);

/*===----------------------------------------------------------------------===*
 * Threads from the host (docs/RUNTIME.md, "Threads")
 *===----------------------------------------------------------------------===*/

/// The host's parallel-for: call task(task_ctx, i) exactly once for every i
/// in [0, n), on any of the host's threads (the calling one included), in
/// any order, and return when every call has returned. The runtime never
/// starts threads of its own; this is how an engine (llama.cpp's pool,
/// IREE's task system, GCD) lends it its workers. Tasks never call back
/// into the host and never throw.
typedef void (*kvq_parallel_for_fn)(void *host_ctx, int64_t n,
                                    void (*task)(void *task_ctx, int64_t i),
                                    void *task_ctx);

typedef struct kvq_parallel {
  kvq_parallel_for_fn parallel_for; ///< null: run on the calling thread
  void *host_ctx;                   ///< passed back to parallel_for
  int32_t workers; ///< threads behind parallel_for, 1..KVQ_MAX_WORKERS (a
                   ///< hint: below 2 the runtime does not call it; results
                   ///< never depend on it)
} kvq_parallel;

#define KVQ_MAX_WORKERS 4096

/// Hand `cache` a parallel-for for kvq_cache_attend (decode attention is
/// split over fixed ranges of tokens and the partial softmaxes merged in a
/// fixed order, so the output has the same bits with any thread count or
/// none) and for the level fits of kvq_cache_update (kvquant; each key
/// channel and value row is fitted on its own, so the same bytes). p null
/// returns the cache to the process default (kvq_set_default_parallel). Forks
/// inherit it; kvq_cache_save does not store it. A null cache is
/// KVQ_ERR_NULL_POINTER, workers out of range KVQ_ERR_INVALID_ARGUMENT; either
/// leaves the cache unchanged. Not to be called while another thread uses the
/// cache.
KVQ_RT_EXPORT kvq_status kvq_cache_set_parallel(kvq_cache_t *cache,
                                                const kvq_parallel *p);

/// The parallel-for of every cache that has none of its own, including the
/// caches a compiled graph creates (the host calls this before running it).
/// p null: none (one thread, the default). Call it while no attention runs.
KVQ_RT_EXPORT kvq_status kvq_set_default_parallel(const kvq_parallel *p);

/// Byte partition of `layer`, or of the whole cache when layer == -1.
KVQ_RT_EXPORT kvq_status kvq_cache_stats(const kvq_cache_t *cache,
                                         int32_t layer, kvq_stats *out);

/// Absolute positions of the fp16 sink tokens of `layer`, ascending.
/// Writes min(count, capacity) positions and sets *count to the total.
KVQ_RT_EXPORT kvq_status kvq_cache_sink_positions(const kvq_cache_t *cache,
                                                  int32_t layer,
                                                  int64_t *positions,
                                                  int64_t capacity,
                                                  int64_t *count);

/*===----------------------------------------------------------------------===*
 * Cache lifecycle: truncate, fork, save, load (docs/RUNTIME.md, "Cache
 * lifecycle")
 *===----------------------------------------------------------------------===*/

/// Keep the first n_tokens tokens of every layer (layers holding fewer are
/// unchanged); n_tokens >= 0, else KVQ_ERR_INVALID_ARGUMENT.
/// Exact or refused: on KVQ_OK every layer is, bit for bit (fetch, attend,
/// stats, sink positions, kvq_cache_save), the layer a fresh cache would
/// hold after the same update calls restricted to the kept tokens (the call
/// that straddles the cut shortened to its kept part, later calls dropped).
/// A cut that cannot be exact is KVQ_ERR_NOT_EXACT and changes nothing
/// (nor does KVQ_ERR_OUT_OF_MEMORY). In short (docs/RUNTIME.md, "Cache
/// lifecycle"): fp16 always; kivi whenever the cut drops at most
/// residual_length tokens (the speculative-decoding rollback: rows that
/// left fp16 come back from a rollback history, which a loaded cache starts
/// without), deeper as far as that history goes; kivi_sink the same unless
/// a dropped token is among the top-k key norms; kvquant at or after the
/// end of the prefill fit, and when refitting not inside a completed refit
/// batch before the last (dropping at most refit_interval tokens after the
/// prefill is exact).
KVQ_RT_EXPORT kvq_status kvq_cache_truncate(kvq_cache_t *cache,
                                            int64_t n_tokens);

/// An independent copy of `cache` (same configuration and allocator), owned
/// by *out (free it with kvq_cache_destroy). Updating or truncating either
/// cache never changes the other.
KVQ_RT_EXPORT kvq_status kvq_cache_fork(const kvq_cache_t *cache,
                                        kvq_cache_t **out);

/// Serialize `cache` (the format of docs/RUNTIME.md, "Saved cache format":
/// little-endian, versioned, checksummed; its size is the cache's payload
/// kvq_stats.total_bytes plus a small header and per-layer bookkeeping).
/// *size receives the bytes needed. buffer null (capacity ignored) is a
/// size query and returns KVQ_OK. A non-null buffer with capacity < *size
/// gives KVQ_ERR_BUFFER_TOO_SMALL, writes nothing to buffer but still sets
/// *size (the one output written on failure, so a caller can retry).
KVQ_RT_EXPORT kvq_status kvq_cache_save(const kvq_cache_t *cache, void *buffer,
                                        int64_t capacity, int64_t *size);

/// Rebuild a cache from the `size` bytes at `data` written by
/// kvq_cache_save or kvq_metal_cache_save (on any architecture). allocator may
/// be null (the runtime's own) and replaces the saved cache's allocator, which
/// is not serialized. Bytes that fail any check (magic, version, checksum,
/// configuration, counts, internal consistency) give KVQ_ERR_CORRUPT_DATA with
/// a one-line message; no byte outside [data, data + size) is read and nothing
/// leaks.
KVQ_RT_EXPORT kvq_status kvq_cache_load(const void *data, int64_t size,
                                        const kvq_allocator *allocator,
                                        kvq_cache_t **out);

/*===----------------------------------------------------------------------===*
 * Stateless kernels (caller buffers; see the note on kvq_nuq_fit above)
 *
 * Inputs are [rows, cols] matrices of `dtype`, at most 2^48 elements
 * (KVQ_ERR_INVALID_ARGUMENT beyond). Scales, zeros and levels are
 * fp16 (uint16_t) because that is what the cache stores; kernels quantize
 * with the fp16-rounded parameters so that dequantization is consistent.
 *===----------------------------------------------------------------------===*/

/// Bytes needed for n codes of `bits` bits in KVQ_CODES_PACKED layout
/// (exact for every n up to INT64_MAX; 0 for n < 0 or bits outside 1..8).
KVQ_RT_EXPORT int64_t kvq_packed_size(int64_t n, int32_t bits);

/// Uniform min/max group quantization (docs/RUNTIME.md "Numerical decisions").
/// Groups of `group` elements along `axis`; scale/zero are
/// [rows, cols/group] (per-token) or [rows/group, cols] (per-channel).
/// scale = (max - min) / (2^bits - 1), zero = min (both fp16-rounded),
/// code = clamp(rint((x - zero) / scale), 0, 2^bits - 1); a group whose
/// fp16 scale is 0 gets scale 0 and codes 0. `exclude` (optional,
/// [rows, cols] uint8, non-zero = excluded) removes elements from the
/// group's min/max; an all-excluded group calibrates as constant 0.
KVQ_RT_EXPORT kvq_status kvq_group_quant(const void *x, kvq_dtype dtype,
                                         int64_t rows, int64_t cols,
                                         kvq_axis axis, int32_t group,
                                         int32_t bits, const uint8_t *exclude,
                                         kvq_code_layout layout, uint8_t *codes,
                                         uint16_t *scale, uint16_t *zero);

/// Inverse of kvq_group_quant: x' = code * scale + zero, written as `dtype`.
/// With KVQ_DTYPE_F16, an x' that rounds past the fp16 range (possible for
/// a group spanning [-65504, 65504]) is KVQ_ERR_NON_FINITE (use f32).
KVQ_RT_EXPORT kvq_status kvq_group_dequant(
    const uint8_t *codes, kvq_code_layout layout, const uint16_t *scale,
    const uint16_t *zero, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, int32_t bits, void *out, kvq_dtype dtype);

/// Scratch floats kvq_nuq_fit needs for vectors of length `len`: room to
/// gather a vector's eligible elements, then the fit's work (the radix
/// sort's keys, then prefix sums in double), 3 * len + 2 for len >= 1;
/// 0 for len < 1, INT64_MAX where that overflows. Changed in 0.3: it was
/// len, and the fit of a long vector allocated the rest.
KVQ_RT_EXPORT int64_t kvq_nuq_fit_scratch_size(int64_t len, int32_t bits);

/// Lloyd-Max non-uniform levels, one table of 2^bits ascending fp16 levels
/// per vector (a group of `group` elements along `axis`, as above). Levels
/// start at the quantiles (i + 0.5) / L of the vector's eligible elements
/// (linear interpolation), then `iters` (<= 1000) sweeps of
/// assign-to-nearest (ties to the lower level) and move-to-mean (an empty level
/// stays). `exclude` (optional) marks elements left out of the fit (outliers,
/// sinks); a vector with no eligible element gets all-zero levels. levels is
/// [n_vectors, 2^bits] in vector order (row-major over the scale shape).
KVQ_RT_EXPORT kvq_status kvq_nuq_fit(const void *x, kvq_dtype dtype,
                                     int64_t rows, int64_t cols, kvq_axis axis,
                                     int32_t group, int32_t bits, int32_t iters,
                                     const uint8_t *exclude, float *scratch,
                                     int64_t scratch_floats, uint16_t *levels);

/// Code of the nearest level (ties to the lower level) for each element.
KVQ_RT_EXPORT kvq_status kvq_nuq_quant(const void *x, kvq_dtype dtype,
                                       int64_t rows, int64_t cols,
                                       kvq_axis axis, int32_t group,
                                       int32_t bits, const uint16_t *levels,
                                       kvq_code_layout layout, uint8_t *codes);

/// Table lookup: x' = levels[vector][code].
KVQ_RT_EXPORT kvq_status kvq_nuq_dequant(const uint8_t *codes,
                                         kvq_code_layout layout,
                                         const uint16_t *levels, int64_t rows,
                                         int64_t cols, kvq_axis axis,
                                         int32_t group, int32_t bits, void *out,
                                         kvq_dtype dtype);

/// Rank-based dense-and-sparse split. Per vector, k = ceil(fraction * n)
/// over its n eligible elements (not in `exclude`); the k largest |x| are
/// marked in outlier_mask (1 = outlier), ties to the earlier index, exactly
/// k. threshold (optional, one float per vector) receives the k-th largest
/// |x| (+inf when k = 0). fraction must be in [0, 1).
KVQ_RT_EXPORT kvq_status kvq_outlier_split(
    const void *x, kvq_dtype dtype, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, float fraction, const uint8_t *exclude,
    uint8_t *outlier_mask, float *threshold);

/// Screen against frozen per-column thresholds: mask[r][c] = |x[r][c]| >=
/// threshold[c]. Used for decode keys.
KVQ_RT_EXPORT kvq_status kvq_outlier_screen(const void *x, kvq_dtype dtype,
                                            int64_t rows, int64_t cols,
                                            const float *threshold,
                                            uint8_t *outlier_mask);

/// Per-token key norm: keys [tokens, kv_heads, head_dim]; norms[t] = mean
/// over heads of the L2 norm of the head's key row.
KVQ_RT_EXPORT kvq_status kvq_key_norm(const void *keys, kvq_dtype dtype,
                                      int64_t tokens, int32_t kv_heads,
                                      int32_t head_dim, float *norms);

/// Top-k positions by norm, ties to the earlier position; positions are
/// written ascending. k must be <= tokens.
KVQ_RT_EXPORT kvq_status kvq_sink_select(const float *norms, int64_t tokens,
                                         int32_t k, int64_t *positions);

/*===----------------------------------------------------------------------===*
 * Dense layers (convert-linalg-to-kvq-matmul: projections and FFN)
 *===----------------------------------------------------------------------===*/

/// Element type of the weights kvq_matmul reads. F16 and BF16 weights stay
/// in that type in memory; the kernels widen them to float (exactly).
typedef enum kvq_weight_type {
  KVQ_WEIGHT_F32 = 0,  ///< float
  KVQ_WEIGHT_F16 = 1,  ///< uint16_t binary16 bit patterns
  KVQ_WEIGHT_BF16 = 2, ///< uint16_t bfloat16: the upper half of a float
  KVQ_WEIGHT_MAX_ENUM = 0x7fffffff
} kvq_weight_type;

/// y[i][j] += dot(x[i][0..k), w[j][0..k)) for i < m, j < n: a dense layer
/// with W stored [out][in] (row j of w holds output j's weights), so decode
/// (m = 1) is a matrix-vector product and prefill one matrix product. Rows
/// are x_stride, w_stride, y_stride elements apart (>= k, k, n); x and y
/// are float, w of w_type, each aligned to its elements. m, n or k of 0
/// changes nothing (k = 0 adds +0).
///
/// Every dot product is summed in one order, the same on every ISA
/// (reference, AVX2, AVX-512, NEON) and for any thread count, so the result
/// is bit-identical across them: 32 partial sums, partial sum l taking
/// elements l, l + 32, l + 64, ... in order with fused multiply-adds
/// (x * w + s rounded once), then added pairwise: s[l] + s[l + 16] for
/// l < 16, then + 8, + 4, + 2, + 1; that total is added to y once. Outputs
/// are split over the default parallel-for (kvq_set_default_parallel), each
/// computed whole by one task. Null pointers (with m, n, k > 0) are
/// KVQ_ERR_NULL_POINTER; negative sizes, short strides, misaligned buffers
/// and unknown weight types KVQ_ERR_INVALID_ARGUMENT; y changes only on
/// KVQ_OK.
KVQ_RT_EXPORT kvq_status kvq_matmul(const float *x, int64_t x_stride,
                                    const void *w, kvq_weight_type w_type,
                                    int64_t w_stride, float *y,
                                    int64_t y_stride, int64_t m, int64_t n,
                                    int64_t k);

/*===----------------------------------------------------------------------===*
 * Entry points for compiled graphs (convert-kvq-to-runtime)
 *
 * Generated code passes only pointers and scalars, so these flatten what the
 * functions above take as structs, and give the status check a home.
 *===----------------------------------------------------------------------===*/

/// kvq_cache_create with the configuration as scalars: one parameter per
/// field of kvq_config but the allocator (malloc), named and typed as the
/// field, in its order (KVQ_CONFIG_FIELDS, kvq/config_fields.h). Same
/// ownership and statuses.
KVQ_RT_EXPORT kvq_status
kvq_cache_create_flat(KVQ_CONFIG_FIELDS(KVQ_CONFIG_PARAM) kvq_cache_t **out);

/// The check generated after every runtime call. A non-zero status is
/// printed to stderr as "kvq: error: <site>: <status>: <message>" (unless
/// this thread turned that off with kvq_set_status_echo(0)) and kept, with
/// that line's text after "kvq: error: ", as this thread's pending status
/// (the first one wins) for the host to read with kvq_pending_error() and
/// kvq_take_pending_status(). Returns `status` unchanged. `site` may be
/// null.
KVQ_RT_EXPORT int32_t kvq_check_status(int32_t status, const char *site);

/// The first status recorded by kvq_check_status() on this thread since the
/// last call (KVQ_OK if none), and clears it (and kvq_pending_error()).
KVQ_RT_EXPORT kvq_status kvq_take_pending_status(void);

/// "<site>: <status>: <message>" of the pending status, "" if there is
/// none; valid until this thread's next kvq_take_pending_status().
KVQ_RT_EXPORT const char *kvq_pending_error(void);

/// Whether kvq_check_status() prints failures on this thread (1, the
/// default) or only records them (0): for a host that reports the pending
/// error itself, in one line, after the compiled call returns.
KVQ_RT_EXPORT void kvq_set_status_echo(int32_t enabled);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVQ_RUNTIME_H */
