//===- attend_avx512_lut.cpp - KVQuant key dots without gathers, AVX-512 --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::dotLut (per-channel lookup tables, KVQuant keys) on AVX-512F:
// the 16 channels of a block own 16 consecutive tables of L = 2^bits
// entries, 16 * L floats in a row, so each 32-entry pair of registers holds
// the tables of 32 / L channels. One `vpermt2ps` per pair looks up the lanes
// whose channels it holds and a blend keeps them: 16L/32 permutes per 16
// channels (four at 3 bits) instead of a 16-lane gather. The sums follow the
// canonical order of the AVX2 and NEON versions (chain l adds the channels
// c = l mod 16 in order, then the fixed tree), so the bits are the same.
// dotLutRows (KVQuant's key pass) puts 16 token rows in the lanes instead:
// their code words transposed once, one `vpermps` of a channel's table
// looks the channel up in all 16 rows, with the same sums per row.
// axpyLutRows (per-row value tables) looks up 16 channels per `vpermps`,
// one addition per element and row as everywhere.
//
//===----------------------------------------------------------------------===//
#include "../x86/acc_tiles.h"
#include "../x86/avx2_util.h"
#include "../x86/avx512_util.h"
#include "block_layout.h"
#include "../x86/x86_kernels.h"

#include <algorithm>
#include <cassert>
#include <cstring>

using namespace kvq;
using kvq::avx512::AccTile512;
using kvq::avx512::blockCodes;
using kvq::avx512::blockIndex;
using kvq::avx512::transpose16x16;
using kvq::x86::forEachAccTile;

namespace {

/// dotLut here: 2- to 4-bit codes (tables of at most 16
/// entries, two per register pair) in blocks of 16 channels.
bool lutDots(int bits, int64_t d) {
  return bits >= 2 && bits <= 4 && d % 16 == 0;
}

/// axpyLutRows here: 2- to 4-bit codes, blocks of 64 channels.
bool lutRows(int bits, int64_t d) {
  return bits >= 2 && bits <= 4 && d % 64 == 0;
}

/// S independent dot products (rows[s] against tables tabs[s]) at once,
/// so S addition chains are in flight: one row alone waits on its chain.
template <int BITS, int S>
KVQ_AVX512 void lutStreams(const uint8_t *const *rows, const float *const *tabs,
                           int64_t d, float *out, const int64_t *outAt) {
  constexpr int L = 1 << BITS, kPairs = 16 * L / 32, kPerPair = 32 / L;
  // Lane -> channel of the block, and that channel's table offset inside
  // its register pair; lanes of pair p form mask p.
  alignas(64) int32_t offset[16];
  __mmask16 pairMask[kPairs] = {};
  for (int lane = 0; lane < 16; ++lane) {
    const int ch = lane % 2 == 0 ? lane / 2 : 8 + lane / 2;
    offset[lane] = (ch * L) % 32;
    pairMask[ch / kPerPair] |= static_cast<__mmask16>(1u << lane);
  }
  const __m512i base = _mm512_load_si512(offset);
  __m512 acc[S];
  for (int k = 0; k < S; ++k)
    acc[k] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16)
    for (int k = 0; k < S; ++k) {
      const __m512i idx = _mm512_add_epi32(base, blockCodes<BITS>(rows[k], c));
      const float *tc = tabs[k] + c * L;
      __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(tc), idx,
                                        _mm512_loadu_ps(tc + 16));
      for (int p = 1; p < kPairs; ++p)
        v = _mm512_mask_mov_ps(
            v, pairMask[p],
            _mm512_permutex2var_ps(_mm512_loadu_ps(tc + 32 * p), idx,
                                   _mm512_loadu_ps(tc + 32 * p + 16)));
      acc[k] = _mm512_add_ps(acc[k], v);
    }
  // Chains back to canonical order: chain l is lane 2l (l < 8) or
  // lane 2(l - 8) + 1; then the tree of the AVX2 version.
  const __m512i chainOrder =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int k = 0; k < S; ++k) {
    const __m512 chains = _mm512_permutexvar_ps(chainOrder, acc[k]);
    out[outAt[k]] = avx2::hsum(_mm256_add_ps(
        _mm512_castps512_ps256(chains),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(chains), 1))));
  }
}

