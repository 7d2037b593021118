//===- sink.metal - Key norms and top-k sink positions -------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_key_norm: one thread per token, the mean over KV heads of each head's
// key L2 norm, accumulated in software binary64 like the reference.
// kvq_sink_select: one simdgroup ranks all tokens together: the bisection
// counts are simd_sum reductions over the lanes' slices, and the output
// positions are placed with exclusive prefix sums, so positions come out
// ascending with ties to the earlier position.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"
#include "kvq_f64.h"
#include "kvq_topk.h"

using namespace metal;

kernel void kvq_key_norm(device const uchar *keys [[buffer(0)]],
                         device float *norms [[buffer(1)]],
                         constant kvq_metal_tokens &p [[buffer(2)]],
                         uint t [[thread_position_in_grid]]) {
  if (ulong(t) >= p.tokens)
    return;
  const ulong channels = ulong(p.kv_heads) * ulong(p.head_dim);
  kvq_f64 total = 0ul;
  for (uint h = 0u; h < p.kv_heads; ++h) {
    kvq_f64 sq = 0ul;
    ulong row = ulong(t) * channels + ulong(h) * ulong(p.head_dim);
    for (uint d = 0u; d < p.head_dim; ++d) {
      kvq_f64 v = kvq_f64_from_float(kvq_load(keys, p.dtype, row + d));
      sq = kvq_f64_add(sq, kvq_f64_mul(v, v));
    }
    total = kvq_f64_add(total, kvq_f64_sqrt(sq));
  }
  norms[t] =
      kvq_f64_to_float(kvq_f64_div(total, kvq_f64_from_u64(ulong(p.kv_heads))));
}

/// Lane's count of norms in [first, end) whose bits are >= t.
inline uint kvq_count_at_least(device const float *norms, ulong first,
                               ulong end, uint t) {
  uint c = 0u;
  for (ulong i = first; i < end; ++i)
    c += kvq_magnitude(norms[i]) >= t ? 1u : 0u;
  return c;
}

/// Dispatched as exactly one simdgroup (32 threads); every lane runs the
/// same bisection (the counts are simdgroup-uniform).
kernel void kvq_sink_select(device const float *norms [[buffer(0)]],
                            device long *positions [[buffer(1)]],
                            constant kvq_metal_tokens &p [[buffer(2)]],
                            uint lane [[thread_index_in_simdgroup]]) {
  const ulong n = p.tokens;
  const uint k = p.k;
  const ulong slice = (n + 31ul) / 32ul;
  const ulong first = min(n, ulong(lane) * slice);
  const ulong end = min(n, first + slice);
  if (k == 0u)
    return;
  uint lo = 0u, hi = KVQ_K_BISECT_END;
  while (hi - lo > 1u) {
    uint mid = lo + (hi - lo) / 2u;
    uint c = simd_sum(kvq_count_at_least(norms, first, end, mid));
    if (c >= k)
      lo = mid;
    else
      hi = mid;
  }
  uint above = kvq_count_at_least(norms, first, end, lo + 1u);
  uint equal = kvq_count_at_least(norms, first, end, lo) - above;
  uint ties = k - simd_sum(above); // elements equal to lo to take, in order
  uint equal_before = simd_prefix_exclusive_sum(equal);
  uint my_ties = ties > equal_before ? min(ties - equal_before, equal) : 0u;
  ulong out = ulong(simd_prefix_exclusive_sum(above + my_ties));
  for (ulong i = first; i < end; ++i) {
    uint b = kvq_magnitude(norms[i]);
    bool take = b > lo;
    if (b == lo && my_ties > 0u) {
      take = true;
      --my_ties;
    }
    if (take)
      positions[out++] = long(i);
  }
}
