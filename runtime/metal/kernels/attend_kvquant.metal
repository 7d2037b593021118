//===- attend_kvquant.metal - Attention and fetch over a KVQuant cache ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The Metal KVQuant layout (docs/METAL.md "KVQuant layout"): one
// kvq_metal_kvquant_token record per token says where its K and V rows
// live. kref/vref >= 0 is a row of the fp16 pool (the prefill sinks, and in
// refit mode the tokens waiting for their batch's fit); < 0 is quantized:
//  - a key row is [packed codes][kout x (fp16 value, uint16 channel)] in
//    the key arena at kblock, its levels are key level table `segment`
//    (C x 2^key_bits fp16, channel-major) of the table array;
//  - a value row is [kv_heads x 2^value_bits fp16 levels][packed codes]
//    [vout x (fp16 value, uint16 channel)] in the value arena at vblock.
// These are the CPU store's blocks byte for byte (cpu/stores/kvquant).
// Outlier lists are sorted by channel and may start at an odd offset, so
// they are read byte by byte and searched by bisection. An element is its
// code's level, or its outlier's fp16 value: exactly the CPU's loadRow.
//
// kvq_kvquant_attend: one simdgroup per (query, query head), lanes split
// head_dim, simd_sum dot products, online softmax in float (the structure
// of kvq_cache_attend). kvq_kvquant_fetch: one thread per (token, channel).
// With a RoPE (p.rope), both read each key element rotated at its position
// (kvq_rope.h), as kvq_cache_attend / kvq_cache_fetch do.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"
#include "kvq_rope.h"

using namespace metal;

/// Largest head_dim the attention kernel accepts (8 components per lane).
#define KVQ_K_KVQ_MAX_HEAD_DIM 256u

/// The little-endian uint16 at index i of a byte array.
inline uint kvq_kvq_u16(device const uchar *bytes, ulong i) {
  return uint(bytes[2ul * i]) | (uint(bytes[2ul * i + 1ul]) << 8);
}

/// The element of channel c: `dense`, unless channel c is one of the
/// `count` outliers of the list (pairs of fp16 value and channel, ascending
/// channels), in which case its stored fp16 value.
inline float kvq_kvq_patch(device const uchar *list, uint count, uint c,
                           float dense) {
  uint first = 0u, n = count;
  while (n > 0u) { // lower bound of c among the channels
    uint step = n / 2u;
    if (kvq_kvq_u16(list, kvq_outlier_channel_half(first + step)) < c) {
      first += step + 1u;
      n -= step + 1u;
    } else {
      n = step;
    }
  }
  if (first < count && kvq_kvq_u16(list, kvq_outlier_channel_half(first)) == c)
    return float(as_type<half>(ushort(kvq_kvq_u16(list, kvq_outlier_value_half(first)))));
  return dense;
}

/// Key element (t, c).
inline float kvq_kvq_key(device const kvq_metal_kvquant_token *tok,
                         device const half *pool, device const uchar *karena,
                         device const uchar *tables,
                         constant kvq_metal_kvquant_view &p, ulong t, ulong c) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  const int ref = tok[t].kref;
  if (ref >= 0)
    return float(pool[ulong(ref) * channels + c]);
  device const uchar *row = karena + tok[t].kblock;
  device const half *levels =
      (device const half *)(tables +
                            ulong(tok[t].segment) * ulong(p.table_stride));
  const uint code = kvq_code_at(row, KVQ_K_CODES_PACKED, c, p.key_bits);
  const float dense = float(levels[kvq_level_half(c, p.key_bits, code)]);
  return kvq_kvq_patch(row + p.key_codes, tok[t].kout, uint(c), dense);
}

/// Key element (t, c) as attention and fetch use it: rotated at position t
/// when the cache stores pre-RoPE keys.
inline float kvq_kvq_key_at(device const kvq_metal_kvquant_token *tok,
                            device const half *pool, device const uchar *karena,
                            device const uchar *tables,
                            device const float *rope_low,
                            device const float *rope_high,
                            constant kvq_metal_kvquant_view &p, ulong t,
                            ulong c) {
  const float x = kvq_kvq_key(tok, pool, karena, tables, p, t, c);
  if (p.rope == KVQ_K_ROPE_NONE)
    return x;
  const ulong dim = ulong(p.head_dim), k = c % dim;
  const float y = kvq_kvq_key(tok, pool, karena, tables, p, t,
                              c - k + kvq_rope_partner(p.rope, dim, k));
  return kvq_rope_rotate(rope_low, rope_high, p.rope, dim, t, k, x, y);
}

