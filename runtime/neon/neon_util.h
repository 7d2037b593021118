//===- neon_util.h - Shared helpers of the NEON kernels ---------*- C++ -*-===//
//
// Loads and stores of fp16/f32 rows as float32x4 pairs, code (un)packing of
// eight codes and horizontal reductions for the arm64 kernel files. NEON is
// part of the AArch64 baseline, so no run-time check is needed. fp16 goes
// through vcvt_f32_f16 / vcvt_f16_f32 (round to nearest even under the
// default FPCR, which floatToHalf matches), not through the C++ _Float16
// type that g++-12 lacks on aarch64.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_NEON_NEON_UTIL_H
#define KVQ_RUNTIME_NEON_NEON_UTIL_H

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

/// Eight byte codes (each < 2^bits) -> 8*bits bits, LSB first.
inline uint64_t compress8(uint64_t w, int bits) {
  if (bits == 8)
    return w;
  const uint64_t b = static_cast<uint64_t>(bits);
  const uint64_t m16 = (uint64_t{1} << (2 * b)) - 1;
  const uint64_t m32 = (uint64_t{1} << (4 * b)) - 1;
  const uint64_t m64 = (uint64_t{1} << (8 * b)) - 1;
  w = (w | (w >> (8 - b))) & (m16 * 0x0001000100010001ull);
  w = (w | (w >> (16 - 2 * b))) & (m32 * 0x0000000100000001ull);
  return (w | (w >> (32 - 4 * b))) & m64;
}

/// Inverse of compress8.
inline uint64_t expand8(uint64_t w, int bits) {
  if (bits == 8)
    return w;
  const uint64_t b = static_cast<uint64_t>(bits);
  const uint64_t m8 = (uint64_t{1} << b) - 1;
  const uint64_t m16 = (uint64_t{1} << (2 * b)) - 1;
  const uint64_t m32 = (uint64_t{1} << (4 * b)) - 1;
  w = (w | (w << (32 - 4 * b))) & (m32 * 0x0000000100000001ull);
  w = (w | (w << (16 - 2 * b))) & (m16 * 0x0001000100010001ull);
  return (w | (w << (8 - b))) & (m8 * 0x0101010101010101ull);
}

/// The `bits` bytes of 8 codes at a byte boundary, as a little-endian word.
inline uint64_t loadBytes(const uint8_t *p, int bits) {
  uint64_t w = 0;
  switch (bits) {
  case 2: std::memcpy(&w, p, 2); break;
  case 3: std::memcpy(&w, p, 3); break;
  case 4: std::memcpy(&w, p, 4); break;
  default: std::memcpy(&w, p, 8); break;
  }
  return w;
}

inline void storeBytes(uint8_t *p, uint64_t w, int bits) {
  switch (bits) {
  case 2: std::memcpy(p, &w, 2); break;
  case 3: std::memcpy(p, &w, 3); break;
  case 4: std::memcpy(p, &w, 4); break;
  default: std::memcpy(p, &w, 8); break;
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

#endif // KVQ_RUNTIME_NEON_NEON_UTIL_H
