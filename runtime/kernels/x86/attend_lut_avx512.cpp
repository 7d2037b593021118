//===- attend_lut_avx512.cpp - KVQuant key dots without gathers, AVX-512 --===//
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
// axpyLutRows (per-row value tables) looks up 16 channels per `vpermps`,
// one addition per element and row as everywhere.
//
//===----------------------------------------------------------------------===//
#include "acc_tiles.h"
#include "avx2_util.h"
#include "x86_kernels.h"

#include <cassert>
#include <cstring>

using namespace kvq;
using kvq::x86::forEachAccTile;

namespace {

/// dotLut / dotLutHeads here: 2- to 4-bit codes (tables of at most 16
/// entries, two per register pair) in blocks of 16 channels.
bool lutDots(int bits, int64_t d) {
  return bits >= 2 && bits <= 4 && d % 16 == 0;
}

/// axpyLutRows here: 2- to 4-bit codes, blocks of 64 channels.
bool lutRows(int bits, int64_t d) {
  return bits >= 2 && bits <= 4 && d % 64 == 0;
}

/// Lane 2k holds channel k of the block and lane 2k + 1 channel 8 + k: the
/// codes of channels 0-7 and 8-15 sit in the two 32-bit halves of one
/// broadcast word, so one shift per lane extracts them.
template <int BITS>
KVQ_AVX512 inline __m512i blockCodes(const uint8_t *row, int64_t c) {
  uint64_t w = 0;
  std::memcpy(&w, row + c * BITS / 8, 2 * BITS); // 16 codes, 2 * BITS bytes
  constexpr int half = 8 * BITS;                 // bits of 8 codes
  const uint64_t lo = w & ((uint64_t{1} << half) - 1);
  const uint64_t hi = (w >> half) & ((uint64_t{1} << half) - 1);
  const __m512i x = _mm512_set1_epi64(static_cast<int64_t>(lo | (hi << 32)));
  const __m512i shift = _mm512_setr_epi32(
      0, 0, BITS, BITS, 2 * BITS, 2 * BITS, 3 * BITS, 3 * BITS, 4 * BITS,
      4 * BITS, 5 * BITS, 5 * BITS, 6 * BITS, 6 * BITS, 7 * BITS, 7 * BITS);
  return _mm512_and_si512(_mm512_srlv_epi32(x, shift),
                          _mm512_set1_epi32((1 << BITS) - 1));
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

/// Every (head, query) pair of one row as a stream, four at a time.
template <int BITS>
KVQ_AVX512 void lutHeads512(const uint8_t *packed, const float *lut,
                            int64_t heads, int64_t nq, int64_t d, float *out) {
  constexpr int L = 1 << BITS;
  const int64_t n = heads * nq;
  const uint8_t *rows[4];
  const float *tabs[4];
  int64_t at[4];
  int64_t k = 0;
  auto stream = [&](int64_t i, int slot) {
    rows[slot] = packed + (i / nq) * d * BITS / 8;
    tabs[slot] = lut + i * d * L;
    at[slot] = i;
  };
  for (; k + 4 <= n; k += 4) {
    for (int slot = 0; slot < 4; ++slot)
      stream(k + slot, slot);
    lutStreams<BITS, 4>(rows, tabs, d, out, at);
  }
  for (; k < n; ++k) {
    stream(k, 0);
    lutStreams<BITS, 1>(rows, tabs, d, out, at);
  }
}

KVQ_AVX512 void dotLutAvx512(const uint8_t *packed, int64_t first, int bits,
                             const float *lut, int64_t nq, int64_t d,
                             float *out) {
  assert(lutDots(bits, d) && (first * bits) % 8 == 0);
  // One head: its nq queries are the streams (the row is read per query).
  const uint8_t *row = packed + first * bits / 8;
  switch (bits) {
  case 2:
    return lutHeads512<2>(row, lut, 1, nq, d, out);
  case 3:
    return lutHeads512<3>(row, lut, 1, nq, d, out);
  default:
    return lutHeads512<4>(row, lut, 1, nq, d, out);
  }
}

KVQ_AVX512 void dotLutHeadsAvx512(const uint8_t *packed, int bits,
                                  const float *lut, int64_t heads, int64_t nq,
                                  int64_t d, float *out) {
  assert(lutDots(bits, d));
  switch (bits) {
  case 2:
    return lutHeads512<2>(packed, lut, heads, nq, d, out);
  case 3:
    return lutHeads512<3>(packed, lut, heads, nq, d, out);
  default:
    return lutHeads512<4>(packed, lut, heads, nq, d, out);
  }
}

/// Codes of the block's 16 channels in the lanes of blockCodes, with the
/// bits above each code left in: the periodic tables of axpyLutRows
/// (lutEntries) make them harmless, as vpermps reads four index bits.
template <int BITS>
KVQ_AVX512 inline __m512i blockIndex(const uint8_t *row, int64_t c) {
  uint64_t w = 0;
  std::memcpy(&w, row + c * BITS / 8, 2 * BITS);
  constexpr int half = 8 * BITS;
  const uint64_t lo = w & ((uint64_t{1} << half) - 1);
  const uint64_t hi = (w >> half) & ((uint64_t{1} << half) - 1);
  const __m512i shift = _mm512_setr_epi32(
      0, 0, BITS, BITS, 2 * BITS, 2 * BITS, 3 * BITS, 3 * BITS, 4 * BITS,
      4 * BITS, 5 * BITS, 5 * BITS, 6 * BITS, 6 * BITS, 7 * BITS, 7 * BITS);
  return _mm512_srlv_epi32(
      _mm512_set1_epi64(static_cast<int64_t>(lo | (hi << 32))), shift);
}

/// acc[j0 + jj][c0 .. c0 + 64) over all rows, NJ x 4 accumulators in
/// registers, lanes in blockCodes order (permuted on load and store).
template <int BITS> struct LutTile512 {
  const uint8_t *const *rows;
  int64_t n;
  const float *luts;
  int64_t lutStride, d;
  float *acc;

  template <int NJ, int W> KVQ_AVX512 void run(int64_t j0, int64_t c0) const {
    static_assert(W == 64, "four zmm accumulators per query");
    constexpr int64_t E = 16; // lutEntries for 2-4 bits
    const __m512i channelOfLane =
        _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __m512i laneOfChannel =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m512 a[NJ][4];
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < 4; ++b)
        a[jj][b] = _mm512_permutexvar_ps(
            channelOfLane, _mm512_loadu_ps(acc + (j0 + jj) * d + c0 + 16 * b));
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
    for (int jj = 0; jj < NJ; ++jj)
      for (int b = 0; b < 4; ++b)
        _mm512_storeu_ps(acc + (j0 + jj) * d + c0 + 16 * b,
                         _mm512_permutexvar_ps(laneOfChannel, a[jj][b]));
  }
};

template <int BITS>
KVQ_AVX512 void lutTiles512(const uint8_t *const *rows, int64_t n,
                            const float *luts, int64_t lutStride, int64_t nq,
                            int64_t d, float *acc) {
  forEachAccTile<64, 64>(nq, d,
                         LutTile512<BITS>{rows, n, luts, lutStride, d, acc});
}

KVQ_AVX512 void axpyLutRowsAvx512(const uint8_t *const *rows, int64_t n,
                                  int bits, const float *luts,
                                  int64_t lutStride, int64_t nq, int64_t d,
                                  float *acc) {
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

} // namespace

void kvq::x86::fillLutAvx512(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep the AVX2 entries (8-bit keys: its gathers).
  if (lutDots(s.keyBits, s.d)) {
    ops.dotLut = dotLutEntry<dotLutAvx512>;
    ops.dotLutHeads = dotLutHeadsEntry<dotLutHeadsAvx512>;
  }
  if (lutRows(s.valueBits, s.d))
    ops.axpyLutRows = axpyLutRowsEntry<axpyLutRowsAvx512>;
}
