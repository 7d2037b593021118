//===- attention.metal - Fused decode attention over the quantized cache --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The Metal cache layout (docs/METAL.md): per token, kref/vref say where its
// K and V rows live: >= 0 is a row of the fp16 pool (residual window or
// sink), < 0 is quantized. Quantized keys live in per-group blocks of the
// key arena ([C fp16 scales][C fp16 zeros][packed codes of the group's
// non-sink rows], as the CPU stores them), found through kgoff; quantized
// values in fixed-stride per-token blocks ([C/G scales][C/G zeros][codes]).
// Elements are dequantized exactly like the CPU's loadRow.
//
// kvq_cache_attend: one simdgroup per (query, query head); lanes split
// head_dim, the q.k dot product is a simd_sum, and every lane runs the same
// online softmax over the visible tokens, in float. kvq_cache_fetch: one
// thread per (token, channel). With a RoPE (p.rope), both read each key
// element rotated at its position: the element and its partner channel are
// dequantized and combined with the angle tables (kvq_rope.h).
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"
#include "kvq_rope.h"

using namespace metal;

/// Largest head_dim the attention kernel accepts (8 components per lane).
#define KVQ_K_MAX_HEAD_DIM 256u

/// Dequantized key element (t, c).
inline float kvq_cache_key(device const int *kref, device const half *pool,
                           device const uchar *karena, device const uint *kgoff,
                           constant kvq_metal_cache_view &p, ulong t, ulong c) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  int ref = kref[t];
  if (ref >= 0)
    return float(pool[ulong(ref) * channels + c]);
  ulong row = ulong(-(ref + 1));
  device const uchar *block = karena + kgoff[t / ulong(p.group)];
  device const half *params = (device const half *)block;
  uint code = kvq_code_at(block + kvq_uniform_codes_offset(channels),
                          KVQ_K_CODES_PACKED, row * channels + c, p.key_bits);
  return kvq_uniform_value(code, float(params[kvq_uniform_scale_half(c)]),
                           float(params[kvq_uniform_zero_half(channels, c)]));
}

/// Key element (t, c) as attention and fetch use it: rotated at position t
/// when the cache stores pre-RoPE keys.
inline float
kvq_cache_key_at(device const int *kref, device const half *pool,
                 device const uchar *karena, device const uint *kgoff,
                 device const float *rope_low, device const float *rope_high,
                 constant kvq_metal_cache_view &p, ulong t, ulong c) {
  const float x = kvq_cache_key(kref, pool, karena, kgoff, p, t, c);
  if (p.rope == KVQ_K_ROPE_NONE)
    return x;
  const ulong dim = ulong(p.head_dim), k = c % dim;
  const float y = kvq_cache_key(kref, pool, karena, kgoff, p, t,
                                c - k + kvq_rope_partner(p.rope, dim, k));
  return kvq_rope_rotate(rope_low, rope_high, p.rope, dim, t, k, x, y);
}

/// Dequantized value element (t, c).
inline float kvq_cache_value(device const int *vref, device const half *pool,
                             device const uchar *vq,
                             constant kvq_metal_cache_view &p, ulong t,
                             ulong c) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  int ref = vref[t];
  if (ref >= 0)
    return float(pool[ulong(ref) * channels + c]);
  const ulong groups = channels / ulong(p.group);
  device const uchar *block = vq + t * ulong(p.value_stride);
  device const half *params = (device const half *)block;
  ulong g = c / ulong(p.group);
  uint code = kvq_code_at(block + kvq_uniform_codes_offset(groups),
                          KVQ_K_CODES_PACKED, c, p.value_bits);
  return kvq_uniform_value(code, float(params[kvq_uniform_scale_half(g)]),
                           float(params[kvq_uniform_zero_half(groups, g)]));
}

kernel void kvq_cache_fetch(device const int *kref [[buffer(0)]],
                            device const int *vref [[buffer(1)]],
                            device const half *pool [[buffer(2)]],
                            device const uchar *karena [[buffer(3)]],
                            device const uint *kgoff [[buffer(4)]],
                            device const uchar *vq [[buffer(5)]],
                            device const float *rope_low [[buffer(6)]],
                            device const float *rope_high [[buffer(7)]],
                            device uchar *kout [[buffer(8)]],
                            device uchar *vout [[buffer(9)]],
                            constant kvq_metal_cache_view &p [[buffer(10)]],
                            uint i [[thread_position_in_grid]]) {
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  if (ulong(i) >= p.length * channels)
    return;
  const ulong t = ulong(i) / channels, c = ulong(i) % channels;
  kvq_store(kout, p.dtype, i,
            kvq_cache_key_at(kref, pool, karena, kgoff, rope_low, rope_high, p,
                             t, c));
  kvq_store(vout, p.dtype, i, kvq_cache_value(vref, pool, vq, p, t, c));
}

kernel void kvq_cache_attend(device const float *queries [[buffer(0)]],
                             device float *out [[buffer(1)]],
                             device const int *kref [[buffer(2)]],
                             device const int *vref [[buffer(3)]],
                             device const half *pool [[buffer(4)]],
                             device const uchar *karena [[buffer(5)]],
                             device const uint *kgoff [[buffer(6)]],
                             device const uchar *vq [[buffer(7)]],
                             device const float *rope_low [[buffer(8)]],
                             device const float *rope_high [[buffer(9)]],
                             constant kvq_metal_cache_view &p [[buffer(10)]],
                             uint group_id [[threadgroup_position_in_grid]],
                             uint lane [[thread_index_in_simdgroup]]) {
  const uint query = group_id / p.q_heads, head = group_id % p.q_heads;
  if (ulong(query) >= p.n_queries)
    return; // uniform over the simdgroup
  const uint dim = p.head_dim;
  const ulong kv_head = ulong(head / (p.q_heads / p.kv_heads));
  const ulong q_row = (ulong(query) * p.q_heads + head) * ulong(dim);
  const ulong last = p.length - p.n_queries + ulong(query); // causal
  float q[KVQ_K_MAX_HEAD_DIM / 32u], acc[KVQ_K_MAX_HEAD_DIM / 32u];
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
        float k = kvq_cache_key_at(kref, pool, karena, kgoff, rope_low,
                                   rope_high, p, t, kv_head * dim + j);
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
        float v = kvq_cache_value(vref, pool, vq, p, t, kv_head * dim + j);
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
