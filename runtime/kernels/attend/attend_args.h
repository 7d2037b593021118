//===- attend_args.h - Attention op operands --------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fused attention inner kernels' shape and operands, and the terms
// every ISA must compute alike. kernels.h holds AttendOps, the table of these
// ops; the kernels are in this folder (the pre-RoPE ones in rope/).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_ATTEND_ATTEND_ARGS_H
#define KVQ_RUNTIME_KERNELS_ATTEND_ATTEND_ARGS_H

#include <cstdint>
#include <cstring>

namespace kvq {

//===----------------------------------------------------------------------===//
// Fused attention inner kernels (attention.h drives them)
//===----------------------------------------------------------------------===//

/// What the attention ops' fast paths depend on: fixed when a cache is
/// created (kvq_config), so a cache picks its ops once (selectAttendOps).
/// The stores call every op with these: d = head_dim (mulHalf also with
/// d = heads * head_dim), key ops (dotCodes, dotCodesRows, dotLut,
/// dotLutRows, dotNibbleRows) with keyBits, value ops
/// (axpyCodes, axpyCodesRows, axpyLutRows, axpyLevelRows) with valueBits
/// and G, and every `first` a multiple of d. Only nq (query steps x query
/// heads per KV head) varies per call.
struct AttendShape {
  int64_t d = 0;                  ///< head_dim
  int64_t heads = 0;              ///< KV heads
  int64_t G = 0;                  ///< channels per value group (KIVI; 0: none)
  int keyBits = 0, valueBits = 0; ///< code widths (0: no codes)
};

// The operands of the AttendOps entries with six or more, by name (their
// contracts are at the entries, kernels.h; the five-operand fp16 entries
// keep BLAS-like positional arguments).

/// dotCodes' operands.
struct CodesDot {
  const uint8_t *packed = nullptr; ///< a packed code stream
  int64_t first = 0;               ///< the row's first code index
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< [nq]
};

/// axpyCodes' operands.
struct CodesAxpy {
  const uint8_t *packed = nullptr;
  int64_t first = 0;
  int bits = 0;
  const float *ws = nullptr; ///< [nq][d/G] group weights
  int64_t G = 0;             ///< channels per group
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotCodesRows' operands.
struct CodeRowsDot {
  const uint8_t *const *rows = nullptr; ///< n byte-aligned head rows
  int64_t n = 0;
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// axpyHalfRows' operands.
struct HalfRowsAxpy {
  const uint16_t *const *rows = nullptr; ///< n fp16 head rows
  int64_t n = 0;
  const float *w = nullptr; ///< nq weights per row, wStride apart
  int64_t wStride = 0;
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotHalfRows' operands.
struct HalfRowsDot {
  const uint16_t *rows = nullptr; ///< n fp16 head rows, rowStride apart
  int64_t rowStride = 0, n = 0;
  const float *q = nullptr; ///< [nq][d]
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// dotLut's operands.
struct LutDot {
  const uint8_t *packed = nullptr;
  int64_t first = 0;
  int bits = 0;
  const float *lut = nullptr; ///< [nq][d][2^bits] per-channel tables
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< [nq]
};

/// dotLutRows' operands.
struct LutRowsDot {
  const uint8_t *const *rows = nullptr; ///< n rows (token blocks)
  int64_t n = 0;
  int64_t first = 0; ///< the head's first code index in every row
  int bits = 0;
  const float *lut = nullptr; ///< [nq][d][2^bits] per-channel tables
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r * outStride + j]
  int64_t outStride = 0;
};

/// Rows per tile of levelColumns (the lanes of an AVX-512 register).
constexpr int64_t kLevelColumnRows = 16;

/// levelColumns' operands.
struct LevelColumns {
  const uint8_t *const *rows = nullptr; ///< n <= kLevelColumnRows rows
  int64_t n = 0;
  int64_t first = 0; ///< the head's first code index in every row
  int bits = 0;
  const float *levels = nullptr; ///< [d][2^bits] per-channel levels
  int64_t d = 0;
  float *cols = nullptr; ///< cols[c * kLevelColumnRows + r]
};

/// outlierScores' operands: one KVQuant key row's outliers.
struct OutlierScores {
  const uint8_t *entries = nullptr; ///< k outlier entries (blocks.h)
  int64_t k = 0;
  const uint8_t *codes = nullptr; ///< the row's packed codes, every head
  int bits = 0;
  const float *q = nullptr;   ///< [heads][nq][d] queries
  const float *lut = nullptr; ///< [heads][nq][d][2^bits] product tables
  int64_t nq = 0, d = 0;
  float *scores = nullptr; ///< [heads][nq] the row's scores
};

/// outlierAxpy's operands: one KVQuant value row's outliers.
struct OutlierAxpy {
  const uint8_t *entries = nullptr; ///< k outlier entries (blocks.h)
  int64_t k = 0;
  const uint8_t *codes = nullptr; ///< the row's packed codes, every head
  int bits = 0;
  const float *levels = nullptr; ///< [heads][levelCount] the row's levels
  int64_t levelCount = 0;
  const float *w = nullptr; ///< [heads][nq] the row's attention weights
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [heads][nq][d]
};

/// Whether the indices an outlier kernel forms for a list of k entries
/// stay below 2^31: an entry of channel c = h*d + cc forms indices below
/// (h + 1) * d * nq * scale <= (c + d) * nq * scale, and the last entry has
/// the largest channel (ascending), so one bound without a division (the
/// check runs per row). SIMD versions gather with 32-bit lane indices and
/// take the reference otherwise (~2^27 query elements per KV head or more:
/// gigabytes of product tables).
inline bool outlierIndicesFit(const uint8_t *entries, int64_t k, int64_t nq,
                              int64_t d, int64_t scale) {
  if (k == 0)
    return true;
  if (nq >= (int64_t{1} << 31))
    return false;
  uint16_t last[2]; // value, channel (blocks.h)
  std::memcpy(last, entries + 4 * (k - 1), sizeof last);
  return (last[1] + d) * nq * scale < (int64_t{1} << 31);
}

/// axpyLutRows' operands.
struct LutRowsAxpy {
  const uint8_t *const *rows = nullptr;
  int64_t n = 0;
  int bits = 0;
  const float *luts = nullptr; ///< a table per row and query vector
  int64_t lutStride = 0;       ///< floats between rows' tables
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// axpyCodesRows' operands.
struct CodeRowsAxpy {
  const uint8_t *const *rows = nullptr; ///< n byte-aligned head rows
  int64_t n = 0;
  int bits = 0;
  const float *ws = nullptr; ///< group weights, wsStride floats per row
  int64_t wsStride = 0;
  int64_t G = 0; ///< channels per group
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// axpyLevelRows' operands.
struct LevelRowsAxpy {
  const uint8_t *const *rows = nullptr;
  int64_t n = 0;
  int bits = 0;
  const float *levels = nullptr; ///< a table of levels per row
  int64_t levelStride = 0;
  const float *w = nullptr; ///< nq weights per row, wStride apart
  int64_t wStride = 0;
  int64_t nq = 0, d = 0;
  float *acc = nullptr; ///< [nq][d]
};

/// dotNibbleRows' operands.
struct NibbleRowsDot {
  const uint8_t *codes = nullptr; ///< a nibble-major block of n rows
  int64_t n = 0;
  int64_t r0 = 0, m = 0; ///< rows [r0, r0 + m)
  int64_t nib0 = 0;      ///< the head's first nibble
  int bits = 0;
  const float *q = nullptr; ///< [nq][d] folded queries
  int64_t nq = 0, d = 0;
  float *out = nullptr; ///< out[r*outStride + j]
  int64_t outStride = 0;
};

/// groupWeightsHalf's operands.
struct GroupWeightsArgs {
  const uint16_t *const *headers = nullptr; ///< n tokens' fp16 headers
  const int64_t *rowOf = nullptr;           ///< their score rows
  int64_t n = 0;
  const float *scores = nullptr;
  int64_t heads = 0, nq = 0, perHead = 0;
  float *ws = nullptr, *zsum = nullptr;
};

/// Row r of a dotLutRows call as a dotLut call: a table without a
/// many-row version loops its dotLut over the rows, the same bits by
/// definition.
inline LutDot lutRowDot(const LutRowsDot &a, int64_t r) {
  return {
      a.rows[r], a.first, a.bits, a.lut, a.nq, a.d, a.out + r * a.outStride};
}

/// Row r of a dotCodesRows call as a dotCodes call (a kernel without a
/// many-row loop of its own loops over these; the same bits by definition).
inline CodesDot codeRowDot(const CodeRowsDot &a, int64_t r) {
  return {a.rows[r], 0, a.bits, a.q, a.nq, a.d, a.out + r * a.outStride};
}

/// Row r of an axpyCodesRows call as an axpyCodes call (the same).
inline CodesAxpy codeRowAxpy(const CodeRowsAxpy &a, int64_t r) {
  return {a.rows[r], 0, a.bits, a.ws + r * a.wsStride, a.G, a.nq, a.d, a.acc};
}

/// The term of a pair of 2-bit value rows in axpyCodesRows: codes a and b
/// of rows 2k and 2k+1 with weights wa and wb, fma(wb, b, wa * a).
inline float pairTerm(float wa, unsigned a, float wb, unsigned b) {
  return __builtin_fmaf(wb, static_cast<float>(b), wa * static_cast<float>(a));
}

/// The term of dotNibbleRows for nibble i (value x) of a row: 2-bit,
/// fma(q[2i+1], x >> 2, q[2i] * (x & 3)) (two channels); 4-bit, q[i] * x.
/// SIMD versions tabulate it for x = 0..15 with the same operations.
inline float nibbleTerm(const float *q, int64_t i, unsigned x, int bits) {
  if (bits == 2)
    return __builtin_fmaf(q[2 * i + 1], static_cast<float>(x >> 2),
                          q[2 * i] * static_cast<float>(x & 3u));
  return q[i] * static_cast<float>(x);
}

/// Floats per table of axpyLutRows: at least 16, periodic past 2^bits
/// (entry l holds the value of code l mod 2^bits), so a SIMD version loads
/// whole registers and may leave bits above a code in its lookup index.
constexpr int64_t lutEntries(int bits) {
  return (int64_t{1} << bits) > 16 ? (int64_t{1} << bits) : 16;
}

} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_ATTEND_ATTEND_ARGS_H
