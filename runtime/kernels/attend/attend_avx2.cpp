//===- attend_avx2.cpp - AVX2+FMA inner kernels of fused attention --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Dot products and weighted sums of one head row against the query vectors
// of its KV head, straight from fp16 rows or packed codes: codes are shifted
// out of 32-bit words into int32 lanes (vpsrlvd), converted to float and
// consumed by FMAs in registers. FMA is used on purpose here: attention is
// checked against the reference with a tolerance, unlike the quantizers.
//
// Every dot product uses one canonical order, shared with the NEON kernels
// (runtime/kernels/attend/attend_neon.cpp) so that x86_64 and arm64 give the same
// bits (test/e2e/cross-arch.mlir): sixteen partial sums S_l over the channels
// c = l (mod 16), each a chain of fused multiply-adds in channel order from
// +0, then T_l = S_l + S_{l+8}, U_l = T_l + T_{l+4}, W_l = U_l + U_{l+2} and
// W_0 + W_1 (two accumulators of 8 lanes and hsum here). Weighted sums are
// one FMA per element and row, rows in order. The shapes each kernel covers
// are the block-16 family's (block16_family.h, shared with NEON); the
// kernels assert them.
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include "bitpack.h"
#include "block16_family.h"
#include "fp16.h"

#include <algorithm>
#include <cassert>

using namespace kvq;
using namespace kvq::avx2;
using namespace kvq::block16;
using kvq::x86::forEachAccTile;
using kvq::x86::forEachQueryBlock;

namespace {

//===----------------------------------------------------------------------===//
// Row readers: 16 elements starting at channel c (c % 16 == 0)
//===----------------------------------------------------------------------===//

struct HalfRow {
  const uint16_t *p;
  KVQ_AVX2 void operator()(int64_t c, __m256 &v0, __m256 &v1) const {
    v0 = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + c)));
    v1 = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + c + 8)));
  }
};

/// Packed codes of width BITS starting at a byte boundary p, as int32
/// lanes. The width is a template parameter so the decode is straight-line
/// code inside the unrolled loops.
template <int BITS> struct CodeRowB {
  const uint8_t *p;
  /// The 4- and 8-bit codes as int32 lanes (2 and 3 bits become floats
  /// straight from a permute, in operator()).
  KVQ_AVX2 void codes(int64_t c, __m256i &a, __m256i &b) const {
    static_assert(BITS == 4 || BITS == 8, "2 and 3 bits: operator()");
    if constexpr (BITS == 4) { // 8 codes per 32-bit word
      uint32_t w0, w1;
      std::memcpy(&w0, p + c / 2, 4);
      std::memcpy(&w1, p + c / 2 + 4, 4);
      const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
      const __m256i m = _mm256_set1_epi32(15);
      a = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(w0)), sh),
          m);
      b = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(w1)), sh),
          m);
    } else {
      a = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + c)));
      b = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + c + 8)));
    }
  }
  KVQ_AVX2 void operator()(int64_t c, __m256 &v0, __m256 &v1) const {
    if constexpr (BITS == 2) {
      // vpermps reads only the low three bits of each index: after the
      // shift they are code + 4 * (low bit of the next code), so a table
      // {0,1,2,3,0,1,2,3} yields the code as a float without the mask and
      // the int-to-float conversion (one shuffle-port uop instead of two
      // uops competing with the FMAs).
      uint32_t w;
      std::memcpy(&w, p + c / 4, 4);
      const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(w));
      const __m256 table = _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3);
      v0 = _mm256_permutevar8x32_ps(
          table,
          _mm256_srlv_epi32(x, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)));
      v1 = _mm256_permutevar8x32_ps(
          table, _mm256_srlv_epi32(
                     x, _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)));
    } else if constexpr (BITS == 3) {
      // Sixteen codes are the six bytes from p + 3c/8 (codes3x16). Each
      // index's low three bits are its code, all that vpermps reads, so
      // the table {0..7} yields the code as a float with neither a mask
      // nor a conversion.
      __m256i lo, hi;
      codes3x16(p + c / 8 * 3, lo, hi);
      const __m256 table = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
      v0 = _mm256_permutevar8x32_ps(table, lo);
      v1 = _mm256_permutevar8x32_ps(table, hi);
    } else {
      __m256i a, b;
      codes(c, a, b);
      v0 = _mm256_cvtepi32_ps(a);
      v1 = _mm256_cvtepi32_ps(b);
    }
  }
};

