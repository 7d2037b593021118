//===- quantize_neon.cpp - NEON uniform (de)quantization ------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Four floats per vector, two vectors per 8 codes. AArch64 has an exact
// vector division and round-to-nearest-even (vrndnq), so codes are computed
// with the reference's very operations; the signed-zero rule of the
// reference's sequential min is restored as on x86 (fixZeroSign).
//
//===----------------------------------------------------------------------===//
#include "../neon/neon_kernels.h"
#include "../neon/neon_util.h"

#include "bitpack.h"
#include "fp16.h"
#include "zero_sign.h"

#include <algorithm>

using namespace kvq;
using namespace kvq::neon;

namespace {

/// clamp(rint((x - z) / s), 0, maxc), 0 where the nonzero mask is clear.
inline uint32x4_t quantize4(float32x4_t x, float32x4_t z, float32x4_t s,
                            float32x4_t maxc, uint32x4_t nonzero) {
  float32x4_t q = vrndnq_f32(vdivq_f32(vsubq_f32(x, z), s));
  q = vminq_f32(vmaxq_f32(q, vdupq_n_f32(0.0f)), maxc);
  // Lanes with s == 0 hold NaN or inf here: masked to +0 before converting.
  q = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(q), nonzero));
  return vcvtq_u32_f32(q);
}

void groupQuantNeon(const GroupQuantArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const uint8_t *exclude = a.exclude;
  uint8_t *codes = a.codes;
  uint16_t *scale = a.scale, *zero = a.zero;
  const float levels = static_cast<float>((1 << bits) - 1);
  const float32x4_t maxc = vdupq_n_f32(levels);
  if (!exclude && g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0) {
    for (int64_t v = 0; v < g.vectors(); ++v) {
      const int64_t base = g.base(v);
      float32x4_t l0, h0, e0, e1;
      load8(x, dtype, base, l0, e1);
      h0 = vmaxq_f32(l0, e1);
      l0 = vminq_f32(l0, e1);
      for (int64_t i = 8; i < g.group; i += 8) {
        load8(x, dtype, base + i, e0, e1);
        l0 = vminq_f32(l0, vminq_f32(e0, e1));
        h0 = vmaxq_f32(h0, vmaxq_f32(e0, e1));
      }
      float lo = fixZeroSign(vminvq_f32(l0), x, dtype, base, g.group, 1);
      uniformParams(lo, vmaxvq_f32(h0), true, bits, &scale[v], &zero[v]);
      const float s = halfToFloat(scale[v]);
      const float32x4_t sv = vdupq_n_f32(s),
                        zv = vdupq_n_f32(halfToFloat(zero[v]));
      const uint32x4_t nz = vdupq_n_u32(s != 0.0f ? ~0u : 0u);
      for (int64_t i = 0; i < g.group; i += 8) {
        load8(x, dtype, base + i, e0, e1);
        writeCodes8(codes, layout, base + i, bits,
                    quantize4(e0, zv, sv, maxc, nz),
                    quantize4(e1, zv, sv, maxc, nz));
      }
    }
    return;
  }
  if (!exclude && g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0) {
    const int64_t C = g.cols, G = g.group;
    for (int64_t rg = 0; rg < g.rows / G; ++rg)
      for (int64_t c = 0; c < C; c += 8) {
        const int64_t base = rg * G * C + c;
        float32x4_t lo[2], hi[2], e[2];
        load8(x, dtype, base, lo[0], lo[1]);
        hi[0] = lo[0];
        hi[1] = lo[1];
        for (int64_t i = 1; i < G; ++i) {
          load8(x, dtype, base + i * C, e[0], e[1]);
          for (int k = 0; k < 2; ++k) {
            lo[k] = vminq_f32(lo[k], e[k]);
            hi[k] = vmaxq_f32(hi[k], e[k]);
          }
        }
        float los[8], his[8];
        vst1q_f32(los, lo[0]);
        vst1q_f32(los + 4, lo[1]);
        vst1q_f32(his, hi[0]);
        vst1q_f32(his + 4, hi[1]);
        float sF[8], zF[8];
        for (int lane = 0; lane < 8; ++lane) {
          float l = fixZeroSign(los[lane], x, dtype, base + lane, G, C);
          uniformParams(l, his[lane], true, bits, &scale[rg * C + c + lane],
                        &zero[rg * C + c + lane]);
          sF[lane] = halfToFloat(scale[rg * C + c + lane]);
          zF[lane] = halfToFloat(zero[rg * C + c + lane]);
        }
        float32x4_t s[2] = {vld1q_f32(sF), vld1q_f32(sF + 4)};
        float32x4_t z[2] = {vld1q_f32(zF), vld1q_f32(zF + 4)};
        uint32x4_t nz[2] = {vmvnq_u32(vceqq_f32(s[0], vdupq_n_f32(0.0f))),
                            vmvnq_u32(vceqq_f32(s[1], vdupq_n_f32(0.0f)))};
        for (int64_t i = 0; i < G; ++i) {
          load8(x, dtype, base + i * C, e[0], e[1]);
          writeCodes8(codes, layout, base + i * C, bits,
                      quantize4(e[0], z[0], s[0], maxc, nz[0]),
                      quantize4(e[1], z[1], s[1], maxc, nz[1]));
        }
      }
    return;
  }
  groupQuantRef(a);
}

/// x' = code * s + z with two roundings (vmulq then vaddq; the runtime is
/// built with -ffp-contract=off so they are not fused into fmla).
inline float32x4_t dequant4(uint32x4_t c, float32x4_t s, float32x4_t z) {
  return vaddq_f32(vmulq_f32(vcvtq_f32_u32(c), s), z);
}

void groupDequantNeon(const GroupDequantArgs &a) {
  const uint8_t *codes = a.codes;
  const int layout = a.layout, bits = a.bits;
  const uint16_t *scale = a.scale, *zero = a.zero;
  const Grid &g = a.grid;
  void *out = a.out;
  const kvq_dtype dtype = a.dtype;
  uint32x4_t c0, c1;
  if (g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0) {
    for (int64_t v = 0; v < g.vectors(); ++v) {
      const int64_t base = g.base(v);
      const float32x4_t s = vdupq_n_f32(halfToFloat(scale[v]));
      const float32x4_t z = vdupq_n_f32(halfToFloat(zero[v]));
      for (int64_t i = 0; i < g.group; i += 8) {
        readCodes8(codes, layout, base + i, bits, c0, c1);
        store8(out, dtype, base + i, dequant4(c0, s, z), dequant4(c1, s, z));
      }
    }
    return;
  }
  if (g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0) {
    const int64_t C = g.cols, G = g.group;
    for (int64_t rg = 0; rg < g.rows / G; ++rg)
      for (int64_t c = 0; c < C; c += 8) {
        float32x4_t s0, s1, z0, z1;
        load8(scale + rg * C + c, KVQ_DTYPE_F16, 0, s0, s1);
        load8(zero + rg * C + c, KVQ_DTYPE_F16, 0, z0, z1);
        for (int64_t i = 0; i < G; ++i) {
          const int64_t e = (rg * G + i) * C + c;
          readCodes8(codes, layout, e, bits, c0, c1);
          store8(out, dtype, e, dequant4(c0, s0, z0), dequant4(c1, s1, z1));
        }
      }
    return;
  }
  groupDequantRef(a);
}

} // namespace

void kvq::neon::fillQuantNeon(KernelTable &t) {
  t.packCodes = packCodesSwar;
  t.unpackCodes = unpackCodesSwar;
  t.groupQuant = groupQuantNeon;
  t.groupDequant = groupDequantNeon;
}
