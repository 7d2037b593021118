//===- kvq_common.h - Helpers shared by the kvq MSL kernels -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Element access for fp16/f32 buffers, packed code access, the vector
// geometry of runtime.h, and the numerics that must match the CPU reference
// bit for bit (uniform parameters and codes, nearest NUQ level).
//
// Floating-point discipline (docs/RUNTIME.md "Numerical decisions"): arithmetic
// in float, one operation per statement where the reference rounds twice
// (code * scale, then + zero), no fused multiply-add. MSL 3.2 compilers are
// told so below; older ones rely on the host disabling fast math.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_KERNELS_KVQ_COMMON_H
#define KVQ_RUNTIME_METAL_KERNELS_KVQ_COMMON_H

#if defined(__METAL_VERSION__) && __METAL_VERSION__ >= 320
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
#endif

#include "block_layout.h" // runtime/layout: the blocks the host writes
#include "kvq_params.h"

/// kvq_dtype values and code layouts (runtime.h).
#define KVQ_K_DTYPE_F16 0u
#define KVQ_K_CODES_PACKED 1u
#define KVQ_K_AXIS_PER_TOKEN 0u

/// Element i of an fp16 or f32 buffer as float.
inline float kvq_load(device const uchar *x, uint dtype, ulong i) {
  if (dtype == KVQ_K_DTYPE_F16)
    return float(((device const half *)x)[i]);
  return ((device const float *)x)[i];
}

/// Store v as element i (fp16: rounded to nearest even).
inline void kvq_store(device uchar *out, uint dtype, ulong i, float v) {
  if (dtype == KVQ_K_DTYPE_F16)
    ((device half *)out)[i] = half(v);
  else
    ((device float *)out)[i] = v;
}

/// Code i of a packed (LSB-first) or unpacked code buffer.
inline uint kvq_code_at(device const uchar *codes, uint layout, ulong i,
                        uint bits) {
  if (layout != KVQ_K_CODES_PACKED)
    return uint(codes[i]);
  ulong bit = i * ulong(bits);
  ulong byte = bit >> 3;
  uint offset = uint(bit & 7ul);
  uint word = uint(codes[byte]);
  if (offset + bits > 8u)
    word |= uint(codes[byte + 1ul]) << 8;
  return (word >> offset) & ((1u << bits) - 1u);
}

/// Flat index of element 0 of vector v (vectors in row-major order over the
/// scale shape).
inline ulong kvq_vector_base(constant kvq_metal_matrix &p, ulong v) {
  if (p.axis == KVQ_K_AXIS_PER_TOKEN) {
    ulong per_row = p.cols / ulong(p.group);
    return (v / per_row) * p.cols + (v % per_row) * ulong(p.group);
  }
  return (v / p.cols) * ulong(p.group) * p.cols + v % p.cols;
}

/// Distance between consecutive elements of a vector.
inline ulong kvq_vector_stride(constant kvq_metal_matrix &p) {
  return p.axis == KVQ_K_AXIS_PER_TOKEN ? 1ul : p.cols;
}

/// The vector holding flat element e.
inline ulong kvq_vector_of(constant kvq_metal_matrix &p, ulong e) {
  ulong r = e / p.cols, c = e % p.cols;
  if (p.axis == KVQ_K_AXIS_PER_TOKEN)
    return r * (p.cols / ulong(p.group)) + c / ulong(p.group);
  return (r / ulong(p.group)) * p.cols + c;
}

/// Uniform code: clamp(rint((x - z) / s), 0, max_code), 0 when s == 0.
inline uint kvq_uniform_code(float x, float s, float z, float max_code) {
  if (s == 0.0f)
    return 0u;
  float d = x - z;
  float q = metal::rint(d / s); // rint: round half to even
  q = q < 0.0f ? 0.0f : (q > max_code ? max_code : q);
  return uint(q);
}

/// x' = code * scale + zero with two roundings (never fused).
inline float kvq_uniform_value(uint code, float s, float z) {
  float product = float(code) * s;
  float value = product + z;
  return value;
}

/// First index in [0, count) whose level is not below x (lower bound).
template <typename Levels>
inline uint kvq_lower_bound(Levels levels, uint count, float x) {
  uint first = 0u, n = count;
  while (n > 0u) {
    uint step = n / 2u;
    if (float(levels[first + step]) < x) {
      first += step + 1u;
      n -= step + 1u;
    } else {
      n = step;
    }
  }
  return first;
}

/// Index of the nearest of `count` ascending levels (fp16 in device memory
/// or float in thread memory); ties, and equal levels, go to the lowest
/// index, exactly like the reference's nearestLevel.
template <typename Levels>
inline uint kvq_nearest_level(Levels levels, uint count, float x) {
  uint hi = kvq_lower_bound(levels, count, x);
  if (hi == 0u)
    return 0u;
  uint below = hi - 1u;
  if (hi < count) {
    float d_lo = x - float(levels[below]);
    float d_hi = float(levels[hi]) - x;
    if (d_hi < d_lo)
      return hi;
  }
  return kvq_lower_bound(levels, count, float(levels[below]));
}

#endif // KVQ_RUNTIME_METAL_KERNELS_KVQ_COMMON_H