/// Expands CALL(B) for the runtime code width `bits`.
#define KVQ_WITH_BITS(bits, CALL)                                              \
  switch (bits) {                                                              \
  case 2:                                                                      \
    CALL(2);                                                                   \
    break;                                                                     \
  case 3:                                                                      \
    CALL(3);                                                                   \
    break;                                                                     \
  case 4:                                                                      \
    CALL(4);                                                                   \
    break;                                                                     \
  default:                                                                     \
    CALL(8);                                                                   \
    break;                                                                     \
  }

//===----------------------------------------------------------------------===//
// Dot products and weighted sums over a row
//===----------------------------------------------------------------------===//

/// out[j0 + jj] = q_{j0+jj} . row for NJ query vectors, two FMA chains each.
template <int NJ, class Row>
KVQ_AVX2 void dotBlock(const Row &row, const float *q, int64_t d, float *out) {
  __m256 acc0[NJ], acc1[NJ];
  for (int jj = 0; jj < NJ; ++jj)
    acc0[jj] = acc1[jj] = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    __m256 v0, v1;
    row(c, v0, v1);
    for (int jj = 0; jj < NJ; ++jj) {
      acc0[jj] = _mm256_fmadd_ps(_mm256_loadu_ps(q + jj * d + c), v0, acc0[jj]);
      acc1[jj] =
          _mm256_fmadd_ps(_mm256_loadu_ps(q + jj * d + c + 8), v1, acc1[jj]);
    }
  }
  for (int jj = 0; jj < NJ; ++jj)
    out[jj] = hsum(_mm256_add_ps(acc0[jj], acc1[jj]));
}

template <class Row> struct DotBlocks {
  const Row &row;
  const float *q;
  int64_t d;
  float *out;
  template <int NJ> KVQ_AVX2 void run(int64_t j) const {
    dotBlock<NJ>(row, q + j * d, d, out + j);
  }
};

template <class Row>
KVQ_AVX2 void dotRows(const Row &row, const float *q, int64_t nq, int64_t d,
                      float *out) {
  forEachQueryBlock(nq, DotBlocks<Row>{row, q, d, out});
}

/// acc[j*d + c] += weight(j, c) * row[c]; weight is constant on each block
/// of 8 channels (per-token groups are multiples of 8).
template <class Row, class Weight>
KVQ_AVX2 void axpyRows(const Row &row, const Weight &weight, int64_t nq,
                       int64_t d, float *acc) {
  for (int64_t c = 0; c < d; c += 16) {
    __m256 v0, v1;
    row(c, v0, v1);
    for (int64_t j = 0; j < nq; ++j) {
      float *a = acc + j * d + c;
      _mm256_storeu_ps(a,
                       _mm256_fmadd_ps(weight(j, c), v0, _mm256_loadu_ps(a)));
      _mm256_storeu_ps(
          a + 8, _mm256_fmadd_ps(weight(j, c + 8), v1, _mm256_loadu_ps(a + 8)));
    }
  }
}

struct TokenWeight { // one weight per query vector
  const float *w;
  KVQ_AVX2 __m256 operator()(int64_t j, int64_t) const {
    return _mm256_broadcast_ss(w + j);
  }
};

struct GroupWeight { // one weight per (query vector, group of G channels)
  const float *ws;
  int64_t G, groups;
  KVQ_AVX2 __m256 operator()(int64_t j, int64_t c) const {
    return _mm256_broadcast_ss(ws + j * groups + c / G);
  }
};

//===----------------------------------------------------------------------===//
// Many rows: accumulators stay in registers
//===----------------------------------------------------------------------===//

