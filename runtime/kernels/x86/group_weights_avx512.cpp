//===- group_weights_avx512.cpp - Fused KIVI value headers, AVX-512 -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::groupWeightsHalf for one query vector per KV head: the tokens'
// fp16 scales and zeros are converted 16 at a time (vcvtph2ps) and meet the
// weight of their head, broadcast to its groups by one permute, in the same
// pass; the zero-point sums stay in registers across the chunk's tokens.
// One multiply and one add per element in token order, as
// groupWeightsPortable does, so the bits are the same.
//
//===----------------------------------------------------------------------===//
#include "x86_kernels.h"
#include "x86_target.h"

#include <cassert>
#include <immintrin.h>

using namespace kvq;

namespace {

/// Sixteen lanes cover whole heads: perHead divides 16 and 16 divides
/// perRow = heads * perHead.
bool wholeHeads(int64_t heads, int64_t perHead) {
  return perHead > 0 && 16 % perHead == 0 && (heads * perHead) % 16 == 0;
}

KVQ_AVX512 void groupWeightsHalfAvx512(const uint16_t *const *headers,
                                       const int64_t *rowOf, int64_t n,
                                       const float *scores, int64_t heads,
                                       int64_t nq, int64_t perHead, float *ws,
                                       float *zsum) {
  // nq is per call (query steps x query heads per KV head): the caller
  // takes the portable path for nq > 1 (KiviStore::attendValues).
  assert(nq == 1 && wholeHeads(heads, perHead));
  (void)nq;
  const int64_t perRow = heads * perHead;
  const int shift = __builtin_ctzll(static_cast<uint64_t>(perHead));
  // Lane l of a chunk holds a group of head l >> shift of the chunk's heads.
  const __m512i headOfLane = _mm512_srlv_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(shift));
  const __mmask16 chunkHeads =
      static_cast<__mmask16>((1u << (16 >> shift)) - 1u);
  for (int64_t l0 = 0; l0 < perRow; l0 += 16) {
    const int64_t h0 = l0 >> shift;
    __m512 z = _mm512_loadu_ps(zsum + l0);
    for (int64_t i = 0; i < n; ++i) {
      const __m512 w = _mm512_permutexvar_ps(
          headOfLane,
          _mm512_maskz_loadu_ps(chunkHeads, scores + rowOf[i] * heads + h0));
      const uint16_t *h = headers[i];
      const __m512 scale = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h + l0)));
      const __m512 zero = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(h + perRow + l0)));
      _mm512_storeu_ps(ws + i * perRow + l0, _mm512_mul_ps(w, scale));
      z = _mm512_add_ps(z, _mm512_mul_ps(w, zero));
    }
    _mm512_storeu_ps(zsum + l0, z);
  }
}

} // namespace

void kvq::x86::fillGroupWeightsAvx512(const AttendShape &s, AttendOps &ops) {
  // perHead = d / G value groups per head row.
  if (s.G > 0 && s.d % s.G == 0 && wholeHeads(s.heads, s.d / s.G))
    ops.groupWeightsHalf = groupWeightsHalfEntry<groupWeightsHalfAvx512>;
}