/// The nq queries of one head row as streams, four at a time (the row is
/// read per query).
template <int BITS>
KVQ_AVX512 void lutQueries512(const uint8_t *row, const float *lut, int64_t nq,
                              int64_t d, float *out) {
  constexpr int L = 1 << BITS;
  const uint8_t *rows[4] = {row, row, row, row};
  const float *tabs[4];
  int64_t at[4];
  int64_t j = 0;
  for (; j + 4 <= nq; j += 4) {
    for (int slot = 0; slot < 4; ++slot) {
      tabs[slot] = lut + (j + slot) * d * L;
      at[slot] = j + slot;
    }
    lutStreams<BITS, 4>(rows, tabs, d, out, at);
  }
  for (; j < nq; ++j) {
    tabs[0] = lut + j * d * L;
    at[0] = j;
    lutStreams<BITS, 1>(rows, tabs, d, out, at);
  }
}

using x86::lutRowTilesCover; // dotLutRows, levelColumns (x86_kernels.h)

/// A channel's table of 2^BITS entries repeated to 16 lanes, so that a
/// permute may read index bits above the code (they belong to the next
/// code): entry l is entry l mod 2^BITS.
template <int BITS> KVQ_AVX512 inline __m512 periodicTable(const float *t) {
  if constexpr (BITS == 4)
    return _mm512_loadu_ps(t);
  else if constexpr (BITS == 3)
    return _mm512_castpd_ps(
        _mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(t))));
  else
    return _mm512_broadcast_f32x4(_mm_loadu_ps(t));
}

/// The code of channel k of a 32-channel block of 16 rows, from the
/// block's transposed words W (W[w][r] = word w of row r): shifted down
/// so its bits are the low ones (bits of the next code above them).
template <int BITS, int K>
KVQ_AVX512 inline __m512i codesOfChannel(const uint32_t (*W)[16]) {
  constexpr int bit = K * BITS, w = bit / 32, s = bit % 32;
  __m512i idx = _mm512_srli_epi32(_mm512_load_si512(W[w]), s);
  if constexpr (s + BITS > 32) // 3-bit codes that straddle two words
    idx = _mm512_or_si512(
        idx, _mm512_slli_epi32(_mm512_load_si512(W[w + 1]), 32 - s));
  return idx;
}

/// S[K mod 16] += the tables' entries of channels K .. 31 of the block.
template <int BITS, int K>
KVQ_AVX512 inline void addBlock(const uint32_t (*W)[16], const float *tab,
                                __m512 S[16]) {
  if constexpr (K < 32) {
    S[K % 16] = _mm512_add_ps(
        S[K % 16],
        _mm512_permutexvar_ps(codesOfChannel<BITS, K>(W),
                              periodicTable<BITS>(tab + K * (1 << BITS))));
    addBlock<BITS, K + 1>(W, tab, S);
  }
}

/// The code words of rows[0 .. m) (m <= 16; lanes past m repeat row 0) of
/// a head starting at code `first`, transposed: T[w][r] = word w of
/// rows[r], for the head's d * BITS / 32 words.
template <int BITS>
KVQ_AVX512 inline void transposeRowWords(const uint8_t *const *rows, int64_t m,
                                         int64_t first, int64_t d,
                                         uint32_t (*T)[16]) {
  const int64_t words = d * BITS / 32, offset = first * BITS / 8;
  for (int64_t w0 = 0; w0 < words; w0 += 16) {
    const int64_t left = words - w0;
    const __mmask16 k =
        left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m512i r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = _mm512_maskz_loadu_epi32(k, rows[i < m ? i : 0] + offset + 4 * w0);
    transpose16x16(r);
    for (int64_t i = 0; i < 16 && i < left; ++i)
      _mm512_store_si512(T[w0 + i], r[i]);
  }
}