/// acc[j0+jj][c0 .. c0+W) += weight(r, jj, c) * row_r[c] over all rows, with
/// NJ*W/8 accumulators held in registers for the whole pass (a tile of
/// forEachAccTile: at most 8 accumulators). Same16: the weight is constant
/// on aligned blocks of 16 channels (token weights, groups of 16 or more),
/// so it is loaded once per block: fewer loads and registers, the same
/// products.
template <bool Same16, class Rows, class Weight> struct AxpyTile {
  const Rows &rows;
  int64_t n;
  const Weight &weight;
  int64_t d;
  float *acc;

  template <int NJ, int W> KVQ_AVX2 void run(int64_t j0, int64_t c0) const {
    AccTile<NJ, W> tile;
    tile.load(acc, j0, c0, d);
    auto &a = tile.a;
    for (int64_t r = 0; r < n; ++r) {
      const auto row = rows(r);
      for (int i = 0; i < W / 8; i += 2) {
        __m256 v0, v1;
        row(c0 + 8 * i, v0, v1);
        for (int jj = 0; jj < NJ; ++jj) {
          const __m256 w0 = weight(r, j0 + jj, c0 + 8 * i);
          const __m256 w1 = Same16 ? w0 : weight(r, j0 + jj, c0 + 8 * i + 8);
          a[jj][i] = _mm256_fmadd_ps(w0, v0, a[jj][i]);
          a[jj][i + 1] = _mm256_fmadd_ps(w1, v1, a[jj][i + 1]);
        }
      }
    }
    tile.store(acc, j0, c0, d);
  }
};

/// Tiles of 8 accumulators: one query x 64 channels, two x 16, four x 16
/// (d % 16 == 0).
template <bool Same16, class Rows, class Weight>
KVQ_AVX2 void axpyTiles(const Rows &rows, int64_t n, const Weight &weight,
                        int64_t nq, int64_t d, float *acc) {
  forEachAccTile<16, 64>(
      nq, d, AxpyTile<Same16, Rows, Weight>{rows, n, weight, d, acc});
}

template <int BITS> struct CodeRows {
  const uint8_t *const *rows;
  CodeRowB<BITS> operator()(int64_t r) const { return CodeRowB<BITS>{rows[r]}; }
};

struct HalfRows {
  const uint16_t *const *rows;
  HalfRow operator()(int64_t r) const { return HalfRow{rows[r]}; }
};

struct RowGroupWeight { // ws[r*stride + j*groups + c/G], G = 2^shift
  const float *ws;
  int shift;
  int64_t groups, stride;
  KVQ_AVX2 __m256 operator()(int64_t r, int64_t j, int64_t c) const {
    return _mm256_broadcast_ss(ws + r * stride + j * groups + (c >> shift));
  }
};

struct RowTokenWeight { // w[r*stride + j]
  const float *w;
  int64_t stride;
  KVQ_AVX2 __m256 operator()(int64_t r, int64_t j, int64_t) const {
    return _mm256_broadcast_ss(w + r * stride + j);
  }
};

/// One query against four rows at a time: eight independent FMA chains
/// (two per row, the canonical 16 partial sums) share each load of q.
template <int BITS>
KVQ_AVX2 void dotFourRows(const uint8_t *const *rows, const float *q, int64_t d,
                          float *out, int64_t outStride) {
  const CodeRowB<BITS> r0{rows[0]}, r1{rows[1]}, r2{rows[2]}, r3{rows[3]};
  __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0,
         a3 = a0, b3 = a0;
  for (int64_t c = 0; c < d; c += 16) {
    const __m256 q0 = _mm256_loadu_ps(q + c), q1 = _mm256_loadu_ps(q + c + 8);
    __m256 v0, v1;
    r0(c, v0, v1);
    a0 = _mm256_fmadd_ps(q0, v0, a0);
    b0 = _mm256_fmadd_ps(q1, v1, b0);
    r1(c, v0, v1);
    a1 = _mm256_fmadd_ps(q0, v0, a1);
    b1 = _mm256_fmadd_ps(q1, v1, b1);
    r2(c, v0, v1);
    a2 = _mm256_fmadd_ps(q0, v0, a2);
    b2 = _mm256_fmadd_ps(q1, v1, b2);
    r3(c, v0, v1);
    a3 = _mm256_fmadd_ps(q0, v0, a3);
    b3 = _mm256_fmadd_ps(q1, v1, b3);
  }
  // The canonical tree for four rows at once: T and U per row, then a 4x4
  // transpose puts U_l of the four rows in one vector per l.
  auto fold = [](__m256 t) KVQ_AVX2 {
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  };
  __m128 u0 = fold(_mm256_add_ps(a0, b0)), u1 = fold(_mm256_add_ps(a1, b1));
  __m128 u2 = fold(_mm256_add_ps(a2, b2)), u3 = fold(_mm256_add_ps(a3, b3));
  _MM_TRANSPOSE4_PS(u0, u1, u2, u3); // now u_l = U_l of rows 0..3
  const __m128 s = _mm_add_ps(_mm_add_ps(u0, u2), _mm_add_ps(u1, u3));
  alignas(16) float v[4];
  _mm_store_ps(v, s);
  for (int i = 0; i < 4; ++i)
    out[i * outStride] = v[i];
}

