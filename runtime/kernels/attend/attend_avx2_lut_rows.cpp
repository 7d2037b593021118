//===- attend_avx2_lut_rows.cpp - KVQuant key lookups, rows in lanes, AVX2 ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::dotLutRows (KVQuant's key pass: each channel's code looked up
// in that channel's table of query products) on AVX2 with 8 token rows in
// the lanes, as attend_avx512_lut.cpp does with 16. The rows' code words
// are transposed once (shared by the query vectors); then a channel costs
// a shift, one `vpermps` of its table (two and a blend at 4 bits) and an
// add for all 8 rows, where dotLut row by row spends an 8-lane gather per
// 8 channels (on a Zen 3 without AVX-512 those gathers were 70 % of a
// kvquant4 step, docs/PERFORMANCE.md). Sixteen accumulators would take
// every ymm register, so the canonical chains (chain l adds the channels
// c = l mod 16 in order) run four at a time; the fixed tree then adds
// them: dotLut's canonical sum, the same bits. levelColumns (the pre-RoPE
// key tiles' dequantization) takes the same transposed words, one lookup of
// a channel's levels per 8 rows.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include <algorithm>
#include <cassert>

using namespace kvq;

namespace {

using x86::kernelForBits;
using x86::kLutRowWords;
using x86::lutRowTilesCover;

constexpr int kRows = 8;   ///< token rows per tile: the lanes of a ymm
constexpr int kBlock = 32; ///< channels per unrolled block

/// Transposes 8 rows of 8 dwords in registers: r[w] becomes dword w of rows
/// 0..7 (unpacks within 128-bit lanes, then lane swaps).
KVQ_AVX2 inline void transpose8x8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + m], 128-bit lane k: dword 4k + m of rows 4g .. 4g + 3.
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
  }
}

/// T[w][r] = word w of rows[r] (r < m; lanes past m repeat row 0) for the
/// `words` words of a head starting at byte `offset`. A partial last set
/// of 8 words is read with a masked load, so no row is read past its head.
KVQ_AVX2 void transposeRowWords(const uint8_t *const *rows, int64_t m,
                                int64_t offset, int64_t words,
                                uint32_t (*T)[kRows]) {
  for (int64_t w0 = 0; w0 < words; w0 += 8) {
    const int64_t left = std::min<int64_t>(8, words - w0);
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(left)),
                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i r[8];
    for (int i = 0; i < 8; ++i)
      r[i] = _mm256_maskload_epi32(
          reinterpret_cast<const int *>(rows[i < m ? i : 0] + offset + 4 * w0),
          mask);
    transpose8x8(r);
    for (int64_t i = 0; i < left; ++i)
      _mm256_store_si256(reinterpret_cast<__m256i *>(T[w0 + i]), r[i]);
  }
}

/// Channel K of a 32-channel block looked up in its table `tab` (2^BITS
/// entries) for the 8 rows whose transposed words are W. The index keeps
/// the bits above the code (the next code's): `vpermps` reads three bits,
/// so a 2-bit table is repeated to 8 entries, and at 4 bits bit 3, moved
/// into the sign, picks the upper half through `vblendvps`.
template <int BITS, int K>
KVQ_AVX2 inline __m256 lookup(const uint32_t (*W)[kRows], const float *tab) {
  constexpr int bit = K * BITS, w = bit / 32, s = bit % 32;
  const float *t = tab + K * (1 << BITS);
  __m256i idx = _mm256_srli_epi32(
      _mm256_load_si256(reinterpret_cast<const __m256i *>(W[w])), s);
  if constexpr (s + BITS > 32) // 3-bit codes that straddle two words
    idx = _mm256_or_si256(
        idx, _mm256_slli_epi32(
                 _mm256_load_si256(reinterpret_cast<const __m256i *>(W[w + 1])),
                 32 - s));
  if constexpr (BITS == 2)
    return _mm256_permutevar8x32_ps(
        _mm256_broadcast_ps(reinterpret_cast<const __m128 *>(t)), idx);
  const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(t), idx);
  if constexpr (BITS == 3)
    return lo;
  return _mm256_blendv_ps(lo,
                          _mm256_permutevar8x32_ps(_mm256_loadu_ps(t + 8), idx),
                          _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/// Chains L0 .. L0 + 3 of one query's tables over the head's channels: chain
/// l adds channels l, l + 16, l + 32, ... in order.
template <int BITS, int L0>
KVQ_AVX2 inline void fourChains(const uint32_t (*T)[kRows], const float *lut,
                                int64_t d, __m256 *S) {
  constexpr int L = 1 << BITS;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t c0 = 0; c0 < d; c0 += kBlock) {
    const uint32_t(*W)[kRows] = T + c0 * BITS / 32;
    const float *tab = lut + c0 * L;
    a0 = _mm256_add_ps(a0, lookup<BITS, L0>(W, tab));
    a1 = _mm256_add_ps(a1, lookup<BITS, L0 + 1>(W, tab));
    a2 = _mm256_add_ps(a2, lookup<BITS, L0 + 2>(W, tab));
    a3 = _mm256_add_ps(a3, lookup<BITS, L0 + 3>(W, tab));
    a0 = _mm256_add_ps(a0, lookup<BITS, L0 + 16>(W, tab));
    a1 = _mm256_add_ps(a1, lookup<BITS, L0 + 17>(W, tab));
    a2 = _mm256_add_ps(a2, lookup<BITS, L0 + 18>(W, tab));
    a3 = _mm256_add_ps(a3, lookup<BITS, L0 + 19>(W, tab));
  }
  S[L0] = a0;
  S[L0 + 1] = a1;
  S[L0 + 2] = a2;
  S[L0 + 3] = a3;
}

