//===- quantize_avx512_nuq.cpp - Nearest-level NUQ codes, AVX-512 ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// nuqQuant for up to 16 ascending levels, 32 codes per step, packed in
// registers (writeCodes32). Both paths compute what nearestLevel does:
// hi = #levels < x, the float comparison of x - level[hi-1] with
// level[hi] - x, ties (and x above every level) to the first index of the
// lower level's value. No gathers in the inner loops:
//  - one table per token group (values): the table lives in one register,
//    a branch-free binary search and the lookups are vpermps;
//  - one table per channel (keys, a table per 32-token block): 16 tokens
//    by 16 channels transposed in registers, so that a register holds one
//    channel's tokens and searches its table as above.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/avx512_util.h"
#include "../x86/x86_kernels.h"

#include "kernels.h"

#include <algorithm>
#include <cstring>

using namespace kvq;
using namespace kvq::avx2;
using namespace kvq::avx512;

namespace {

KVQ_AVX512 inline __m512i laneIndex() {
  return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                           15);
}

//===----------------------------------------------------------------------===//
// One table shared by every lane
//===----------------------------------------------------------------------===//

/// `count` (2..16) ascending levels in the lanes of one register (lanes >=
/// count hold 0 and are never selected) and, per level, the first index
/// holding the same value.
struct SharedTable {
  __m512 level;
  __m512i first;
};

template <int Count>
KVQ_AVX512 inline SharedTable loadShared(const uint16_t *levels) {
  // Loads of exactly the table's size: a copy through the stack would
  // stall on store forwarding once per table.
  __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
  static_assert(Count == 2 || Count == 4 || Count == 8 || Count == 16,
                "2 to 16 levels");
  if constexpr (Count == 16) {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(levels));
    hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(levels + 8));
  } else if constexpr (Count == 8) {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(levels));
  } else if constexpr (Count == 4) {
    lo = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(levels));
  } else {
    uint32_t w;
    std::memcpy(&w, levels, 4);
    lo = _mm_cvtsi32_si128(static_cast<int>(w));
  }
  const __m512 t = _mm512_cvtph_ps(_mm256_set_m128i(hi, lo));
  const __m512i idx = laneIndex();
  const __m512i prev = _mm512_max_epi32(
      _mm512_sub_epi32(idx, _mm512_set1_epi32(1)), _mm512_setzero_si512());
  // Lane l points at l - 1 when both hold the same value (-0 == +0, as in
  // the reference's lower_bound); log2(Count) pointer doublings reach the
  // first lane of any run of at most Count.
  const __mmask16 same = static_cast<__mmask16>(
      _mm512_cmp_ps_mask(t, _mm512_permutexvar_ps(prev, t), _CMP_EQ_OQ) &
      0xfffeu);
  __m512i p = _mm512_mask_mov_epi32(idx, same, prev);
  for (int k = 1; k < Count; k *= 2)
    p = _mm512_permutexvar_epi32(p, p);
  return {t, p};
}

/// nearestLevel of N registers of sixteen values, x[k] against table
/// *t[k] of Count levels. A search is a chain of dependent permutes and
/// compares; the N chains advance step by step side by side, since the
/// scheduler does not look far enough ahead to overlap more than a few.
template <int Count, int N>
KVQ_AVX512 inline void nearestShared(const SharedTable *const (&t)[N],
                                     const __m512 (&x)[N], __m512i (&out)[N]) {
  constexpr int count = Count;
  // lower_bound by halving: the answer stays in [pos, pos + s]; a NaN x
  // compares false everywhere and gets 0, as in the reference.
  const __m512i one = _mm512_set1_epi32(1);
  __m512i pos[N];
  for (int k = 0; k < N; ++k)
    pos[k] = _mm512_setzero_si512();
  for (int s = count / 2; s >= 1; s /= 2)
    for (int k = 0; k < N; ++k) {
      const __m512 probe = _mm512_permutexvar_ps(
          _mm512_add_epi32(pos[k], _mm512_set1_epi32(s - 1)), t[k]->level);
      pos[k] = _mm512_mask_add_epi32(
          pos[k], _mm512_cmp_ps_mask(probe, x[k], _CMP_LT_OQ), pos[k],
          _mm512_set1_epi32(s));
    }
  for (int k = 0; k < N; ++k) {
    const __m512 level = t[k]->level;
    const __m512i p = _mm512_mask_add_epi32(
        pos[k],
        _mm512_cmp_ps_mask(_mm512_permutexvar_ps(pos[k], level), x[k],
                           _CMP_LT_OQ),
        pos[k], one);
    const __m512i lo =
        _mm512_max_epi32(_mm512_sub_epi32(p, one), _mm512_setzero_si512());
    const __m512 dLo = _mm512_sub_ps(x[k], _mm512_permutexvar_ps(lo, level));
    // p == count reads lane count & 15; that lane is masked off.
    const __m512 dHi = _mm512_sub_ps(_mm512_permutexvar_ps(p, level), x[k]);
    const __mmask16 inside =
        _mm512_cmplt_epi32_mask(p, _mm512_set1_epi32(count));
    const __mmask16 takeHi =
        _mm512_mask_cmp_ps_mask(inside, dHi, dLo, _CMP_LT_OQ);
    out[k] = _mm512_mask_mov_epi32(_mm512_permutexvar_epi32(lo, t[k]->first),
                                   takeHi, p);
  }
}