//===----------------------------------------------------------------------===//
// The AttendOps entries
//===----------------------------------------------------------------------===//

/// out[at..at+8) = codes * scale + zero (vmulps then vaddps: the
/// reference's two roundings).
KVQ_AVX2 inline void dequant8(__m256i codes, const float *scale,
                              const float *zero, int64_t at, float *out) {
  _mm256_storeu_ps(out + at,
                   _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(codes),
                                               _mm256_loadu_ps(scale + at)),
                                 _mm256_loadu_ps(zero + at)));
}

/// dequantCodes straight from the packed codes into float lanes (the
/// pre-RoPE key pass of a 3-bit KIVI cache spent as long unpacking to
/// bytes and converting those as rotating the keys): 3-bit codes 16 at a
/// time from their 6 bytes (codes3x16), other widths 8 at a time, the
/// last few one by one.
KVQ_AVX2 void dequantCodesAvx2(const uint8_t *packed, int64_t n, int bits,
                               const float *scale, const float *zero,
                               float *out) {
  int64_t c = 0;
  if (bits == 3) {
    const __m256i seven = _mm256_set1_epi32(7);
    for (; c + 16 <= n; c += 16) {
      __m256i lo, hi;
      codes3x16(packed + c / 8 * 3, lo, hi);
      dequant8(_mm256_and_si256(lo, seven), scale, zero, c, out);
      dequant8(_mm256_and_si256(hi, seven), scale, zero, c + 8, out);
    }
  }
  for (; c + 8 <= n; c += 8)
    dequant8(readCodes8(packed, KVQ_CODES_PACKED, c, bits), scale, zero, c,
             out);
  for (; c < n; ++c)
    out[c] = uniformDequant(packedCodeAt(packed, c, bits), scale[c], zero[c]);
}

KVQ_AVX2 void halfToFloatNAvx2(const uint16_t *h, int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(h + i))));
  for (; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

KVQ_AVX2 void halfRowsToFloatAvx2(const uint16_t *const *rows, int64_t n,
                                  int64_t count, float *out) {
  for (int64_t r = 0; r < n; ++r)
    halfToFloatNAvx2(rows[r], count, out + r * count);
}

KVQ_AVX2 void mulHalfAvx2(const uint16_t *h, const float *q, int64_t nq,
                          int64_t d, float *out) {
  assert(d % 8 == 0);
  for (int64_t c = 0; c < d; c += 8) {
    const __m256 s = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + c)));
    for (int64_t j = 0; j < nq; ++j)
      _mm256_storeu_ps(out + j * d + c,
                       _mm256_mul_ps(_mm256_loadu_ps(q + j * d + c), s));
  }
}

KVQ_AVX2 void dotHalfAvx2(const uint16_t *row, const float *q, int64_t nq,
                          int64_t d, float *out) {
  assert(whole16(d));
  dotRows(HalfRow{row}, q, nq, d, out);
}

KVQ_AVX2 void axpyHalfAvx2(const uint16_t *row, const float *w, int64_t nq,
                           int64_t d, float *acc) {
  assert(whole16(d));
  axpyRows(HalfRow{row}, TokenWeight{w}, nq, d, acc);
}

