//===- attend_avx512_group_weights.cpp - KIVI value headers ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::groupWeightsHalf: the tokens' fp16 scales and zeros are
// converted 16 at a time (vcvtph2ps) and meet the weight of their query
// vector, broadcast to its groups by one permute, in the same pass; the
// zero-point sums stay in registers across the chunk's tokens. With several
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

/// Sixteen lanes cover whole heads: perHead divides 16 and 16 divides
/// perRow = heads * perHead.
bool wholeHeads(int64_t heads, int64_t perHead) {
  return perHead > 0 && 16 % perHead == 0 && (heads * perHead) % 16 == 0;
}

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

KVQ_AVX512 void groupWeightsHalfAvx512(const uint16_t *const *headers,
                                       const int64_t *rowOf, int64_t n,
                                       const float *scores, int64_t heads,
                                       int64_t nq, int64_t perHead, float *ws,
                                       float *zsum) {
  assert(nq >= 1 && wholeHeads(heads, perHead));
  const int64_t perRow = heads * perHead, K = heads * nq;
  const int shift = __builtin_ctzll(static_cast<uint64_t>(perHead));
  // 16 | perRow, so 16 | K * perHead: the lanes come in whole chunks.
  for (int64_t l0 = 0; l0 < K * perHead; l0 += 16) {
    if (nq == 1) { // lane l is group l0 + l of the header: loaded in order
      groupWeightsLanes<false>(headers, rowOf, n, scores, K, perRow, l0, shift,
                               l0, _mm512_setzero_si512(), ws, zsum);
      continue;
    }
    // Lane l: query vector k = k0 + (l >> shift) of head k / nq, group g =
    // l % perHead, whose scale is header entry (k / nq) * perHead + g. The
    // chunk's k span at most 16 / perHead heads, so these entries lie in
    // 16 consecutive ones from `base` (kept inside the perRow scales).
    const int64_t k0 = l0 >> shift;
    const int64_t base = std::min(k0 / nq * perHead, perRow - 16);
    alignas(64) int32_t at[16];
    for (int l = 0; l < 16; ++l)
      at[l] = static_cast<int32_t>((k0 + (l >> shift)) / nq * perHead +
                                   (l & (perHead - 1)) - base);
    groupWeightsLanes<true>(headers, rowOf, n, scores, K, perRow, l0, shift,
                            base, _mm512_load_si512(at), ws, zsum);
  }
}

} // namespace

void kvq::x86::fillGroupWeightsAvx512(const AttendShape &s, AttendOps &ops) {
  // perHead = d / G value groups per head row.
  if (s.G > 0 && s.d % s.G == 0 && wholeHeads(s.heads, s.d / s.G))
    ops.groupWeightsHalf = groupWeightsHalfEntry<groupWeightsHalfAvx512>;
}
