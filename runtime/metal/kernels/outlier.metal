//===- outlier.metal - Rank-based dense-and-sparse split -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_outlier_split: one thread per vector marks exactly k = ceil(f * n)
// largest |x| among its n eligible elements, ties to the earlier index
// (k computed in software binary64 like the reference), and reports the
// k-th largest |x|. kvq_outlier_screen: one thread per element compares
// against a frozen per-column threshold.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"
#include "kvq_f64.h"
#include "kvq_topk.h"

using namespace metal;

/// Binary64 of 1e-6, the reference's guard against rounding k up.
#define KVQ_K_ONE_MICRO 0x3eb0c6f7a0b5ed8dul

/// k = ceil(fraction * eligible - 1e-6) clamped to [0, eligible].
inline uint kvq_outlier_count(float fraction, uint eligible) {
  if (!(fraction > 0.0f) || eligible == 0u)
    return 0u;
  kvq_f64 prod = kvq_f64_mul(kvq_f64_from_float(fraction),
                             kvq_f64_from_u64(ulong(eligible)));
  long k = kvq_f64_ceil_i64(kvq_f64_sub(prod, KVQ_K_ONE_MICRO));
  if (k < 0)
    return 0u;
  return k > long(eligible) ? eligible : uint(k);
}

kernel void kvq_outlier_split(device const uchar *x [[buffer(0)]],
                              device const uchar *exclude [[buffer(1)]],
                              device uchar *mask [[buffer(2)]],
                              device float *threshold [[buffer(3)]],
                              constant kvq_metal_matrix &p [[buffer(4)]],
                              uint v [[thread_position_in_grid]]) {
  if (ulong(v) >= p.vectors)
    return;
  const ulong base = kvq_vector_base(p, v);
  const ulong stride = kvq_vector_stride(p);
  const bool has_ex = p.has_exclude != 0u;
  uint eligible = 0u;
  for (uint i = 0u; i < p.group; ++i)
    eligible += (has_ex && exclude[base + ulong(i) * stride] != 0u) ? 0u : 1u;
  const uint k = kvq_outlier_count(p.fraction, eligible);
  uint lo = 0u;
  if (k > 0u) {
    uint hi = KVQ_K_BISECT_END;
    while (hi - lo > 1u) {
      uint mid = lo + (hi - lo) / 2u;
      uint c = 0u;
      for (uint i = 0u; i < p.group; ++i) {
        ulong e = base + ulong(i) * stride;
        if (!(has_ex && exclude[e] != 0u) &&
            kvq_magnitude(kvq_load(x, p.dtype, e)) >= mid)
          ++c;
      }
      if (c >= k)
        lo = mid;
      else
        hi = mid;
    }
  }
  // Elements strictly above the k-th magnitude, then ties in index order.
  uint above = 0u;
  if (k > 0u)
    for (uint i = 0u; i < p.group; ++i) {
      ulong e = base + ulong(i) * stride;
      if (!(has_ex && exclude[e] != 0u) &&
          kvq_magnitude(kvq_load(x, p.dtype, e)) > lo)
        ++above;
    }
  uint ties = k - above;
  for (uint i = 0u; i < p.group; ++i) {
    ulong e = base + ulong(i) * stride;
    bool take = false;
    if (k > 0u && !(has_ex && exclude[e] != 0u)) {
      uint b = kvq_magnitude(kvq_load(x, p.dtype, e));
      if (b > lo) {
        take = true;
      } else if (b == lo && ties > 0u) {
        take = true;
        --ties;
      }
    }
    mask[e] = take ? uchar(1) : uchar(0);
  }
  threshold[v] = k > 0u ? as_type<float>(lo) : as_type<float>(0x7f800000u);
}

kernel void kvq_outlier_screen(device const uchar *x [[buffer(0)]],
                               device const float *threshold [[buffer(1)]],
                               device uchar *mask [[buffer(2)]],
                               constant kvq_metal_matrix &p [[buffer(3)]],
                               uint e [[thread_position_in_grid]]) {
  if (ulong(e) >= p.rows * p.cols)
    return;
  float v = metal::fabs(kvq_load(x, p.dtype, e));
  mask[e] = v >= threshold[ulong(e) % p.cols] ? uchar(1) : uchar(0);
}