KVQ_AVX2 void dotCodesAvx2(const CodesDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  assert(aligned(first, bits, d));
  const uint8_t *p = packed + first * bits / 8;
#define KVQ_DOT(B) dotRows(CodeRowB<B>{p}, q, nq, d, out)
  KVQ_WITH_BITS(bits, KVQ_DOT)
#undef KVQ_DOT
}

KVQ_AVX2 void axpyCodesAvx2(const CodesAxpy &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(aligned(first, bits, d) && groupsOf8(G, d));
  const uint8_t *p = packed + first * bits / 8;
#define KVQ_AXPY(B)                                                            \
  axpyRows(CodeRowB<B>{p}, GroupWeight{ws, G, d / G}, nq, d, acc)
  KVQ_WITH_BITS(bits, KVQ_AXPY)
#undef KVQ_AXPY
}

KVQ_AVX2 void dotCodesRowsAvx2(const CodeRowsDot &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *q = a.q;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  assert(whole16(d) && supportedBits(bits));
  int64_t r = 0;
#define KVQ_DOT_ROWS(B)                                                        \
  if (nq == 1)                                                                 \
    for (; r + 4 <= n; r += 4)                                                 \
      dotFourRows<B>(rows + r, q, d, out + r * outStride, outStride);          \
  for (; r < n; ++r)                                                           \
    dotRows(CodeRowB<B>{rows[r]}, q, nq, d, out + r * outStride);
  KVQ_WITH_BITS(bits, KVQ_DOT_ROWS)
#undef KVQ_DOT_ROWS
}

KVQ_AVX2 void axpyCodesRowsAvx2(const CodeRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *ws = a.ws;
  const int64_t wsStride = a.wsStride, G = a.G, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(whole16(d) && groups8(G) && supportedBits(bits));
  if (bits == 2) // rows in pairs (attend_x86_pairs.cpp)
    return x86::axpyCodePairsAvx2(a);
  const RowGroupWeight weight{ws, __builtin_ctzll(static_cast<uint64_t>(G)),
                              d / G, wsStride};
#define KVQ_AXPY_ROWS(B)                                                       \
  if (G % 16 == 0)                                                             \
    axpyTiles<true>(CodeRows<B>{rows}, n, weight, nq, d, acc);                 \
  else                                                                         \
    axpyTiles<false>(CodeRows<B>{rows}, n, weight, nq, d, acc);
  KVQ_WITH_BITS(bits, KVQ_AXPY_ROWS)
#undef KVQ_AXPY_ROWS
}

KVQ_AVX2 void axpyHalfRowsAvx2(const HalfRowsAxpy &a) {
  const uint16_t *const *rows = a.rows;
  const int64_t n = a.n;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(whole16(d));
  axpyTiles<true>(HalfRows{rows}, n, RowTokenWeight{w, wStride}, nq, d, acc);
}

/// Indices of 8 codes of width BITS at channel c of a row (c % 8 == 0):
/// the packed word shifted per lane. Bits above the code are left in:
/// vpermps reads only the low three (2- and 3-bit codes; the tables are
/// periodic, entry l = entry l mod 2^bits) and lutLookup uses bit 3 of a
/// 4-bit code. The 3-bit load takes the 3 bytes it needs at a row's end.
template <int BITS>
KVQ_AVX2 inline __m256i lutIndex8(const uint8_t *row, int64_t c, int64_t d) {
  uint32_t w = 0;
  const uint8_t *p = row + c * BITS / 8;
  if (BITS != 3 || c + 8 < d)
    std::memcpy(&w, p, BITS == 3 ? 4 : BITS);
  else
    std::memcpy(&w, p, 3);
  const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(w));
  return _mm256_srlv_epi32(x, _mm256_setr_epi32(0, BITS, 2 * BITS, 3 * BITS,
                                                4 * BITS, 5 * BITS, 6 * BITS,
                                                7 * BITS));
}

/// t[code] for 8 indices from a table of 8 (or, BITS == 4, 16) floats:
/// vpermps reads the low three index bits; bit 3, shifted into the sign,
/// picks the upper half through vblendvps.
template <int BITS>
KVQ_AVX2 inline __m256 lutLookup(const float *t, __m256i index) {
  const __m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(t), index);
  if constexpr (BITS != 4)
    return v;
  return _mm256_blendv_ps(
      v, _mm256_permutevar8x32_ps(_mm256_loadu_ps(t + 8), index),
      _mm256_castsi256_ps(_mm256_slli_epi32(index, 28)));
}

