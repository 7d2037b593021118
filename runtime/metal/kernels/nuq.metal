//===- nuq.metal - Lloyd-Max non-uniform levels --------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_nuq_fit: one thread per vector gathers its eligible elements into its
// slice of a device scratch buffer, heap-sorts them, initialises the levels
// at the quantiles and runs the assign/update sweeps. Every value the CPU
// reference computes in double is computed in software binary64
// (kvq_f64.h), so the fitted levels are bit-identical. kvq_nuq_quant and
// kvq_nuq_dequant: one thread per element.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"
#include "kvq_f64.h"

using namespace metal;

/// Largest level count (8-bit codes).
#define KVQ_K_MAX_LEVELS 256u

/// Restore the max-heap property below node i of a[0, n).
inline void kvq_sift_down(device float *a, uint i, uint n) {
  for (;;) {
    uint child = 2u * i + 1u;
    if (child >= n)
      return;
    if (child + 1u < n && a[child] < a[child + 1u])
      child += 1u;
    if (!(a[i] < a[child]))
      return;
    float t = a[i];
    a[i] = a[child];
    a[child] = t;
    i = child;
  }
}

/// Ascending in-place heapsort (no recursion, no extra memory). Equal
/// values may swap, which changes nothing: -0 and +0 never reach a level
/// with a different sign (see docs/METAL.md).
inline void kvq_heap_sort(device float *a, uint n) {
  if (n < 2u)
    return;
  for (uint i = n / 2u; i-- > 0u;)
    kvq_sift_down(a, i, n);
  for (uint end = n - 1u; end > 0u; --end) {
    float t = a[0];
    a[0] = a[end];
    a[end] = t;
    kvq_sift_down(a, 0u, end);
  }
}

/// Ascending insertion sort of a few levels in thread memory.
inline void kvq_sort_levels(thread float *lv, uint count) {
  for (uint i = 1u; i < count; ++i) {
    float v = lv[i];
    uint j = i;
    while (j > 0u && v < lv[j - 1u]) {
      lv[j] = lv[j - 1u];
      --j;
    }
    lv[j] = v;
  }
}

/// Lloyd-Max on the m sorted values d[0, m): quantile initialisation with
/// linear interpolation at (i + 0.5) / count, then `iters` sweeps.
inline void kvq_lloyd(device float *d, uint m, uint count, uint iters,
                      thread float *lv) {
  if (m == 0u) {
    for (uint l = 0u; l < count; ++l)
      lv[l] = 0.0f;
    return;
  }
  kvq_heap_sort(d, m);
  const kvq_f64 last = kvq_f64_from_u64(ulong(m - 1u));
  for (uint i = 0u; i < count; ++i) {
    // q = (i + 0.5) / count == (2i + 1) / (2 count): the same rounding.
    kvq_f64 q = kvq_f64_div(kvq_f64_from_u64(ulong(2u * i + 1u)),
                            kvq_f64_from_u64(ulong(2u * count)));
    kvq_f64 pos = kvq_f64_mul(q, last);
    long lo = kvq_f64_to_i64(pos);
    long hi = lo + 1 < long(m) ? lo + 1 : lo;
    kvq_f64 frac = kvq_f64_sub(pos, kvq_f64_from_i64(lo));
    kvq_f64 a = kvq_f64_from_float(d[lo]);
    kvq_f64 b = kvq_f64_from_float(d[hi]);
    lv[i] =
        kvq_f64_to_float(kvq_f64_add(a, kvq_f64_mul(frac, kvq_f64_sub(b, a))));
  }
  // On sorted data nearest-level assignment is monotone, so each level's
  // cell is a run of consecutive elements: sum a run in binary64 in the
  // reference's order, then move the level to its mean.
  float next[KVQ_K_MAX_LEVELS];
  for (uint it = 0u; it < iters; ++it) {
    for (uint l = 0u; l < count; ++l)
      next[l] = lv[l]; // an empty level stays
    uint cell = kvq_nearest_level(lv, count, d[0]);
    kvq_f64 sum = 0ul;
    ulong n = 0ul;
    for (uint i = 0u; i <= m; ++i) {
      uint l = i < m ? kvq_nearest_level(lv, count, d[i]) : count;
      if (l != cell) {
        next[cell] = kvq_f64_to_float(kvq_f64_div(sum, kvq_f64_from_u64(n)));
        cell = l;
        sum = 0ul;
        n = 0ul;
      }
      if (i < m) {
        sum = kvq_f64_add(sum, kvq_f64_from_float(d[i]));
        n += 1ul;
      }
    }
    for (uint l = 0u; l < count; ++l)
      lv[l] = next[l];
    kvq_sort_levels(lv, count);
  }
}

/// Fit vector v's 2^bits levels; scratch holds `group` floats per vector.
kernel void kvq_nuq_fit(device const uchar *x [[buffer(0)]],
                        device const uchar *exclude [[buffer(1)]],
                        device float *scratch [[buffer(2)]],
                        device half *levels [[buffer(3)]],
                        constant kvq_metal_matrix &p [[buffer(4)]],
                        uint v [[thread_position_in_grid]]) {
  if (ulong(v) >= p.vectors)
    return;
  const ulong base = kvq_vector_base(p, v);
  const ulong stride = kvq_vector_stride(p);
  device float *d = scratch + ulong(v) * ulong(p.group);
  uint m = 0u;
  for (uint i = 0u; i < p.group; ++i) {
    ulong e = base + ulong(i) * stride;
    if (p.has_exclude == 0u || exclude[e] == 0u)
      d[m++] = kvq_load(x, p.dtype, e);
  }
  const uint count = 1u << p.bits;
  float lv[KVQ_K_MAX_LEVELS];
  kvq_lloyd(d, m, count, p.iters, lv);
  for (uint l = 0u; l < count; ++l)
    levels[ulong(v) * count + l] = half(lv[l]);
}

/// Element e: index of the nearest fp16 level of its vector (unpacked).
kernel void kvq_nuq_quant(device const uchar *x [[buffer(0)]],
                          device const half *levels [[buffer(1)]],
                          device uchar *codes [[buffer(2)]],
                          constant kvq_metal_matrix &p [[buffer(3)]],
                          uint e [[thread_position_in_grid]]) {
  if (ulong(e) >= p.rows * p.cols)
    return;
  const uint count = 1u << p.bits;
  device const half *table = levels + kvq_vector_of(p, e) * count;
  codes[e] = uchar(kvq_nearest_level(table, count, kvq_load(x, p.dtype, e)));
}

/// Element e: its vector's level for its code.
kernel void kvq_nuq_dequant(device const uchar *codes [[buffer(0)]],
                            device const half *levels [[buffer(1)]],
                            device uchar *out [[buffer(2)]],
                            constant kvq_metal_matrix &p [[buffer(3)]],
                            uint e [[thread_position_in_grid]]) {
  if (ulong(e) >= p.rows * p.cols)
    return;
  const uint count = 1u << p.bits;
  const uint code = kvq_code_at(codes, p.layout, e, p.bits);
  kvq_store(out, p.dtype, e, float(levels[kvq_vector_of(p, e) * count + code]));
}
