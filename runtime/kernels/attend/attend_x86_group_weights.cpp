//===- attend_x86_group_weights.cpp - KIVI value headers ------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::groupWeightsHalf: the tokens' fp16 scales and zeros are
// converted a register at a time (vcvtph2ps: 16 lanes on AVX-512F, 8 on
// AVX2) and meet the weight of their query vector, broadcast to its groups
// by one permute, in the same pass; the zero-point sums stay in registers
// across the chunk's tokens. With several
// query vectors per KV head (GQA, batched steps) a head's scales serve each
// of its query vectors, so they are permuted into place too. One multiply
// and one add per element in token order, as groupWeightsPortable does, so
// the bits are the same.
//
//===----------------------------------------------------------------------===//
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include <algorithm>
#include <cassert>
#include <immintrin.h>

using namespace kvq;

namespace {

/// LANES lanes cover whole heads: perHead divides LANES and LANES divides
/// perRow = heads * perHead.
template <int LANES> bool wholeHeads(int64_t heads, int64_t perHead) {
  return perHead > 0 && LANES % perHead == 0 &&
         (heads * perHead) % LANES == 0;
}

/// Lane l of the LANES-lane chunk starting at lane l0 serves query vector
/// k = k0 + (l >> shift) of head k / nq and its group g = l % perHead, whose
/// scale is header entry (k / nq) * perHead + g. The chunk's query vectors
/// span at most LANES / perHead heads, so these entries lie in LANES
/// consecutive ones from `base` (kept inside the perRow scales): at[l] is
/// lane l's entry counted from base.
template <int LANES>
int64_t gatherIndices(int64_t l0, int shift, int64_t nq, int64_t perHead,
                      int64_t perRow, int32_t *at) {
  const int64_t k0 = l0 >> shift;
  const int64_t base = std::min(k0 / nq * perHead, perRow - LANES);
  for (int l = 0; l < LANES; ++l)
    at[l] = static_cast<int32_t>((k0 + (l >> shift)) / nq * perHead +
                                 (l & (perHead - 1)) - base);
  return base;
}

//===----------------------------------------------------------------------===//
// AVX2: 8 lanes
//===----------------------------------------------------------------------===//

template <bool Gather>
KVQ_AVX2 inline void
groupWeightsLanesAvx2(const uint16_t *const *headers, const int64_t *rowOf,
                      int64_t n, const float *scores, int64_t K, int64_t perRow,
                      int64_t l0, int shift, int64_t base, __m256i at,
                      float *ws, float *zsum) {
  const int64_t lanes = K << shift, k0 = l0 >> shift;
  // Lane l holds query vector k0 + (l >> shift): its weight broadcast from
  // the 8 >> shift weights of the chunk (a masked load reads no further).
  const __m256i weightOfLane = _mm256_srlv_epi32(
      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(shift));
  const __m256i chunkWeights = _mm256_cmpgt_epi32(
      _mm256_set1_epi32(8 >> shift), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 z = _mm256_loadu_ps(zsum + l0);
  for (int64_t i = 0; i < n; ++i) {
    const __m256 w = _mm256_permutevar8x32_ps(
        _mm256_maskload_ps(scores + rowOf[i] * K + k0, chunkWeights),
        weightOfLane);
    const uint16_t *h = headers[i];
    __m256 scale = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + base)));
    __m256 zero = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(h + perRow + base)));
    if constexpr (Gather) {
      scale = _mm256_permutevar8x32_ps(scale, at);
      zero = _mm256_permutevar8x32_ps(zero, at);
    }
    _mm256_storeu_ps(ws + i * lanes + l0, _mm256_mul_ps(w, scale));
    z = _mm256_add_ps(z, _mm256_mul_ps(w, zero));
  }
  _mm256_storeu_ps(zsum + l0, z);
}

KVQ_AVX2 void groupWeightsHalfAvx2(const GroupWeightsArgs &a) {
  const uint16_t *const *headers = a.headers;
  const int64_t *rowOf = a.rowOf;
  const int64_t n = a.n;
  const float *scores = a.scores;
  const int64_t heads = a.heads, nq = a.nq, perHead = a.perHead;
  float *ws = a.ws, *zsum = a.zsum;
  assert(nq >= 1 && wholeHeads<8>(heads, perHead));
  const int64_t perRow = heads * perHead, K = heads * nq;
  const int shift = __builtin_ctzll(static_cast<uint64_t>(perHead));
  // 8 | perRow, so 8 | K * perHead: the lanes come in whole chunks.
  for (int64_t l0 = 0; l0 < K * perHead; l0 += 8) {
    if (nq == 1) { // lane l is header group l0 + l: 8 loaded in order
      groupWeightsLanesAvx2<false>(headers, rowOf, n, scores, K, perRow, l0,
                                   shift, l0, _mm256_setzero_si256(), ws, zsum);
      continue;
    }
    alignas(32) int32_t at[8];
    const int64_t base = gatherIndices<8>(l0, shift, nq, perHead, perRow, at);
    groupWeightsLanesAvx2<true>(
        headers, rowOf, n, scores, K, perRow, l0, shift, base,
        _mm256_load_si256(reinterpret_cast<const __m256i *>(at)), ws, zsum);
  }
}