/// dotLutRows for 8 rows at a time, rows in lanes: lane r of chain l is row
/// r's partial sum S_l, and the fixed tree (T_l = S_l + S_{l+8}, then +4,
/// +2, +1) adds the chains lane by lane.
template <int BITS> KVQ_AVX2 void dotLutRowsAvx2(const LutRowsDot &a) {
  assert(lutRowTilesCover(a.bits, a.d) && (a.first * a.bits) % 32 == 0);
  constexpr int L = 1 << BITS;
  alignas(32) uint32_t T[kLutRowWords][kRows]; // T[w][r]: word w of row r
  alignas(32) float sums[kRows];
  for (int64_t r0 = 0; r0 < a.n; r0 += kRows) {
    const int64_t m = std::min<int64_t>(kRows, a.n - r0);
    transposeRowWords(a.rows + r0, m, a.first * BITS / 8, a.d * BITS / 32, T);
    for (int64_t j = 0; j < a.nq; ++j) {
      const float *lj = a.lut + j * a.d * L;
      __m256 S[16];
      fourChains<BITS, 0>(T, lj, a.d, S);
      fourChains<BITS, 4>(T, lj, a.d, S);
      fourChains<BITS, 8>(T, lj, a.d, S);
      fourChains<BITS, 12>(T, lj, a.d, S);
      for (int l = 0; l < 8; ++l)
        S[l] = _mm256_add_ps(S[l], S[l + 8]);
      for (int l = 0; l < 4; ++l)
        S[l] = _mm256_add_ps(S[l], S[l + 4]);
      for (int l = 0; l < 2; ++l)
        S[l] = _mm256_add_ps(S[l], S[l + 2]);
      _mm256_store_ps(sums, _mm256_add_ps(S[0], S[1]));
      for (int64_t r = 0; r < m; ++r)
        a.out[(r0 + r) * a.outStride + j] = sums[r];
    }
  }
}

/// cols[(c0 + K) * kLevelColumnRows + r] for channels K .. 31 of a block:
/// the level of each row's code, exact lookups.
template <int BITS, int K>
KVQ_AVX2 inline void lookupBlock(const uint32_t (*W)[kRows], const float *tab,
                                 float *cols) {
  if constexpr (K < kBlock) {
    _mm256_storeu_ps(cols + K * kLevelColumnRows, lookup<BITS, K>(W, tab));
    lookupBlock<BITS, K + 1>(W, tab, cols);
  }
}

static_assert(kLevelColumnRows % kRows == 0, "whole halves of a tile");

/// levelColumns (pre-RoPE KVQuant keys, dequantized for the rotation) with
/// the rows in lanes: each half of the 16-row tile transposed once, then
/// one lookup per channel fills 8 rows of its column.
template <int BITS> KVQ_AVX2 void levelColumnsAvx2(const LevelColumns &a) {
  assert(lutRowTilesCover(a.bits, a.d) && (a.first * a.bits) % 32 == 0 &&
         a.n >= 1 && a.n <= kLevelColumnRows);
  constexpr int L = 1 << BITS;
  alignas(32) uint32_t T[kLutRowWords][kRows];
  for (int64_t r0 = 0; r0 < a.n; r0 += kRows) {
    transposeRowWords(a.rows + r0, std::min<int64_t>(kRows, a.n - r0),
                      a.first * BITS / 8, a.d * BITS / 32, T);
    for (int64_t c0 = 0; c0 < a.d; c0 += kBlock)
      lookupBlock<BITS, 0>(T + c0 * BITS / 32, a.levels + c0 * L,
                           a.cols + c0 * kLevelColumnRows + r0);
  }
}

} // namespace

void kvq::x86::fillLutRowsAvx2(const AttendShape &s, AttendOps &ops) {
  // Other shapes keep dotLut row by row (block16_family.h).
  if (!lutRowTilesCover(s.keyBits, s.d))
    return;
  ops.dotLutRows = kernelForBits<2, 3, 4>(
      s.keyBits, [](auto b) { return dotLutRowsAvx2<decltype(b)::value>; });
  ops.levelColumns = kernelForBits<2, 3, 4>(
      s.keyBits, [](auto b) { return levelColumnsAvx2<decltype(b)::value>; });
}
