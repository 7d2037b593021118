//===- uniform.metal - Uniform min/max group quantization ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_uniform_quant: one thread per vector computes the group's min/max over
// its non-excluded elements, the fp16 scale and zero, and the unpacked codes.
// kvq_pack_codes: one thread per output byte packs unpacked codes LSB-first,
// so packing never needs two threads to share a byte. kvq_uniform_dequant:
// one thread per element.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "kvq_common.h"

using namespace metal;

/// Calibrate and quantize vector v: codes is [rows, cols] unpacked, scale
/// and zero one fp16 per vector.
kernel void kvq_uniform_quant(device const uchar *x [[buffer(0)]],
                              device const uchar *exclude [[buffer(1)]],
                              device uchar *codes [[buffer(2)]],
                              device half *scale [[buffer(3)]],
                              device half *zero [[buffer(4)]],
                              constant kvq_metal_matrix &p [[buffer(5)]],
                              uint v [[thread_position_in_grid]]) {
  if (ulong(v) >= p.vectors)
    return;
  const ulong base = kvq_vector_base(p, v);
  const ulong stride = kvq_vector_stride(p);
  bool any = false;
  float lo = 0.0f, hi = 0.0f;
  for (uint i = 0u; i < p.group; ++i) {
    ulong e = base + ulong(i) * stride;
    if (p.has_exclude != 0u && exclude[e] != 0u)
      continue;
    float val = kvq_load(x, p.dtype, e);
    lo = any ? (val < lo ? val : lo) : val;
    hi = any ? (val > hi ? val : hi) : val;
    any = true;
  }
  // An all-excluded group calibrates as constant 0; a range that rounds to
  // a zero fp16 scale is treated as constant (codes 0).
  const float levels = float((1u << p.bits) - 1u);
  half z = half(0.0f), s = half(0.0f);
  if (any) {
    z = half(lo);
    float range = hi - lo;
    s = half(range / levels);
    if (float(s) == 0.0f)
      s = half(0.0f);
  }
  scale[v] = s;
  zero[v] = z;
  const float sf = float(s), zf = float(z);
  for (uint i = 0u; i < p.group; ++i) {
    ulong e = base + ulong(i) * stride;
    codes[e] = uchar(kvq_uniform_code(kvq_load(x, p.dtype, e), sf, zf, levels));
  }
}

/// Byte t of the packed output: every code overlapping bits [8t, 8t + 8) of
/// its row's stream, masked to `bits`; bits past the last code stay 0.
kernel void kvq_pack_codes(device const uchar *codes [[buffer(0)]],
                           device uchar *out [[buffer(1)]],
                           constant kvq_metal_pack &p [[buffer(2)]],
                           uint t [[thread_position_in_grid]]) {
  if (ulong(t) >= p.rows * p.row_bytes)
    return;
  const ulong row = ulong(t) / p.row_bytes, byte = ulong(t) % p.row_bytes;
  const ulong first_bit = byte * 8ul;
  const uint mask = (1u << p.bits) - 1u;
  ulong first = first_bit / ulong(p.bits);
  ulong end = (first_bit + 8ul + ulong(p.bits) - 1ul) / ulong(p.bits);
  end = end < p.n ? end : p.n;
  uint acc = 0u;
  for (ulong i = first; i < end; ++i) {
    uint code = uint(codes[row * p.n + i]) & mask;
    long shift = long(i * ulong(p.bits)) - long(first_bit);
    acc |= shift >= 0 ? code << uint(shift) : code >> uint(-shift);
  }
  out[t] = uchar(acc & 0xffu);
}

/// Element e: code * scale + zero of its vector, written as p.dtype.
kernel void kvq_uniform_dequant(device const uchar *codes [[buffer(0)]],
                                device const half *scale [[buffer(1)]],
                                device const half *zero [[buffer(2)]],
                                device uchar *out [[buffer(3)]],
                                constant kvq_metal_matrix &p [[buffer(4)]],
                                uint e [[thread_position_in_grid]]) {
  if (ulong(e) >= p.rows * p.cols)
    return;
  const ulong v = kvq_vector_of(p, e);
  const uint code = kvq_code_at(codes, p.layout, e, p.bits);
  kvq_store(out, p.dtype, e,
            kvq_uniform_value(code, float(scale[v]), float(zero[v])));
}