/// dotLut for 16 rows at a time, rows in lanes: the rows' code words are
/// transposed once (shared by the nq queries), then each channel costs a
/// shift, one permute of its 16-entry table and an add for all 16 rows,
/// where a row at a time costs 2^bits/2 two-register permutes per 16
/// channels. Lane r of accumulator l chains the channels c = l mod 16 of
/// row r in order, and the fixed tree adds the accumulators: dotLut's
/// canonical sum, so the same bits.
template <int BITS>
KVQ_AVX512 void lutRowTiles(const uint8_t *const *rows, int64_t n,
                            int64_t first, const float *lut, int64_t nq,
                            int64_t d, float *out, int64_t outStride) {
  constexpr int L = 1 << BITS;
  alignas(64) uint32_t T[x86::kLutRowWords][16]; // T[w][r]: word w of row r
  alignas(64) float sums[16];
  for (int64_t r0 = 0; r0 < n; r0 += 16) {
    const int64_t m = std::min<int64_t>(16, n - r0);
    transposeRowWords<BITS>(rows + r0, m, first, d, T);
    for (int64_t j = 0; j < nq; ++j) {
      __m512 S[16];
      for (int l = 0; l < 16; ++l)
        S[l] = _mm512_setzero_ps();
      for (int64_t c0 = 0; c0 < d; c0 += 32)
        addBlock<BITS, 0>(T + c0 * BITS / 32, lut + (j * d + c0) * L, S);
      for (int l = 0; l < 8; ++l)
        S[l] = _mm512_add_ps(S[l], S[l + 8]);
      for (int l = 0; l < 4; ++l)
        S[l] = _mm512_add_ps(S[l], S[l + 4]);
      for (int l = 0; l < 2; ++l)
        S[l] = _mm512_add_ps(S[l], S[l + 2]);
      _mm512_store_ps(sums, _mm512_add_ps(S[0], S[1]));
      for (int64_t r = 0; r < m; ++r)
        out[(r0 + r) * outStride + j] = sums[r];
    }
  }
}

/// cols[(c0 + K) * 16 + r] = the table entry of channel c0 + K's code in
/// row r, for channels K .. 31 of the block.
template <int BITS, int K>
KVQ_AVX512 inline void lookupBlock(const uint32_t (*W)[16], const float *tab,
                                   float *cols) {
  if constexpr (K < 32) {
    _mm512_storeu_ps(
        cols + K * kLevelColumnRows,
        _mm512_permutexvar_ps(codesOfChannel<BITS, K>(W),
                              periodicTable<BITS>(tab + K * (1 << BITS))));
    lookupBlock<BITS, K + 1>(W, tab, cols);
  }
}

/// levelColumns with the rows in lanes: the code words transposed once,
/// then one permute of a channel's table gives its column.
template <int BITS>
KVQ_AVX512 void levelColumnTile(const uint8_t *const *rows, int64_t n,
                                int64_t first, const float *levels, int64_t d,
                                float *cols) {
  alignas(64) uint32_t T[x86::kLutRowWords][16];
  transposeRowWords<BITS>(rows, n, first, d, T);
  for (int64_t c0 = 0; c0 < d; c0 += 32)
    lookupBlock<BITS, 0>(T + c0 * BITS / 32, levels + c0 * (1 << BITS),
                         cols + c0 * kLevelColumnRows);
}

static_assert(kLevelColumnRows == 16, "one row per lane");

KVQ_AVX512 void levelColumnsAvx512(const LevelColumns &a) {
  assert(lutRowTilesCover(a.bits, a.d) && (a.first * a.bits) % 32 == 0 &&
         a.n >= 1 && a.n <= kLevelColumnRows);
  switch (a.bits) {
  case 2:
    return levelColumnTile<2>(a.rows, a.n, a.first, a.levels, a.d, a.cols);
  case 3:
    return levelColumnTile<3>(a.rows, a.n, a.first, a.levels, a.d, a.cols);
  default:
    return levelColumnTile<4>(a.rows, a.n, a.first, a.levels, a.d, a.cols);
  }
}

KVQ_AVX512 void dotLutRowsAvx512(const LutRowsDot &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n, first = a.first;
  const int bits = a.bits;
  const float *lut = a.lut;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  const int64_t outStride = a.outStride;
  assert(lutRowTilesCover(bits, d) && (first * bits) % 32 == 0);
  switch (bits) {
  case 2:
    return lutRowTiles<2>(rows, n, first, lut, nq, d, out, outStride);
  case 3:
    return lutRowTiles<3>(rows, n, first, lut, nq, d, out, outStride);
  default:
    return lutRowTiles<4>(rows, n, first, lut, nq, d, out, outStride);
  }
}

