//===- attend_neon.cpp - NEON inner kernels of fused attention ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Dot products and weighted sums of one head row (fp16 or packed codes)
// against the query vectors of its KV head, eight channels at a time, with
// explicit fmla: attention is compared with the reference to a tolerance,
// so fused multiply-adds are fine here (unlike in the quantizers).
//
// Dot products follow the canonical order of the AVX2 kernels
// (runtime/kernels/attend/attend_avx2.cpp), so x86_64 and arm64 give the same bits
// (test/e2e/cross-arch.mlir): sixteen partial sums over c = l (mod 16),
// fused multiply-adds in channel order from +0, then reduce16's tree.
// Weighted sums are one fmla per element and row, rows in order (2-bit
// rows in pairs: one addition of pairTerm per element and pair).
// The shapes each kernel covers are the block-16 family's, shared with
// AVX2 (block16_family.h), so both ISAs give the same bits wherever the
// reference sums in another order; the kernels assert them.
//
//===----------------------------------------------------------------------===//
#include "../neon/neon_kernels.h"
#include "../neon/neon_util.h"

#include "bitpack.h"
#include "block16_family.h"
#include "fp16.h"

#include <cassert>

using namespace kvq;
using namespace kvq::neon;
using namespace kvq::block16;

namespace {

/// Eight channels c..c+8 of a row as floats.
struct HalfRow {
  const uint16_t *p;
  void operator()(int64_t c, float32x4_t &a, float32x4_t &b) const {
    load8(p, KVQ_DTYPE_F16, c, a, b);
  }
};

struct CodeRow {
  const uint8_t *p; ///< byte-aligned start of the row's codes
  int bits;
  void operator()(int64_t c, float32x4_t &a, float32x4_t &b) const {
    uint32x4_t lo, hi;
    readCodes8(p, KVQ_CODES_PACKED, c, bits, lo, hi);
    a = vcvtq_f32_u32(lo);
    b = vcvtq_f32_u32(hi);
  }
};

/// Eight channels looked up in level tables: levels[c * stride + code],
/// stride 2^bits for per-channel tables (keys) or 0 for one table per row
/// (values). NEON has no gather, so the lookups are scalar; the sums stay
/// dotRow's or axpyRow's.
struct LevelRow {
  const uint8_t *p; ///< byte-aligned start of the row's codes
  const float *levels;
  int bits;
  int64_t stride;
  void operator()(int64_t c, float32x4_t &a, float32x4_t &b) const {
    uint32x4_t lo, hi;
    readCodes8(p, KVQ_CODES_PACKED, c, bits, lo, hi);
    uint32_t code[8];
    vst1q_u32(code, lo);
    vst1q_u32(code + 4, hi);
    float v[8];
    for (int i = 0; i < 8; ++i)
      v[i] = levels[(c + i) * stride + code[i]];
    a = vld1q_f32(v);
    b = vld1q_f32(v + 4);
  }
};

/// The canonical tree over the sixteen partial sums a0 = S_0..3,
/// a1 = S_4..7, a2 = S_8..11, a3 = S_12..15: T_l = S_l + S_{l+8},
/// U_l = T_l + T_{l+4}, W_l = U_l + U_{l+2}, result W_0 + W_1 (what the
/// AVX2 kernels' hsum of two 8-lane accumulators computes).
inline float reduce16(float32x4_t a0, float32x4_t a1, float32x4_t a2,
                      float32x4_t a3) {
  const float32x4_t u = vaddq_f32(vaddq_f32(a0, a2), vaddq_f32(a1, a3));
  const float32x4_t w = vaddq_f32(u, vextq_f32(u, u, 2));
  return vgetq_lane_f32(w, 0) + vgetq_lane_f32(w, 1);
}

template <class Row>
void dotRow(const Row &row, const float *q, int64_t nq, int64_t d, float *out) {
  for (int64_t j = 0; j < nq; ++j) {
    const float *qj = q + j * d;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
      float32x4_t v0, v1, v2, v3;
      row(c, v0, v1);
      row(c + 8, v2, v3);
      a0 = vfmaq_f32(a0, vld1q_f32(qj + c), v0);
      a1 = vfmaq_f32(a1, vld1q_f32(qj + c + 4), v1);
      a2 = vfmaq_f32(a2, vld1q_f32(qj + c + 8), v2);
      a3 = vfmaq_f32(a3, vld1q_f32(qj + c + 12), v3);
    }
    out[j] = reduce16(a0, a1, a2, a3);
  }
}

