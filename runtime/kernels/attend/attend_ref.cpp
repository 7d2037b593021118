//===- attend_ref.cpp - Portable inner kernels of fused attention ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The reference AttendOps: plain loops over one head row, used where no SIMD
// table exists and as the oracle of the SIMD attention ops. Codes are read
// with packedCodeAt, so any bit offset works.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "blocks.h"
#include "fp16.h"
#include "kernels.h"

#include <algorithm>

using namespace kvq;

namespace {

void halfToFloatNRef(const uint16_t *h, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

void halfRowsToFloatRef(const uint16_t *const *rows, int64_t n, int64_t count,
                        float *out) {
  for (int64_t r = 0; r < n; ++r)
    halfToFloatNRef(rows[r], count, out + r * count);
}

void mulHalfRef(const uint16_t *h, const float *q, int64_t nq, int64_t d,
                float *out) {
  for (int64_t c = 0; c < d; ++c) {
    float s = halfToFloat(h[c]);
    for (int64_t j = 0; j < nq; ++j)
      out[j * d + c] = q[j * d + c] * s;
  }
}

void dotHalfRef(const uint16_t *row, const float *q, int64_t nq, int64_t d,
                float *out) {
  for (int64_t j = 0; j < nq; ++j)
    out[j] = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    float v = halfToFloat(row[c]);
    for (int64_t j = 0; j < nq; ++j)
      out[j] += q[j * d + c] * v;
  }
}

void axpyHalfRef(const uint16_t *row, const float *w, int64_t nq, int64_t d,
                 float *acc) {
  for (int64_t c = 0; c < d; ++c) {
    float v = halfToFloat(row[c]);
    for (int64_t j = 0; j < nq; ++j)
      acc[j * d + c] += w[j] * v;
  }
}

void dotCodesRef(const CodesDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  for (int64_t j = 0; j < nq; ++j)
    out[j] = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    float v = packedCodeAt(packed, first + c, bits);
    for (int64_t j = 0; j < nq; ++j)
      out[j] += q[j * d + c] * v;
  }
}

void axpyCodesRef(const CodesAxpy &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  const int64_t groups = d / G;
  for (int64_t c = 0; c < d; ++c) {
    float v = packedCodeAt(packed, first + c, bits);
    for (int64_t j = 0; j < nq; ++j)
      acc[j * d + c] += ws[j * groups + c / G] * v;
  }
}

void dotLutRef(const LutDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *lut = a.lut;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t L = int64_t{1} << bits;
  for (int64_t j = 0; j < nq; ++j)
    out[j] = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    int64_t code = packedCodeAt(packed, first + c, bits);
    for (int64_t j = 0; j < nq; ++j)
      out[j] += lut[(j * d + c) * L + code];
  }
}

/// Codes unpacked 64 at a time (whole bytes: 64 codes are 8 * bits bytes)
/// by the word-at-a-time unpacker, then one product and sum each.
void dequantCodesRef(const uint8_t *packed, int64_t n, int bits,
                     const float *scale, const float *zero, float *out) {
  uint8_t codes[64];
  for (int64_t c0 = 0; c0 < n; c0 += 64) {
    const int64_t m = std::min<int64_t>(64, n - c0);
    unpackCodesSwar(packed + c0 / 8 * bits, m, bits, codes);
    for (int64_t i = 0; i < m; ++i)
      out[c0 + i] = uniformDequant(codes[i], scale[c0 + i], zero[c0 + i]);
  }
}

void outlierScoresRef(const OutlierScores &a) {
  const OutlierList<const uint8_t> list{a.entries};
  const int64_t L = int64_t{1} << a.bits;
  for (int64_t j = 0; j < a.nq; ++j)
    for (int64_t o = 0; o < a.k; ++o) {
      const OutlierEntry e = list.at(o);
      const int64_t h = e.channel / a.d, cc = e.channel % a.d;
      const int64_t i = (h * a.nq + j) * a.d + cc;
      const float product = a.q[i] * halfToFloat(e.value);
      const float term =
          product - a.lut[i * L + packedCodeAt(a.codes, e.channel, a.bits)];
      a.scores[h * a.nq + j] += term;
    }
}

void outlierAxpyRef(const OutlierAxpy &a) {
  const OutlierList<const uint8_t> list{a.entries};
  for (int64_t o = 0; o < a.k; ++o) {
    const OutlierEntry e = list.at(o);
    const int64_t h = e.channel / a.d, cc = e.channel % a.d;
    const float x = halfToFloat(e.value);
    const float level =
        a.levels[h * a.levelCount + packedCodeAt(a.codes, e.channel, a.bits)];
    for (int64_t j = 0; j < a.nq; ++j) {
      const float w = a.w[h * a.nq + j];
      a.acc[(h * a.nq + j) * a.d + cc] += w * x - w * level;
    }
  }
}

void levelColumnsRef(const LevelColumns &a) {
  const int64_t L = int64_t{1} << a.bits;
  for (int64_t c = 0; c < a.d; ++c)
    for (int64_t r = 0; r < a.n; ++r)
      a.cols[c * kLevelColumnRows + r] =
          a.levels[c * L + packedCodeAt(a.rows[r], a.first + c, a.bits)];
}