/// An outlier entry's fields, 16 entries at a time: channels and fp16
/// values (vcvtph2ps, exact like halfToFloat), and the head of each channel
/// by an exact float division (channels < 2^16).
struct OutlierLanes {
  __m512i ch, h;
  __m512 x;
};

static_assert(KVQ_OUTLIER_BYTES == 4 && kvq_outlier_value_half(0) == 0 &&
                  kvq_outlier_channel_half(0) == 1,
              "an entry is one little-endian word: value, then channel");

KVQ_AVX512 inline OutlierLanes outlierLanes(const uint8_t *entries, __mmask16 m,
                                            __m512 dF) {
  const __m512i e = _mm512_maskz_loadu_epi32(m, entries);
  OutlierLanes r;
  r.ch = _mm512_srli_epi32(e, 16);
  r.x = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(e));
  r.h = _mm512_cvttps_epi32(
      _mm512_div_ps(_mm512_cvtepi32_ps(r.ch), dF)); // floor(ch / d)
  return r;
}

/// The codes of channels ch in a packed row: a gather of the word holding
/// each code (`codes` readable 3 bytes past its last code), then a shift.
KVQ_AVX512 inline __m512i codesAt(const uint8_t *codes, __mmask16 m, __m512i ch,
                                  int bits) {
  const __m512i bit = _mm512_mullo_epi32(ch, _mm512_set1_epi32(bits));
  const __m512i word = _mm512_mask_i32gather_epi32(
      _mm512_setzero_si512(), m, _mm512_srli_epi32(bit, 3), codes, 1);
  return _mm512_and_si512(
      _mm512_srlv_epi32(word, _mm512_and_si512(bit, _mm512_set1_epi32(7))),
      _mm512_set1_epi32((1 << bits) - 1));
}

KVQ_AVX512 inline __mmask16 firstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}

/// outlierScores 16 entries at a time: gathers of the query, the code and
/// the table entry give the terms in a register; they are then added to
/// the scores one by one in stored order (from a whole-register store:
/// scalar loads of a masked store's data would wait for it to retire).
KVQ_AVX512 void outlierScoresAvx512(const OutlierScores &a) {
  assert(a.bits >= 2 && a.bits <= 4);
  if (!outlierIndicesFit(a.entries, a.k, a.nq, a.d, int64_t{1} << a.bits))
    return referenceAttendOps().outlierScores(a);
  const __m512 dF = _mm512_set1_ps(static_cast<float>(a.d));
  const __m512i headStride =
      _mm512_set1_epi32(static_cast<int32_t>((a.nq - 1) * a.d));
  const __m512i nq = _mm512_set1_epi32(static_cast<int32_t>(a.nq));
  alignas(64) float terms[16];
  alignas(64) int32_t at[16];
  for (int64_t o = 0; o < a.k; o += 16) {
    const __mmask16 m = firstLanes(a.k - o);
    const int64_t n = std::min<int64_t>(16, a.k - o);
    const OutlierLanes e = outlierLanes(a.entries + 4 * o, m, dF);
    const __m512i code = codesAt(a.codes, m, e.ch, a.bits);
    // (h*nq + j)*d + cc = ch + h*(nq - 1)*d + j*d
    const __m512i i0 =
        _mm512_add_epi32(e.ch, _mm512_mullo_epi32(e.h, headStride));
    const __m512i s0 = _mm512_mullo_epi32(e.h, nq);
    for (int64_t j = 0; j < a.nq; ++j) {
      const __m512i i = _mm512_add_epi32(
          i0, _mm512_set1_epi32(static_cast<int32_t>(j * a.d)));
      const __m512 q =
          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i, a.q, 4);
      const __m512i li = _mm512_add_epi32(_mm512_slli_epi32(i, a.bits), code);
      const __m512 t =
          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, li, a.lut, 4);
      _mm512_store_ps(terms, _mm512_sub_ps(_mm512_mul_ps(q, e.x), t));
      _mm512_store_si512(
          at, _mm512_add_epi32(s0, _mm512_set1_epi32(static_cast<int32_t>(j))));
      for (int64_t l = 0; l < n; ++l)
        a.scores[at[l]] += terms[l];
    }
  }
}

