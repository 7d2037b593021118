//===- strict_mode_error.metal - Must NOT compile in strict mode ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A helper taking a thread-space pointer called with a device pointer: an
// error in MSL, and (thanks to the distinct address spaces) in the shim.
// ctest expects the compiler to reject this file.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>
using namespace metal;

inline float first(thread const float *p) { return p[0]; }

kernel void misuse(device const float *x [[buffer(0)]],
                   device float *y [[buffer(1)]],
                   uint gid [[thread_position_in_grid]]) {
  y[gid] = first(x);
}
