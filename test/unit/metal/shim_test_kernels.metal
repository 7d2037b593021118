//===- shim_test_kernels.metal - Kernels that exercise the executor ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Small MSL kernels whose results depend on barriers and simdgroup
// functions really synchronising, used by shim_test.cpp.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>
using namespace metal;

/// Each thread writes its id, waits at a barrier, then reads its right
/// neighbour's slot (device memory within one threadgroup): correct only if
/// every write happened before any read.
kernel void shim_rotate(device uint *slots [[buffer(0)]],
                        device uint *out [[buffer(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint tid [[thread_position_in_threadgroup]],
                        uint tgsize [[threads_per_threadgroup]]) {
  slots[gid] = gid * 10u;
  threadgroup_barrier(mem_flags::mem_device);
  uint base = gid - tid;
  out[gid] = slots[base + (tid + 1u) % tgsize];
}

/// Per simdgroup: sum, max and exclusive prefix sum of the lane values.
kernel void shim_simd(device const float *x [[buffer(0)]],
                      device float *sum [[buffer(1)]],
                      device float *mx [[buffer(2)]],
                      device uint *prefix [[buffer(3)]],
                      uint gid [[thread_position_in_grid]]) {
  float v = x[gid];
  sum[gid] = simd_sum(v);
  mx[gid] = simd_max(v);
  prefix[gid] = simd_prefix_exclusive_sum(gid);
}

/// Threads past `n` return early; the rest sum over the active lanes only.
kernel void shim_simd_partial(device float *out [[buffer(0)]],
                              constant uint &n [[buffer(1)]],
                              uint gid [[thread_position_in_grid]]) {
  if (gid >= n)
    return;
  out[gid] = simd_sum(1.0f);
}

/// Undefined in MSL: only even threads reach the barrier.
kernel void shim_divergent_barrier(device uint *out [[buffer(0)]],
                                   uint gid [[thread_position_in_grid]]) {
  if (gid % 2u == 0u)
    threadgroup_barrier(mem_flags::mem_device);
  out[gid] = gid;
}