/// outlierAxpy 16 entries at a time: gathers of the code, the level and
/// the weight give the terms in a register; each is then added to its
/// accumulator by a scalar load and store from a whole-register store
/// (a gather and scatter of the accumulators measured slower).
KVQ_AVX512 void outlierAxpyAvx512(const OutlierAxpy &a) {
  assert(a.bits >= 2 && a.bits <= 4);
  if (!outlierIndicesFit(a.entries, a.k, a.nq, a.d, 1))
    return referenceAttendOps().outlierAxpy(a);
  const __m512 dF = _mm512_set1_ps(static_cast<float>(a.d));
  const __m512i headStride =
      _mm512_set1_epi32(static_cast<int32_t>((a.nq - 1) * a.d));
  const __m512i nq = _mm512_set1_epi32(static_cast<int32_t>(a.nq));
  const __m512i levelCount =
      _mm512_set1_epi32(static_cast<int32_t>(a.levelCount));
  alignas(64) float terms[16];
  alignas(64) int32_t at[16];
  for (int64_t o = 0; o < a.k; o += 16) {
    const __mmask16 m = firstLanes(a.k - o);
    const int64_t n = std::min<int64_t>(16, a.k - o);
    const OutlierLanes e = outlierLanes(a.entries + 4 * o, m, dF);
    const __m512i code = codesAt(a.codes, m, e.ch, a.bits);
    const __m512 level = _mm512_mask_i32gather_ps(
        _mm512_setzero_ps(), m,
        _mm512_add_epi32(_mm512_mullo_epi32(e.h, levelCount), code), a.levels,
        4);
    const __m512i i0 =
        _mm512_add_epi32(e.ch, _mm512_mullo_epi32(e.h, headStride));
    const __m512i w0 = _mm512_mullo_epi32(e.h, nq);
    for (int64_t j = 0; j < a.nq; ++j) {
      const __m512 w = _mm512_mask_i32gather_ps(
          _mm512_setzero_ps(), m,
          _mm512_add_epi32(w0, _mm512_set1_epi32(static_cast<int32_t>(j))), a.w,
          4);
      _mm512_store_si512(
          at, _mm512_add_epi32(
                  i0, _mm512_set1_epi32(static_cast<int32_t>(j * a.d))));
      _mm512_store_ps(terms, _mm512_sub_ps(_mm512_mul_ps(w, e.x),
                                           _mm512_mul_ps(w, level)));
      for (int64_t l = 0; l < n; ++l)
        a.acc[at[l]] += terms[l];
    }
  }
}

KVQ_AVX512 void dotLutAvx512(const LutDot &a) {
  const uint8_t *packed = a.packed;
  const int64_t first = a.first;
  const int bits = a.bits;
  const float *lut = a.lut;
  const int64_t nq = a.nq, d = a.d;
  float *out = a.out;
  assert(lutDots(bits, d) && (first * bits) % 8 == 0);
  const uint8_t *row = packed + first * bits / 8;
  switch (bits) {
  case 2:
    return lutQueries512<2>(row, lut, nq, d, out);
  case 3:
    return lutQueries512<3>(row, lut, nq, d, out);
  default:
    return lutQueries512<4>(row, lut, nq, d, out);
  }
}

/// dotLutRows as one dotLut per row, where the code words rule out rows in
/// lanes: dotLut's bits.
void dotLutRowsByRowAvx512(const LutRowsDot &a) {
  for (int64_t r = 0; r < a.n; ++r)
    dotLutAvx512(lutRowDot(a, r));
}

/// acc[j0 + jj][c0 .. c0 + 64) over all rows, NJ x 4 accumulators in
/// registers (AccTile512).
template <int BITS> struct LutTile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *luts;
  int64_t lutStride, d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    static_assert(W == 64, "four zmm accumulators per query");
    constexpr int64_t E = 16; // lutEntries for 2-4 bits
    AccTile512<NJ> t;
    t.load(acc, j0, c0, d);
    auto &a = t.a;
    for (int64_t r = 0; r < n; ++r) {
      __m512i idx[4];
      for (int b = 0; b < 4; ++b)
        idx[b] = blockIndex<BITS>(rows[r], c0 + 16 * b);
      for (int jj = 0; jj < NJ; ++jj) {
        const __m512 table =
            _mm512_loadu_ps(luts + r * lutStride + (j0 + jj) * E);
        for (int b = 0; b < 4; ++b)
          a[jj][b] =
              _mm512_add_ps(a[jj][b], _mm512_permutexvar_ps(idx[b], table));
      }
    }
    t.store(acc, j0, c0, d);
  }
};