template <class Row, class Weight>
void axpyRow(const Row &row, const Weight &weight, int64_t nq, int64_t d,
             float *acc) {
  for (int64_t c = 0; c < d; c += 8) {
    float32x4_t v0, v1;
    row(c, v0, v1);
    for (int64_t j = 0; j < nq; ++j) {
      float *a = acc + j * d + c;
      const float32x4_t w = vdupq_n_f32(weight(j, c));
      vst1q_f32(a, vfmaq_f32(vld1q_f32(a), w, v0));
      vst1q_f32(a + 4, vfmaq_f32(vld1q_f32(a + 4), w, v1));
    }
  }
}

struct TokenWeight {
  const float *w;
  float operator()(int64_t j, int64_t) const { return w[j]; }
};

struct GroupWeight {
  const float *ws;
  int64_t G, groups;
  float operator()(int64_t j, int64_t c) const {
    return ws[j * groups + c / G];
  }
};

void halfToFloatNNeon(const uint16_t *h, int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a, b;
    load8(h, KVQ_DTYPE_F16, i, a, b);
    vst1q_f32(out + i, a);
    vst1q_f32(out + i + 4, b);
  }
  for (; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

void halfRowsToFloatNeon(const uint16_t *const *rows, int64_t n, int64_t count,
                         float *out) {
  for (int64_t r = 0; r < n; ++r)
    halfToFloatNNeon(rows[r], count, out + r * count);
}

void mulHalfNeon(const uint16_t *h, const float *q, int64_t nq, int64_t d,
                 float *out) {
  assert(d % 8 == 0);
  for (int64_t c = 0; c < d; c += 8) {
    float32x4_t s0, s1;
    load8(h, KVQ_DTYPE_F16, c, s0, s1);
    for (int64_t j = 0; j < nq; ++j) {
      vst1q_f32(out + j * d + c, vmulq_f32(vld1q_f32(q + j * d + c), s0));
      vst1q_f32(out + j * d + c + 4,
                vmulq_f32(vld1q_f32(q + j * d + c + 4), s1));
    }
  }
}

void dotHalfNeon(const uint16_t *row, const float *q, int64_t nq, int64_t d,
                 float *out) {
  assert(whole16(d));
  dotRow(HalfRow{row}, q, nq, d, out);
}

void axpyHalfNeon(const uint16_t *row, const float *w, int64_t nq, int64_t d,
                  float *acc) {
  assert(whole16(d));
  axpyRow(HalfRow{row}, TokenWeight{w}, nq, d, acc);
}

void dotCodesNeon(const CodesDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  assert(aligned(first, bits, d));
  dotRow(CodeRow{packed + first * bits / 8, bits}, q, nq, d, out);
}

void axpyCodesNeon(const CodesAxpy &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(aligned(first, bits, d) && groupsOf8(G, d));
  axpyRow(CodeRow{packed + first * bits / 8, bits}, GroupWeight{ws, G, d / G},
          nq, d, acc);
}

void dotCodesRowsNeon(const CodeRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotCodesNeon(codeRowDot(a, r));
}

/// 2-bit rows in pairs (kernels.h): each lane computes pairTerm's
/// operations, fma(wb, b, wa * a), then one addition.
void axpyCodePairsNeon(const CodeRowsAxpy &args) {
  const uint8_t *const *rows = args.rows;
  const int64_t n = args.n;
  const float *ws = args.ws;
  const int64_t wsStride = args.wsStride, G = args.G, nq = args.nq, d = args.d;
  float *acc = args.acc;
  const int64_t groups = d / G;
  const int32_t shifts[4][4] = {{0, -2, -4, -6},
                                {-8, -10, -12, -14},
                                {-16, -18, -20, -22},
                                {-24, -26, -28, -30}};
  const uint32x4_t three = vdupq_n_u32(3);
  int64_t r = 0;
  for (; r + 2 <= n; r += 2) {
    const float *wa = ws + r * wsStride, *wb = wa + wsStride;
    for (int64_t c = 0; c < d; c += 16) {
      uint32_t xa, xb;
      std::memcpy(&xa, rows[r] + c / 4, 4);
      std::memcpy(&xb, rows[r + 1] + c / 4, 4);
      for (int k = 0; k < 4; ++k) {
        const int32x4_t s = vld1q_s32(shifts[k]);
        const float32x4_t a =
            vcvtq_f32_u32(vandq_u32(vshlq_u32(vdupq_n_u32(xa), s), three));
        const float32x4_t b =
            vcvtq_f32_u32(vandq_u32(vshlq_u32(vdupq_n_u32(xb), s), three));
        const int64_t ch = c + 4 * k;
        for (int64_t j = 0; j < nq; ++j) {
          const int64_t g = j * groups + ch / G;
          float *o = acc + j * d + ch;
          const float32x4_t t =
              vfmaq_f32(vmulq_n_f32(a, wa[g]), vdupq_n_f32(wb[g]), b);
          vst1q_f32(o, vaddq_f32(vld1q_f32(o), t));
        }
      }
    }
  }
  if (r < n) // the lone last row: one FMA per element
    axpyCodesNeon(codeRowAxpy(args, r));
}

void axpyCodesRowsNeon(const CodeRowsAxpy &a) {
  assert(whole16(a.d) && groups8(a.G));
  if (a.bits == 2)
    return axpyCodePairsNeon(a);
  for (int64_t r = 0; r < a.n; ++r)
    axpyCodesNeon(codeRowAxpy(a, r));
}

void axpyHalfRowsNeon(const HalfRowsAxpy &a) {
  const uint16_t *const *rows = a.rows;
  const int64_t n = a.n;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  for (int64_t r = 0; r < n; ++r)
    axpyHalfNeon(rows[r], w + r * wStride, nq, d, acc);
}

/// Per-channel lookup tables (KVQuant keys): the canonical order with
/// additions instead of fused multiply-adds, as the AVX2 gather version.
void dotLutNeon(const LutDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *lut = a.lut;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  assert(aligned(first, bits, d));
  const uint8_t *p = packed + first * bits / 8;
  const int64_t L = int64_t{1} << bits;
  for (int64_t j = 0; j < nq; ++j) {
    const float *t = lut + j * d * L;
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
      uint8_t code[16];
      for (int h = 0; h < 2; ++h) {
        const uint64_t w =
            expand8(loadBytes(p + (c + 8 * h) * bits / 8, bits), bits);
        std::memcpy(code + 8 * h, &w, 8);
      }
      float v[16];
      for (int i = 0; i < 16; ++i)
        v[i] = t[(c + i) * L + code[i]];
      a0 = vaddq_f32(a0, vld1q_f32(v));
      a1 = vaddq_f32(a1, vld1q_f32(v + 4));
      a2 = vaddq_f32(a2, vld1q_f32(v + 8));
      a3 = vaddq_f32(a3, vld1q_f32(v + 12));
    }
    out[j] = reduce16(a0, a1, a2, a3);
  }
}