/// The codes of channels c .. c+15 of a row as two sets of eight int32
/// lanes (exact: masked below 2^BITS; 8-bit widened).
template <int BITS>
KVQ_AVX2 inline void codes16(const uint8_t *row, int64_t c, int64_t d,
                             __m256i &a, __m256i &b) {
  if constexpr (BITS == 8) {
    a = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + c)));
    b = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + c + 8)));
  } else {
    const __m256i mask = _mm256_set1_epi32((1 << BITS) - 1);
    a = _mm256_and_si256(lutIndex8<BITS>(row, c, d), mask);
    b = _mm256_and_si256(lutIndex8<BITS>(row, c + 8, d), mask);
  }
}

/// Sixteen channels of a row looked up in the row's level table (2^bits
/// entries; lutLookup reads 8, or 16 at 4 bits): an axpyTiles reader.
template <int BITS> struct LevelTableRow {
  const uint8_t *p;
  const float *table;
  int64_t d;
  KVQ_AVX2 void operator()(int64_t c, __m256 &v0, __m256 &v1) const {
    __m256i a, b;
    codes16<BITS>(p, c, d, a, b);
    v0 = lutLookup<BITS>(table, a);
    v1 = lutLookup<BITS>(table, b);
  }
};

template <int BITS> struct LevelTableRows {
  const uint8_t *const *rows;
  const float *levels;
  int64_t stride, d;
  LevelTableRow<BITS> operator()(int64_t r) const {
    return LevelTableRow<BITS>{rows[r], levels + r * stride, d};
  }
};

KVQ_AVX2 void axpyLevelRowsAvx2(const LevelRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *levels = a.levels;
  const int64_t levelStride = a.levelStride;
  const float *w = a.w;
  const int64_t wStride = a.wStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(whole16(d) && lutBits(bits));
  const RowTokenWeight weight{w, wStride};
  switch (bits) {
  case 2:
    return axpyTiles<true>(LevelTableRows<2>{rows, levels, levelStride, d}, n,
                           weight, nq, d, acc);
  case 3:
    return axpyTiles<true>(LevelTableRows<3>{rows, levels, levelStride, d}, n,
                           weight, nq, d, acc);
  default:
    return axpyTiles<true>(LevelTableRows<4>{rows, levels, levelStride, d}, n,
                           weight, nq, d, acc);
  }
}

/// out[j] = sum_c lut[(j*d + c) * L + code_c]: the codes decoded in
/// registers (lutIndex8, masked; 8-bit codes widened), and gathered from
/// each channel's table;
/// sums in the canonical order (two accumulators of the 16 partial sums).
template <int BITS>
KVQ_AVX2 void dotLutRow(const uint8_t *row, const float *lut, int64_t nq,
                        int64_t d, float *out) {
  constexpr int L = 1 << BITS;
  const __m256i lanes =
      _mm256_setr_epi32(0, L, 2 * L, 3 * L, 4 * L, 5 * L, 6 * L, 7 * L);
  for (int64_t j = 0; j < nq; ++j) {
    const float *t = lut + j * d * L;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 16) {
      // Entry (c + lane) * L + code of this query's table.
      __m256i a, b;
      codes16<BITS>(row, c, d, a, b);
      acc0 = _mm256_add_ps(
          acc0, _mm256_i32gather_ps(t + c * L, _mm256_add_epi32(lanes, a), 4));
      acc1 = _mm256_add_ps(
          acc1,
          _mm256_i32gather_ps(t + (c + 8) * L, _mm256_add_epi32(lanes, b), 4));
    }
    out[j] = hsum(_mm256_add_ps(acc0, acc1));
  }
}

KVQ_AVX2 void dotLutAvx2(const LutDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *lut = a.lut;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  assert(aligned(first, bits, d));
  const uint8_t *row = packed + first * bits / 8;
  switch (bits) {
  case 2:
    return dotLutRow<2>(row, lut, nq, d, out);
  case 3:
    return dotLutRow<3>(row, lut, nq, d, out);
  case 4:
    return dotLutRow<4>(row, lut, nq, d, out);
  default:
    return dotLutRow<8>(row, lut, nq, d, out);
  }
}