//===----------------------------------------------------------------------===//
// AVX-512F: 16 lanes
//===----------------------------------------------------------------------===//

/// The lanes [l0, l0 + 16) of a token's output, K = heads * nq query vectors
/// of perHead groups each; Gather: the lanes' scales and zeros are not the
/// 16 loaded in order (nq > 1), so the index vector `at` picks them.
template <bool Gather>
KVQ_AVX512 inline void
groupWeightsLanes(const uint16_t *const *headers, const int64_t *rowOf,
                  int64_t n, const float *scores, int64_t K, int64_t perRow,
                  int64_t l0, int shift, int64_t base, __m512i at, float *ws,
                  float *zsum) {
  const int64_t lanes = K << shift, k0 = l0 >> shift;
  // Lane l holds query vector k0 + (l >> shift): its weight broadcast.
  const __m512i weightOfLane = _mm512_srlv_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(shift));
  const __mmask16 chunkWeights =
      static_cast<__mmask16>((1u << (16 >> shift)) - 1u);
  __m512 z = _mm512_loadu_ps(zsum + l0);
  for (int64_t i = 0; i < n; ++i) {
    const __m512 w = _mm512_permutexvar_ps(
        weightOfLane,
        _mm512_maskz_loadu_ps(chunkWeights, scores + rowOf[i] * K + k0));
    const uint16_t *h = headers[i];
    __m512 scale = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + base)));
    __m512 zero = _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i *>(h + perRow + base)));
    if constexpr (Gather) {
      scale = _mm512_permutexvar_ps(at, scale);
      zero = _mm512_permutexvar_ps(at, zero);
    }
    _mm512_storeu_ps(ws + i * lanes + l0, _mm512_mul_ps(w, scale));
    z = _mm512_add_ps(z, _mm512_mul_ps(w, zero));
  }
  _mm512_storeu_ps(zsum + l0, z);
}

KVQ_AVX512 void groupWeightsHalfAvx512(const GroupWeightsArgs &a) {
  const uint16_t *const *headers = a.headers;
  const int64_t *rowOf = a.rowOf;
  const int64_t n = a.n;
  const float *scores = a.scores;
  const int64_t heads = a.heads, nq = a.nq, perHead = a.perHead;
  float *ws = a.ws, *zsum = a.zsum;
  assert(nq >= 1 && wholeHeads<16>(heads, perHead));
  const int64_t perRow = heads * perHead, K = heads * nq;
  const int shift = __builtin_ctzll(static_cast<uint64_t>(perHead));
  // 16 | perRow, so 16 | K * perHead: the lanes come in whole chunks.
  for (int64_t l0 = 0; l0 < K * perHead; l0 += 16) {
    if (nq == 1) { // lane l is group l0 + l of the header: loaded in order
      groupWeightsLanes<false>(headers, rowOf, n, scores, K, perRow, l0, shift,
                               l0, _mm512_setzero_si512(), ws, zsum);
      continue;
    }
    alignas(64) int32_t at[16];
    const int64_t base = gatherIndices<16>(l0, shift, nq, perHead, perRow, at);
    groupWeightsLanes<true>(headers, rowOf, n, scores, K, perRow, l0, shift,
                            base, _mm512_load_si512(at), ws, zsum);
  }
}

} // namespace

// perHead = d / G value groups per head row.

void kvq::x86::fillGroupWeightsAvx2(const AttendShape &s, AttendOps &ops) {
  if (s.G > 0 && s.d % s.G == 0 && wholeHeads<8>(s.heads, s.d / s.G))
    ops.groupWeightsHalf = groupWeightsHalfAvx2;
}

void kvq::x86::fillGroupWeightsAvx512(const AttendShape &s, AttendOps &ops) {
  if (s.G > 0 && s.d % s.G == 0 && wholeHeads<16>(s.heads, s.d / s.G))
    ops.groupWeightsHalf = groupWeightsHalfAvx512;
}