/// dotLutRows as one dotLut per row.
void dotLutRowsByRowNeon(const LutRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotLutNeon(lutRowDot(a, r));
}

void axpyLevelRowsNeon(const LevelRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *levels = a.levels;
  const int64_t levelStride = a.levelStride;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(whole16(d));
  for (int64_t r = 0; r < n; ++r)
    axpyRow(LevelRow{rows[r], levels + r * levelStride, bits, 0},
            TokenWeight{w + r * wStride}, nq, d, acc);
}

/// The NEON member of the block-16 family (block16_family.h).
struct NeonKernels {
  static constexpr auto halfToFloatN = halfToFloatNNeon;
  static constexpr auto halfRowsToFloat = halfRowsToFloatNeon;
  static constexpr auto mulHalf = mulHalfNeon;
  static constexpr auto dotHalf = dotHalfNeon;
  static constexpr auto axpyHalf = axpyHalfNeon;
  static constexpr auto axpyHalfRows = axpyHalfRowsNeon;
  static constexpr auto dotCodes = dotCodesNeon;
  static constexpr auto dotCodesRows = dotCodesRowsNeon;
  static constexpr auto dotLut = dotLutNeon;
  static constexpr auto dotLutRows = dotLutRowsByRowNeon;
  static constexpr auto axpyCodes = axpyCodesNeon;
  static constexpr auto axpyCodesRows = axpyCodesRowsNeon;
  static constexpr auto axpyLevelRows = axpyLevelRowsNeon;
  /// The reference: one addition per element and row, the same operations
  /// the AVX2 version does.
  static constexpr std::nullptr_t axpyLutRows = nullptr;
  /// Any width, 8 bits too (AVX2: 2 to 4): one FMA per element and row,
  /// the reference's bits either way.
  static bool levelRowsCover(int bits) { return supportedBits(bits); }
};

} // namespace

void kvq::neon::fillAttendNeon(const AttendShape &s, AttendOps &ops) {
  block16::fillAttend<NeonKernels>(s, ops);
}