/// dotLutRows as one dotLut per row, for the shapes the rows-in-lanes
/// version (attend_avx2_lut_rows.cpp) leaves.
void dotLutRowsByRowAvx2(const LutRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotLutAvx2(lutRowDot(a, r));
}

/// acc[j0+jj][c0 .. c0+W) += the rows' table entries, with NJ*W/8
/// accumulators held in registers for the whole pass (as AxpyTile); each
/// row's table is read from L1 by the lookups.
template <int BITS> struct LutTile {
  const uint8_t *const *rows;
  int64_t n;
  const float *luts;
  int64_t lutStride, d;
  float *acc;

  template <int NJ, int W> KVQ_AVX2 void run(int64_t j0, int64_t c0) const {
    AccTile<NJ, W> tile;
    tile.load(acc, j0, c0, d);
    auto &a = tile.a;
    for (int64_t r = 0; r < n; ++r) {
      const float *t = luts + r * lutStride + j0 * 16;
#pragma GCC unroll 8
      for (int i = 0; i < W / 8; ++i) {
        const __m256i index = lutIndex8<BITS>(rows[r], c0 + 8 * i, d);
#pragma GCC unroll 4
        for (int jj = 0; jj < NJ; ++jj)
          a[jj][i] =
              _mm256_add_ps(a[jj][i], lutLookup<BITS>(t + jj * 16, index));
      }
    }
    tile.store(acc, j0, c0, d);
  }
};

template <int BITS>
KVQ_AVX2 void lutTiles(const uint8_t *const *rows, int64_t n, const float *luts,
                       int64_t lutStride, int64_t nq, int64_t d, float *acc) {
  forEachAccTile<16, 64>(nq, d,
                         LutTile<BITS>{rows, n, luts, lutStride, d, acc});
}

KVQ_AVX2 void axpyLutRowsAvx2(const LutRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *luts = a.luts;
  const int64_t lutStride = a.lutStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(whole16(d) && lutBits(bits));
  switch (bits) {
  case 2:
    return lutTiles<2>(rows, n, luts, lutStride, nq, d, acc);
  case 3:
    return lutTiles<3>(rows, n, luts, lutStride, nq, d, acc);
  default:
    return lutTiles<4>(rows, n, luts, lutStride, nq, d, acc);
  }
}

/// The AVX2 member of the block-16 family (block16_family.h).
struct Avx2Kernels {
  static constexpr auto halfToFloatN = halfToFloatNAvx2;
  static constexpr auto halfRowsToFloat = halfRowsToFloatAvx2;
  static constexpr auto mulHalf = mulHalfAvx2;
  static constexpr auto dotHalf = dotHalfAvx2;
  static constexpr auto axpyHalf = axpyHalfAvx2;
  static constexpr auto axpyHalfRows = axpyHalfRowsAvx2;
  static constexpr auto dotCodes = dotCodesAvx2;
  static constexpr auto dotCodesRows = dotCodesRowsAvx2;
  static constexpr auto dotLut = dotLutAvx2;
  static constexpr auto dotLutRows = dotLutRowsByRowAvx2;
  static constexpr auto axpyCodes = axpyCodesAvx2;
  static constexpr auto axpyCodesRows = axpyCodesRowsAvx2;
  static constexpr auto axpyLevelRows = axpyLevelRowsAvx2;
  static constexpr auto axpyLutRows = axpyLutRowsAvx2;
  /// Levels looked up in one register of 8 or 16 floats.
  static bool levelRowsCover(int bits) { return lutBits(bits); }
};

} // namespace

void kvq::x86::fillAttendAvx2(const AttendShape &s, AttendOps &ops) {
  block16::fillAttend<Avx2Kernels>(s, ops);
  // Exact (no sums), so outside the family's canonical orders; NEON keeps
  // the reference's word-at-a-time unpack.
  if (supportedBits(s.keyBits))
    ops.dequantCodes = dequantCodesAvx2;
}