void dotLutRowsRef(const LutRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotLutRef(lutRowDot(a, r));
}

void axpyLutRowsRef(const LutRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *luts = a.luts;
  const int64_t lutStride = a.lutStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  const int64_t E = lutEntries(bits);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) {
      const int64_t code = packedCodeAt(rows[r], c, bits);
      for (int64_t j = 0; j < nq; ++j)
        acc[j * d + c] += luts[r * lutStride + j * E + code];
    }
}

void dotCodesRowsRef(const CodeRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotCodesRef(codeRowDot(a, r));
}

void axpyCodesRowsRef(const CodeRowsAxpy &args) {
  const uint8_t *const *rows = args.rows;
  const int64_t n = args.n;
  const int bits = args.bits;
  const float *ws = args.ws;
  const int64_t wsStride = args.wsStride, G = args.G, nq = args.nq, d = args.d;
  float *acc = args.acc;
  int64_t r = 0;
  if (bits == 2) { // rows in pairs, one addition of pairTerm per element
    const int64_t groups = d / G;
    for (; r + 2 <= n; r += 2) {
      const float *wa = ws + r * wsStride, *wb = wa + wsStride;
      for (int64_t c = 0; c < d; ++c) {
        const unsigned a = packedCodeAt(rows[r], c, 2);
        const unsigned b = packedCodeAt(rows[r + 1], c, 2);
        for (int64_t j = 0; j < nq; ++j) {
          const int64_t g = j * groups + c / G;
          acc[j * d + c] += pairTerm(wa[g], a, wb[g], b);
        }
      }
    }
  }
  for (; r < n; ++r) // fused: the contraction is spelled out
    for (int64_t c = 0; c < d; ++c) {
      const float v = packedCodeAt(rows[r], c, bits);
      for (int64_t j = 0; j < nq; ++j) {
        float &a = acc[j * d + c];
        a = __builtin_fmaf(ws[r * wsStride + j * (d / G) + c / G], v, a);
      }
    }
}

void axpyHalfRowsRef(const HalfRowsAxpy &a) {
  const uint16_t *const *rows = a.rows;
  const int64_t n = a.n;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  for (int64_t r = 0; r < n; ++r)
    axpyHalfRef(rows[r], w + r * wStride, nq, d, acc);
}

void dotNibbleRowsRef(const NibbleRowsDot &a) {
  const uint8_t *codes = a.codes;
  const int64_t n = a.n, r0 = a.r0, m = a.m, nib0 = a.nib0;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  const int64_t P = d * bits / 4;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < nq; ++j) {
      float S[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t i = 0; i < P; ++i)
        S[i & 3] += nibbleTerm(q + j * d, i,
                               nibbleAt(codes, (nib0 + i) * n + r0 + r), bits);
      out[r * outStride + j] = (S[0] + S[1]) + (S[2] + S[3]);
    }
}

void axpyLevelRowsRef(const LevelRowsAxpy &args) {
  const uint8_t *const *rows = args.rows;
  const int64_t n = args.n;
  const int bits = args.bits;
  const float *levels = args.levels;
  const int64_t levelStride = args.levelStride;
  const float *w = args.w;
  const int64_t wStride = args.wStride, nq = args.nq, d = args.d;
  float *acc = args.acc;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) {
      const float v = levels[r * levelStride + packedCodeAt(rows[r], c, bits)];
      for (int64_t j = 0; j < nq; ++j) {
        float &a = acc[j * d + c];
        a = __builtin_fmaf(w[r * wStride + j], v, a);
      }
    }
}

} // namespace

const AttendOps &kvq::referenceAttendOps() {
  static const AttendOps ops = [] {
    AttendOps o{};
    o.halfToFloatN = halfToFloatNRef;
    o.halfRowsToFloat = halfRowsToFloatRef;
    o.dequantCodes = dequantCodesRef;
    o.mulHalf = mulHalfRef;
    o.dotHalf = dotHalfRef;
    o.axpyHalf = axpyHalfRef;
    o.dotCodes = dotCodesRef;
    o.axpyCodes = axpyCodesRef;
    o.dotCodesRows = dotCodesRowsRef;
    o.axpyCodesRows = axpyCodesRowsRef;
    o.axpyHalfRows = axpyHalfRowsRef;
    o.dotLut = dotLutRef;
    o.dotLutRows = dotLutRowsRef;
    o.outlierScores = outlierScoresRef;
    o.outlierAxpy = outlierAxpyRef;
    o.levelColumns = levelColumnsRef;
    o.axpyLutRows = axpyLutRowsRef;
    o.dotNibbleRows = dotNibbleRowsRef;
    o.axpyLevelRows = axpyLevelRowsRef;
    // groupWeightsHalf null: halfRowsToFloat, then groupWeightsPortable.
    // ropeNibbleTiles null: the portable tile loops (rope_keys.h).
    // ropeCodeRows null: loadKeys, then ropeScoresRows.
    // ropeHalfRows null: ropeScoresHalfRows.
    return o;
  }();
  return ops;
}
