//===- lloyd_avx512_sort.cpp - Lloyd fits, in-register sort ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fits of KVQuant's stores sort 128 values at a time (a key channel of
// a refit batch, a head's value row), where sortFloats' four radix passes
// and histograms were a fifth of a refit. Up to 128 values are sorted here
// by a bitonic network over at most eight registers, on sortFloats'
// order-preserving integer keys: a total order (-0 before +0) that min and
// max keep as a multiset, so the sorted bytes are sortFloats' exactly.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx512_util.h"
#include "../x86/x86_kernels.h"

#include "lloyd_fast.h"

#include <array>

using namespace kvq;

namespace {

/// The network's sizes: up to kMaxRegisters registers of 16 keys.
constexpr int kMaxRegisters = 8;
constexpr int64_t kMaxNetworkValues = 16 * kMaxRegisters;

/// Lanes that keep the larger key of their pair in the step that pairs
/// lane i with i ^ j (j < 16) while building bitonic runs of k, in
/// register r: lane i of r is element 16 r + i, which ends low in its pair
/// when its run ascends, i.e. when its bit k is clear.
constexpr uint16_t takesMax(int j, int k, int r) {
  uint16_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    const bool lower = (i & j) == 0;
    const bool ascending = ((16 * r + i) & k) == 0;
    if (lower != ascending)
      mask = static_cast<uint16_t>(mask | (1u << i));
  }
  return mask;
}

/// takesMax for every in-register step: [log2 j][log2 k - 1][r].
struct MaxMasks {
  std::array<std::array<std::array<uint16_t, kMaxRegisters>, 7>, 4> m{};
  constexpr MaxMasks() {
    for (int lj = 0; lj < 4; ++lj)
      for (int lk = 1; lk <= 7; ++lk)
        for (int r = 0; r < kMaxRegisters; ++r)
          m[lj][lk - 1][r] = takesMax(1 << lj, 1 << lk, r);
  }
};
constexpr MaxMasks kMaxMasks;

/// Sorts the 16 R keys of v ascending.
template <int R> KVQ_AVX512 inline void bitonicSort(__m512i (&v)[R]) {
  const __m512i lane =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int lk = 1;
  for (int k = 2; k <= 16 * R; k *= 2, ++lk) {
    for (int j = k / 2; j >= 16; j /= 2) { // pairs in registers r, r ^ j/16
      const int rj = j / 16;
      for (int r = 0; r < R; ++r) {
        if ((r & rj) != 0)
          continue;
        const __m512i lo = _mm512_min_epu32(v[r], v[r | rj]);
        const __m512i hi = _mm512_max_epu32(v[r], v[r | rj]);
        const bool ascending = ((16 * r) & k) == 0;
        v[r] = ascending ? lo : hi;
        v[r | rj] = ascending ? hi : lo;
      }
    }
    for (int j = k < 16 ? k / 2 : 8, lj = __builtin_ctz(j); j > 0;
         j /= 2, --lj) {
      const __m512i partner = _mm512_xor_si512(lane, _mm512_set1_epi32(j));
      for (int r = 0; r < R; ++r) {
        const __m512i p = _mm512_permutexvar_epi32(partner, v[r]);
        v[r] = _mm512_mask_blend_epi32(kMaxMasks.m[lj][lk - 1][r],
                                       _mm512_min_epu32(v[r], p),
                                       _mm512_max_epu32(v[r], p));
      }
    }
  }
}

/// sortFloats for m <= 16 R: keys padded with the largest key, sorted, and
/// the first m written back.
template <int R> KVQ_AVX512 void sortSmall(float *data, int64_t m) {
  const __m512i negative = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i all = _mm512_set1_epi32(-1);
  __m512i v[R];
  for (int r = 0; r < R; ++r) {
    const int64_t left = m - 16 * r;
    const __mmask16 live = left >= 16 ? 0xFFFF
                           : left > 0 ? static_cast<__mmask16>((1u << left) - 1)
                                      : 0;
    const __m512i u = _mm512_maskz_loadu_epi32(live, data + 16 * r);
    // sortFloats' key: flip every bit of a negative float, the sign bit of
    // a positive one; lanes past m get the largest key.
    const __mmask16 neg = _mm512_test_epi32_mask(u, negative);
    const __m512i key =
        _mm512_mask_xor_epi32(_mm512_xor_si512(u, negative), neg, u, all);
    v[r] = _mm512_mask_mov_epi32(all, live, key);
  }
  bitonicSort<R>(v);
  for (int r = 0; r < R; ++r) {
    const int64_t left = m - 16 * r;
    if (left <= 0)
      break;
    const __mmask16 live =
        left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
    const __mmask16 neg = _mm512_test_epi32_mask(v[r], negative);
    // Back: a key with its top bit set was a positive float.
    const __m512i u =
        _mm512_mask_xor_epi32(_mm512_xor_si512(v[r], all), neg, v[r], negative);
    _mm512_mask_storeu_epi32(data + 16 * r, live, u);
  }
}

KVQ_AVX512 void sortFloatsAvx512(float *data, int64_t m, float *work) {
  if (m < 2)
    return;
  if (m > kMaxNetworkValues)
    return sortFloats(data, m, work);
  if (m <= 16)
    return sortSmall<1>(data, m);
  if (m <= 32)
    return sortSmall<2>(data, m);
  if (m <= 64)
    return sortSmall<4>(data, m);
  sortSmall<8>(data, m);
}

void lloydFitGatheredAvx512(const LloydFitGatheredArgs &a) {
  lloydFitGatheredSortedBy(sortFloatsAvx512, a);
}

int64_t lloydFitAvx512(const LloydFitArgs &a) {
  return lloydFitSortedBy(sortFloatsAvx512, a);
}

} // namespace

void kvq::x86::sortFloatsForTests(float *data, int64_t m, float *work) {
  sortFloatsAvx512(data, m, work);
}

void kvq::x86::fillSortAvx512(KernelTable &t) {
  t.lloydFit = lloydFitAvx512;
  t.lloydFitGathered = lloydFitGatheredAvx512;
}