/// Value element (t, c).
inline float kvq_kvq_value(device const kvq_metal_kvquant_token *tok,
                           device const half *pool, device const uchar *varena,
                           constant kvq_metal_kvquant_view &p, ulong t,
                           ulong c) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  const int ref = tok[t].vref;
  if (ref >= 0)
    return float(pool[ulong(ref) * channels + c]);
  device const uchar *block = varena + tok[t].vblock;
  device const half *levels = (device const half *)block;
  device const uchar *packed =
      block + kvq_kvquant_value_codes_offset(p.kv_heads, p.value_bits);
  const uint code = kvq_code_at(packed, KVQ_K_CODES_PACKED, c, p.value_bits);
  const float dense =
      float(levels[kvq_level_half(c / ulong(p.head_dim), p.value_bits, code)]);
  return kvq_kvq_patch(packed + p.value_codes, tok[t].vout, uint(c), dense);
}

kernel void kvq_kvquant_fetch(device const kvq_metal_kvquant_token *tok
                              [[buffer(0)]],
                              device const half *pool [[buffer(1)]],
                              device const uchar *karena [[buffer(2)]],
                              device const uchar *varena [[buffer(3)]],
                              device const uchar *tables [[buffer(4)]],
                              device const float *rope_low [[buffer(5)]],
                              device const float *rope_high [[buffer(6)]],
                              device uchar *kout [[buffer(7)]],
                              device uchar *vout [[buffer(8)]],
                              constant kvq_metal_kvquant_view &p [[buffer(9)]],
                              uint i [[thread_position_in_grid]]) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  if (ulong(i) >= p.length * channels)
    return;
  const ulong t = ulong(i) / channels, c = ulong(i) % channels;
  kvq_store(
      kout, p.dtype, i,
      kvq_kvq_key_at(tok, pool, karena, tables, rope_low, rope_high, p, t, c));
  kvq_store(vout, p.dtype, i, kvq_kvq_value(tok, pool, varena, p, t, c));
}

kernel void kvq_kvquant_attend(device const float *queries [[buffer(0)]],
                               device float *out [[buffer(1)]],
                               device const kvq_metal_kvquant_token *tok
                               [[buffer(2)]],
                               device const half *pool [[buffer(3)]],
                               device const uchar *karena [[buffer(4)]],
                               device const uchar *varena [[buffer(5)]],
                               device const uchar *tables [[buffer(6)]],
                               device const float *rope_low [[buffer(7)]],
                               device const float *rope_high [[buffer(8)]],
                               constant kvq_metal_kvquant_view &p [[buffer(9)]],
                               uint group_id [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
  const uint query = group_id / p.q_heads, head = group_id % p.q_heads;
  if (ulong(query) >= p.n_queries)
    return; // uniform over the simdgroup
  const uint dim = p.head_dim;
  const ulong kv_head = ulong(head / (p.q_heads / p.kv_heads));
  const ulong q_row = (ulong(query) * p.q_heads + head) * ulong(dim);
  const ulong last = p.length - p.n_queries + ulong(query); // causal
  float q[KVQ_K_KVQ_MAX_HEAD_DIM / 32u], acc[KVQ_K_KVQ_MAX_HEAD_DIM / 32u];
  const uint per_lane = (dim + 31u) / 32u;
  for (uint r = 0u; r < per_lane; ++r) {
    uint j = lane + 32u * r;
    q[r] = j < dim ? queries[q_row + j] : 0.0f;
    acc[r] = 0.0f;
  }
  float run_max = as_type<float>(0xff800000u); // -inf
  float run_sum = 0.0f;
  for (ulong t = 0ul; t <= last; ++t) {
    float part = 0.0f;
    for (uint r = 0u; r < per_lane; ++r) {
      uint j = lane + 32u * r;
      if (j < dim) {
        float k = kvq_kvq_key_at(tok, pool, karena, tables, rope_low, rope_high,
                                 p, t, kv_head * dim + j);
        float prod = q[r] * k;
        part = part + prod;
      }
    }
    float score = simd_sum(part) * p.scale;
    if (score > run_max) {
      float rescale = metal::exp(run_max - score);
      run_sum = run_sum * rescale;
      for (uint r = 0u; r < per_lane; ++r)
        acc[r] = acc[r] * rescale;
      run_max = score;
    }
    float w = metal::exp(score - run_max);
    run_sum = run_sum + w;
    for (uint r = 0u; r < per_lane; ++r) {
      uint j = lane + 32u * r;
      if (j < dim) {
        float v = kvq_kvq_value(tok, pool, varena, p, t, kv_head * dim + j);
        float prod = w * v;
        acc[r] = acc[r] + prod;
      }
    }
  }
  for (uint r = 0u; r < per_lane; ++r) {
    uint j = lane + 32u * r;
    if (j < dim)
      out[q_row + j] = acc[r] / run_sum;
  }
}
