//===- kvq_params.h - Kernel parameter blocks (host and MSL) ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The structs passed by value ([[buffer(n)]] constant blocks) to the kvq
// Metal kernels. This header is read by three compilers: the Metal compiler,
// the host C++ compiler (dispatch side) and the shim build; field types are
// 8-byte fields first, then 4-byte fields, so all three lay them out alike.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_KERNELS_KVQ_PARAMS_H
#define KVQ_RUNTIME_METAL_KERNELS_KVQ_PARAMS_H

#if defined(__METAL_VERSION__) || defined(KVQ_METAL_SHIM)
typedef uint kvq_u32;
typedef ulong kvq_u64;
typedef int kvq_i32;
#else
#include <stdint.h>
typedef uint32_t kvq_u32;
typedef uint64_t kvq_u64;
typedef int32_t kvq_i32;
#endif

/// A [rows, cols] matrix cut into `vectors` vectors of `group` elements
/// along `axis` (0 per token, 1 per channel), as in runtime.h.
struct kvq_metal_matrix {
  kvq_u64 rows;
  kvq_u64 cols;
  kvq_u64 vectors;
  kvq_u32 group;
  kvq_u32 axis;
  kvq_u32 bits;        ///< code width (2, 3, 4, 8)
  kvq_u32 dtype;       ///< kvq_dtype of the fp input or output
  kvq_u32 has_exclude; ///< the exclude buffer is meaningful
  kvq_u32 layout;      ///< kvq_code_layout of code inputs
  kvq_u32 iters;       ///< Lloyd sweeps
  float fraction;      ///< outlier fraction
};

/// Packing of `rows` streams of `n` unpacked codes each into rows of
/// `row_bytes` bytes (LSB-first, runtime.h KVQ_CODES_PACKED).
struct kvq_metal_pack {
  kvq_u64 rows;
  kvq_u64 n;
  kvq_u64 row_bytes;
  kvq_u32 bits;
  kvq_u32 reserved;
};

/// Key norms / sink selection.
struct kvq_metal_tokens {
  kvq_u64 tokens;
  kvq_u32 kv_heads;
  kvq_u32 head_dim;
  kvq_u32 dtype;
  kvq_u32 k; ///< sinks to select
};

/// One layer of a Metal KV cache as the attention and fetch kernels read
/// it (see docs/METAL.md "Cache layout").
struct kvq_metal_cache_view {
  kvq_u64 length;    ///< tokens cached
  kvq_u64 n_queries; ///< attention: query steps (the last n positions)
  kvq_u32 kv_heads;
  kvq_u32 head_dim;
  kvq_u32 q_heads;
  kvq_u32 group; ///< G
  kvq_u32 key_bits;
  kvq_u32 value_bits;
  kvq_u32 value_stride; ///< bytes per token in the value-code array
  kvq_u32 dtype;        ///< fetch: output kvq_dtype
  float scale;          ///< attention: 1 / sqrt(head_dim)
  kvq_u32 rope;         ///< kvq_rope_style of the stored keys (kvq_rope.h)
};

/// One layer of a Metal KVQuant cache as its attention and fetch kernels
/// read it (attend_kvquant.metal, docs/METAL.md "KVQuant layout").
struct kvq_metal_kvquant_view {
  kvq_u64 length;    ///< tokens cached
  kvq_u64 n_queries; ///< attention: query steps (the last n positions)
  kvq_u32 kv_heads;
  kvq_u32 head_dim;
  kvq_u32 q_heads;
  kvq_u32 key_bits;
  kvq_u32 value_bits;
  kvq_u32 table_stride; ///< bytes per key level table (segment)
  kvq_u32 key_codes;    ///< packed code bytes of a key row (outliers follow)
  kvq_u32 value_codes;  ///< packed code bytes of a value row
  kvq_u32 dtype;        ///< fetch: output kvq_dtype
  float scale;          ///< attention: 1 / sqrt(head_dim)
  kvq_u32 rope;         ///< kvq_rope_style of the stored keys (kvq_rope.h)
};

/// Where one token of a Metal KVQuant cache lives (one record per token,
/// in a device array; 4-byte fields only, so every compiler agrees).
struct kvq_metal_kvquant_token {
  kvq_i32 kref;    ///< >= 0: fp16 pool row of the key; < 0: quantized
  kvq_i32 vref;    ///< >= 0: fp16 pool row of the value; < 0: quantized
  kvq_u32 kblock;  ///< key arena offset: [packed codes][outliers]
  kvq_u32 vblock;  ///< value arena offset: [levels][packed codes][outliers]
  kvq_u32 kout;    ///< outliers of the key row
  kvq_u32 vout;    ///< outliers of the value row
  kvq_u32 segment; ///< key level table of the row
  kvq_u32 reserved;
};

#endif // KVQ_RUNTIME_METAL_KERNELS_KVQ_PARAMS_H
