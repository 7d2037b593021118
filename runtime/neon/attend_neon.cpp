//===- attend_neon.cpp - NEON inner kernels of fused attention ------------===//
//
// Dot products and weighted sums of one head row (fp16 or packed codes)
// against the query vectors of its KV head, eight channels at a time, with
// explicit fmla: attention is compared with the reference to a tolerance,
// so fused multiply-adds are fine here (unlike in the quantizers).
//
//===----------------------------------------------------------------------===//
#include "neon_kernels.h"
#include "neon_util.h"

#include "bitpack.h"
#include "fp16.h"

using namespace kvq;
using namespace kvq::neon;

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

template <class Row>
void dotRow(const Row &row, const float *q, int64_t nq, int64_t d,
            float *out) {
  for (int64_t j = 0; j < nq; ++j) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
    for (int64_t c = 0; c < d; c += 8) {
      float32x4_t v0, v1;
      row(c, v0, v1);
      a0 = vfmaq_f32(a0, vld1q_f32(q + j * d + c), v0);
      a1 = vfmaq_f32(a1, vld1q_f32(q + j * d + c + 4), v1);
    }
    out[j] = vaddvq_f32(vaddq_f32(a0, a1));
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

bool aligned(int64_t first, int bits, int64_t d) {
  return (first * bits) % 8 == 0 && d % 8 == 0;
}

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

void mulHalfNeon(const uint16_t *h, const float *q, int64_t nq, int64_t d,
                 float *out) {
  if (d % 8 != 0)
    return referenceAttendOps().mulHalf(h, q, nq, d, out);
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
  if (d % 8 != 0)
    return referenceAttendOps().dotHalf(row, q, nq, d, out);
  dotRow(HalfRow{row}, q, nq, d, out);
}

void axpyHalfNeon(const uint16_t *row, const float *w, int64_t nq, int64_t d,
                  float *acc) {
  if (d % 8 != 0)
    return referenceAttendOps().axpyHalf(row, w, nq, d, acc);
  axpyRow(HalfRow{row}, TokenWeight{w}, nq, d, acc);
}

void dotCodesNeon(const uint8_t *packed, int64_t first, int bits,
                  const float *q, int64_t nq, int64_t d, float *out) {
  if (!aligned(first, bits, d))
    return referenceAttendOps().dotCodes(packed, first, bits, q, nq, d, out);
  dotRow(CodeRow{packed + first * bits / 8, bits}, q, nq, d, out);
}

void axpyCodesNeon(const uint8_t *packed, int64_t first, int bits,
                   const float *ws, int64_t G, int64_t nq, int64_t d,
                   float *acc) {
  if (!aligned(first, bits, d) || G % 8 != 0)
    return referenceAttendOps().axpyCodes(packed, first, bits, ws, G, nq, d,
                                          acc);
  axpyRow(CodeRow{packed + first * bits / 8, bits}, GroupWeight{ws, G, d / G},
          nq, d, acc);
}

void dotCodesRowsNeon(const uint8_t *const *rows, int64_t n, int bits,
                      const float *q, int64_t nq, int64_t d, float *out,
                      int64_t outStride) {
  for (int64_t r = 0; r < n; ++r)
    dotCodesNeon(rows[r], 0, bits, q, nq, d, out + r * outStride);
}

void axpyCodesRowsNeon(const uint8_t *const *rows, int64_t n, int bits,
                       const float *ws, int64_t wsStride, int64_t G,
                       int64_t nq, int64_t d, float *acc) {
  for (int64_t r = 0; r < n; ++r)
    axpyCodesNeon(rows[r], 0, bits, ws + r * wsStride, G, nq, d, acc);
}

void axpyHalfRowsNeon(const uint16_t *const *rows, int64_t n, const float *w,
                      int64_t wStride, int64_t nq, int64_t d, float *acc) {
  for (int64_t r = 0; r < n; ++r)
    axpyHalfNeon(rows[r], w + r * wStride, nq, d, acc);
}

} // namespace

void kvq::neon::fillAttendNeon(AttendOps &ops) {
  ops.halfToFloatN = halfToFloatNNeon;
  ops.mulHalf = mulHalfNeon;
  ops.dotHalf = dotHalfNeon;
  ops.axpyHalf = axpyHalfNeon;
  ops.dotCodes = dotCodesNeon;
  ops.axpyCodes = axpyCodesNeon;
  ops.dotCodesRows = dotCodesRowsNeon;
  ops.axpyCodesRows = axpyCodesRowsNeon;
  ops.axpyHalfRows = axpyHalfRowsNeon;
}