template <int BITS>
KVQ_AVX512 void lutTiles512(const uint8_t *const *rows, int64_t n,
                            const float *luts, int64_t lutStride, int64_t nq,
                            int64_t d, float *acc) {
  forEachAccTile<64, 64>(nq, d,
                         LutTile512<BITS>{rows, n, luts, lutStride, d, acc});
}

KVQ_AVX512 void axpyLutRowsAvx512(const LutRowsAxpy &a) {
  const uint8_t *const *rows = a.rows;
  const int64_t n = a.n;
  const int bits = a.bits;
  const float *luts = a.luts;
  const int64_t lutStride = a.lutStride, nq = a.nq, d = a.d;
  float *acc = a.acc;
  assert(lutRows(bits, d));
  switch (bits) {
  case 2:
    return lutTiles512<2>(rows, n, luts, lutStride, nq, d, acc);
  case 3:
    return lutTiles512<3>(rows, n, luts, lutStride, nq, d, acc);
  default:
    return lutTiles512<4>(rows, n, luts, lutStride, nq, d, acc);
  }
}

/// axpyLevelRows' tile: acc[j0 + jj][c0 .. c0 + 64) over all rows, NJ x 4
/// accumulators in registers (AccTile512).
/// A row's 64 codes are looked up in its level table once (one vpermps
/// per 16) and shared by the NJ query vectors, each one FMA per element.
template <int BITS> struct LevelTile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *levels;
  int64_t levelStride;
  const float *w;
  int64_t wStride, d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    static_assert(W == 64, "four zmm accumulators per query");
    AccTile512<NJ> t;
    t.load(acc, j0, c0, d);
    auto &a = t.a;
    for (int64_t r = 0; r < n; ++r) {
      // 2^BITS levels, readable up to 16 floats (the contract); blockCodes
      // masks each code, so only the row's own levels are selected.
      const __m512 table = _mm512_loadu_ps(levels + r * levelStride);
      __m512 v[4];
      for (int b = 0; b < 4; ++b)
        v[b] = _mm512_permutexvar_ps(blockCodes<BITS>(rows[r], c0 + 16 * b),
                                     table);
      for (int jj = 0; jj < NJ; ++jj) {
        const __m512 wj = _mm512_set1_ps(w[r * wStride + j0 + jj]);
        for (int b = 0; b < 4; ++b)
          a[jj][b] = _mm512_fmadd_ps(wj, v[b], a[jj][b]);
      }
    }
    t.store(acc, j0, c0, d);
  }
};

template <int BITS> KVQ_AVX512 void levelTiles512(const LevelRowsAxpy &a) {
  forEachAccTile<64, 64>(a.nq, a.d,
                         LevelTile512<BITS>{a.rows, a.n, a.levels,
                                            a.levelStride, a.w, a.wStride, a.d,
                                            a.acc});
}

KVQ_AVX512 void axpyLevelRowsAvx512(const LevelRowsAxpy &a) {
  assert(lutRows(a.bits, a.d));
  switch (a.bits) {
  case 2:
    return levelTiles512<2>(a);
  case 3:
    return levelTiles512<3>(a);
  default:
    return levelTiles512<4>(a);
  }
}

} // namespace

void kvq::x86::fillLutAvx512(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep the AVX2 entries (8-bit keys: its gathers).
  if (lutDots(s.keyBits, s.d)) {
    ops.dotLut = dotLutAvx512;
    // Rows in lanes where the code words allow, else a dotLut per row:
    // dotLut's bits either way.
    ops.dotLutRows = lutRowTilesCover(s.keyBits, s.d) ? dotLutRowsAvx512
                                                      : dotLutRowsByRowAvx512;
    ops.outlierScores = outlierScoresAvx512;
    if (lutRowTilesCover(s.keyBits, s.d))
      ops.levelColumns = levelColumnsAvx512;
  }
  if (lutRows(s.valueBits, s.d)) {
    ops.axpyLutRows = axpyLutRowsAvx512;
    ops.axpyLevelRows = axpyLevelRowsAvx512;
  }
  if (s.valueBits >= 2 && s.valueBits <= 4)
    ops.outlierAxpy = outlierAxpyAvx512;
}
