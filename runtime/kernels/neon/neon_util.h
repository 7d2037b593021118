//===- neon_util.h - Shared helpers of the NEON kernels ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Loads and stores of fp16/f32 rows as float32x4 pairs, code (un)packing of
// eight codes and horizontal reductions for the arm64 kernel files. NEON is
// part of the AArch64 baseline, so no run-time check is needed. fp16 goes
// through vcvt_f32_f16 / vcvt_f16_f32 (round to nearest even under the
// default FPCR, which floatToHalf matches), not through the C++ _Float16
// type that g++-12 lacks on aarch64.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_NEON_NEON_UTIL_H
#define KVQ_RUNTIME_KERNELS_NEON_NEON_UTIL_H

#include "bitpack_swar.h"
#include "kvq/runtime.h"

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace kvq {
namespace neon {

/// Eight floats from x[i..i+8) of an fp16 or f32 buffer.
inline void load8(const void *x, kvq_dtype dtype, int64_t i, float32x4_t &lo,
                  float32x4_t &hi) {
  if (dtype == KVQ_DTYPE_F16) {
    uint16x8_t h = vld1q_u16(static_cast<const uint16_t *>(x) + i);
    lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
    hi = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)));
  } else {
    const float *f = static_cast<const float *>(x) + i;
    lo = vld1q_f32(f);
    hi = vld1q_f32(f + 4);
  }
}

/// Store eight floats to out[i..i+8) (fp16: round to nearest even).
inline void store8(void *out, kvq_dtype dtype, int64_t i, float32x4_t lo,
                   float32x4_t hi) {
  if (dtype == KVQ_DTYPE_F16) {
    uint16x8_t h = vcombine_u16(vreinterpret_u16_f16(vcvt_f16_f32(lo)),
                                vreinterpret_u16_f16(vcvt_f16_f32(hi)));
    vst1q_u16(static_cast<uint16_t *>(out) + i, h);
  } else {
    float *f = static_cast<float *>(out) + i;
    vst1q_f32(f, lo);
    vst1q_f32(f + 4, hi);
  }
}

/// Eight codes as two uint32x4 halves from eight bytes.
inline void widen8(uint64_t bytes, uint32x4_t &lo, uint32x4_t &hi) {
  uint16x8_t w = vmovl_u8(vcreate_u8(bytes));
  lo = vmovl_u16(vget_low_u16(w));
  hi = vmovl_u16(vget_high_u16(w));
}

/// Eight uint32 lanes (each < 256) -> eight bytes.
inline uint64_t narrow8(uint32x4_t lo, uint32x4_t hi) {
  uint16x8_t w = vcombine_u16(vmovn_u32(lo), vmovn_u32(hi));
  return vget_lane_u64(vreinterpret_u64_u8(vmovn_u16(w)), 0);
}

/// Codes of elements [e, e+8) as two uint32x4 halves.
inline void readCodes8(const uint8_t *codes, int layout, int64_t e, int bits,
                       uint32x4_t &lo, uint32x4_t &hi) {
  uint64_t bytes;
  if (layout == KVQ_CODES_UNPACKED)
    std::memcpy(&bytes, codes + e, 8);
  else
    bytes = expand8(loadBytes(codes + e * bits / 8, bits), bits);
  widen8(bytes, lo, hi);
}

inline void writeCodes8(uint8_t *codes, int layout, int64_t e, int bits,
                        uint32x4_t lo, uint32x4_t hi) {
  uint64_t bytes = narrow8(lo, hi);
  if (layout == KVQ_CODES_UNPACKED)
    std::memcpy(codes + e, &bytes, 8);
  else
    storeBytes(codes + e * bits / 8, compress8(bytes, bits), bits);
}

} // namespace neon
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_NEON_NEON_UTIL_H