/// Codes of the 16 * N values from element `at` against one table: N
/// searches side by side, written 32 codes at a time.
template <int Bits, int Layout, int N>
KVQ_AVX512 inline void nearestRun(const SharedTable &t, const void *x,
                                  kvq_dtype dtype, int64_t at, uint8_t *codes) {
  const SharedTable *tables[N];
  __m512 in[N];
  __m512i c[N];
  for (int k = 0; k < N; ++k) {
    tables[k] = &t;
    in[k] = load16(x, dtype, at + 16 * k);
  }
  nearestShared<1 << Bits>(tables, in, c);
  for (int k = 0; k < N; k += 2)
    writeCodes32(codes, Layout, at + 16 * k, Bits, narrow16x2(c[k], c[k + 1]));
}

/// Per-token groups of a multiple of 32, one table per group: 64 values
/// (four searches) per step, a last 32 where group % 64 == 32.
template <int Bits, int Layout>
KVQ_AVX512 void nuqRows(const void *x, kvq_dtype dtype, const Grid &g,
                        const uint16_t *levels, uint8_t *codes) {
  for (int64_t v = 0; v < g.vectors(); ++v) {
    const SharedTable t = loadShared<1 << Bits>(levels + v * (1 << Bits));
    const int64_t base = g.base(v);
    int64_t i = 0;
    for (; i + 64 <= g.group; i += 64)
      nearestRun<Bits, Layout, 4>(t, x, dtype, base + i, codes);
    if (i < g.group)
      nearestRun<Bits, Layout, 2>(t, x, dtype, base + i, codes);
  }
}

//===----------------------------------------------------------------------===//
// One table per channel: the block transposed
//===----------------------------------------------------------------------===//

/// Per-channel groups, 32 columns at a time (cols % 32 == 0). Tokens go to
/// the lanes: 16 rows of 16 channels are transposed in registers, so each
/// register holds one channel's tokens and searches that channel's table
/// like nuqRows (a scan of every level per lane was what it replaced), and
/// the codes are transposed back to rows. A block's
/// last rows (G % 16) fill the lanes with zeros whose codes are dropped.
template <int Bits, int Layout>
KVQ_AVX512 void nuqColumns(const void *x, kvq_dtype dtype, const Grid &g,
                           const uint16_t *levels, uint8_t *codes) {
  constexpr int bits = Bits, count = 1 << Bits, layout = Layout;
  const int64_t C = g.cols, G = g.group;
  SharedTable tables[32];
  for (int64_t rg = 0; rg < g.rows / G; ++rg)
    for (int64_t c = 0; c < C; c += 32) {
      // The 32 channels' tables are contiguous: 32 * count halfs.
      const uint16_t *lv = levels + (rg * C + c) * count;
      for (int k = 0; k < 32; ++k)
        tables[k] = loadShared<count>(lv + k * count);
      for (int64_t r0 = 0; r0 < G; r0 += 16) {
        const int rows = static_cast<int>(std::min<int64_t>(16, G - r0));
        const int64_t e0 = (rg * G + r0) * C + c;
        __m128i low[16]; // the codes of channels c .. c + 15, by row
        for (int half = 0; half < 2; ++half) {
          __m512i r[16];
          for (int i = 0; i < 16; ++i)
            r[i] = i < rows ? _mm512_castps_si512(
                                  load16(x, dtype, e0 + i * C + 16 * half))
                            : _mm512_setzero_si512();
          transpose16x16(r);
          const SharedTable *t[16];
          __m512 in[16];
          for (int k = 0; k < 16; ++k) {
            t[k] = &tables[16 * half + k];
            in[k] = _mm512_castsi512_ps(r[k]);
          }
          nearestShared<count>(t, in, r);
          transpose16x16(r);
          for (int i = 0; i < rows; ++i) {
            const __m128i bytes = _mm512_cvtepi32_epi8(r[i]);
            if (half == 0)
              low[i] = bytes;
            else // in registers: bytes stored in halves and loaded whole
                 // would miss store forwarding
              writeCodes32(codes, layout, e0 + i * C, bits,
                           _mm256_inserti128_si256(
                               _mm256_castsi128_si256(low[i]), bytes, 1));
          }
        }
      }
    }
}

using Kernel = void (*)(const void *, kvq_dtype, const Grid &, const uint16_t *,
                        uint8_t *);

/// Bits and layout as template arguments: writeCodes32 folds to one
/// packing and the level loops unroll.
template <int Bits> KVQ_AVX512 Kernel pick(bool rows, int layout) {
  if (layout == KVQ_CODES_PACKED)
    return rows ? nuqRows<Bits, KVQ_CODES_PACKED>
                : nuqColumns<Bits, KVQ_CODES_PACKED>;
  return rows ? nuqRows<Bits, KVQ_CODES_UNPACKED>
              : nuqColumns<Bits, KVQ_CODES_UNPACKED>;
}

KVQ_AVX512 void nuqQuantAvx512(const NuqQuantArgs &a) {
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const bool rows = g.axis == KVQ_AXIS_PER_TOKEN && g.group % 32 == 0;
  const bool cols = g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 32 == 0;
  const Kernel k =
      rows || cols
          ? kernelForBits<2, 3, 4>(
                bits,
                [&](auto b) { return pick<decltype(b)::value>(rows, layout); })
          : nullptr;
  if (k)
    return k(a.x, a.dtype, g, a.levels, a.codes);
  x86::nuqQuantAvx2(a);
}

} // namespace

void kvq::x86::fillNuqAvx512(KernelTable &t) { t.nuqQuant = nuqQuantAvx512; }
