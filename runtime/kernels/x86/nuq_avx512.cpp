//===- nuq_avx512.cpp - Nearest-level NUQ quantization, AVX-512 -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// nuqQuant for up to 16 ascending levels, 32 codes per step, packed in
// registers (writeCodes32). Both paths compute what nearestLevel does:
// hi = #levels < x, the float comparison of x - level[hi-1] with
// level[hi] - x, ties (and x above every level) to the first index of the
// lower level's value. No gathers in the inner loops:
//  - one table per token group (values): the table lives in one register,
//    a branch-free binary search and the lookups are vpermps;
//  - one table per channel (keys, a table per 32-token block): 32 channels
//    at a time, their tables transposed once per block to level-major rows,
//    and a scan over the levels keeps the last level below x by masked
//    moves (the levels are sorted, so "below x" holds for a prefix).
//
//===----------------------------------------------------------------------===//
#include "avx2_util.h"
#include "avx512_util.h"
#include "x86_kernels.h"

#include "kernels.h"

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

/// nearestLevel of sixteen values against one table of Count levels.
template <int Count>
KVQ_AVX512 inline __m512i nearestShared(const SharedTable &t, __m512 x) {
  constexpr int count = Count;
  // lower_bound by halving: the answer stays in [pos, pos + s]; a NaN x
  // compares false everywhere and gets 0, as in the reference.
  const __m512i one = _mm512_set1_epi32(1);
  __m512i pos = _mm512_setzero_si512();
  for (int s = count / 2; s >= 1; s /= 2) {
    const __m512 probe = _mm512_permutexvar_ps(
        _mm512_add_epi32(pos, _mm512_set1_epi32(s - 1)), t.level);
    pos = _mm512_mask_add_epi32(pos, _mm512_cmp_ps_mask(probe, x, _CMP_LT_OQ),
                                pos, _mm512_set1_epi32(s));
  }
  pos = _mm512_mask_add_epi32(
      pos,
      _mm512_cmp_ps_mask(_mm512_permutexvar_ps(pos, t.level), x, _CMP_LT_OQ),
      pos, one);
  const __m512i lo =
      _mm512_max_epi32(_mm512_sub_epi32(pos, one), _mm512_setzero_si512());
  const __m512 dLo = _mm512_sub_ps(x, _mm512_permutexvar_ps(lo, t.level));
  // pos == count reads lane count & 15; that lane is masked off.
  const __m512 dHi = _mm512_sub_ps(_mm512_permutexvar_ps(pos, t.level), x);
  const __mmask16 inside =
      _mm512_cmplt_epi32_mask(pos, _mm512_set1_epi32(count));
  const __mmask16 takeHi =
      _mm512_mask_cmp_ps_mask(inside, dHi, dLo, _CMP_LT_OQ);
  return _mm512_mask_mov_epi32(_mm512_permutexvar_epi32(lo, t.first), takeHi,
                               pos);
}

/// Per-token groups of a multiple of 32, one table per group.
template <int Bits, int Layout>
KVQ_AVX512 void nuqRows(const void *x, kvq_dtype dtype, const Grid &g,
                        const uint16_t *levels, uint8_t *codes) {
  constexpr int bits = Bits, count = 1 << Bits, layout = Layout;
  for (int64_t v = 0; v < g.vectors(); ++v) {
    const SharedTable t = loadShared<count>(levels + v * count);
    const int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; i += 32) {
      const __m512i a = nearestShared<count>(t, load16(x, dtype, base + i));
      const __m512i b =
          nearestShared<count>(t, load16(x, dtype, base + i + 16));
      writeCodes32(codes, layout, base + i, bits, narrow16x2(a, b));
    }
  }
}

//===----------------------------------------------------------------------===//
// One table per lane
//===----------------------------------------------------------------------===//

/// Level-major tables of sixteen channels: level l of lane i at
/// level[l][i], and what the scan needs of index l in one word:
/// (l + 1) << 8 | the first index of level l's value.
struct LaneTables {
  alignas(64) float level[16][16];
  alignas(64) int32_t index[16][16];
};

/// Transpose the tables of channels 16 * half .. + 16 from `conv` (the
/// block's tables as floats, channel-major) and find the equal runs.
KVQ_AVX512 inline void buildLanes(LaneTables &t, const float *conv, int count,
                                  int half) {
  const __m512i at = _mm512_add_epi32(
      _mm512_mullo_epi32(laneIndex(), _mm512_set1_epi32(count)),
      _mm512_set1_epi32(16 * half * count));
  __m512 prev = _mm512_setzero_ps();
  __m512i first = _mm512_setzero_si512();
  for (int l = 0; l < count; ++l) {
    const __m512 lv = _mm512_i32gather_ps(
        _mm512_add_epi32(at, _mm512_set1_epi32(l)), conv, 4);
    if (l > 0)
      first = _mm512_mask_mov_epi32(_mm512_set1_epi32(l),
                                    _mm512_cmp_ps_mask(lv, prev, _CMP_EQ_OQ),
                                    first);
    _mm512_store_ps(t.level[l], lv);
    _mm512_store_si512(t.index[l],
                       _mm512_or_si512(_mm512_set1_epi32((l + 1) << 8), first));
    prev = lv;
  }
}

/// nearestLevel of sixteen values, lane i against table i. The levels are
/// ascending, so the lanes where level l < x form a prefix of l: the last
/// masked moves leave level[hi - 1], level[hi] and index[hi - 1], which
/// holds hi and the first index of level[hi - 1]'s value (0 and 0 when no
/// level is below x: x at or below level 0, or NaN, returns 0 either way).
template <int Count>
KVQ_AVX512 inline __m512i nearestLanes(const LaneTables &t, __m512 x) {
  constexpr int count = Count;
  __m512 lvLo = _mm512_load_ps(t.level[0]), lvHi = lvLo;
  __m512i index = _mm512_setzero_si512();
  __mmask16 below = 0;
  for (int l = 0; l < count; ++l) {
    const __m512 lv = _mm512_load_ps(t.level[l]);
    below = _mm512_cmp_ps_mask(lv, x, _CMP_LT_OQ);
    lvLo = _mm512_mask_mov_ps(lvLo, below, lv);
    index = _mm512_mask_mov_epi32(index, below, _mm512_load_si512(t.index[l]));
    if (l + 1 < count)
      lvHi = _mm512_mask_mov_ps(lvHi, below, _mm512_load_ps(t.level[l + 1]));
  }
  const __m512 dLo = _mm512_sub_ps(x, lvLo), dHi = _mm512_sub_ps(lvHi, x);
  const __mmask16 takeHi = _mm512_mask_cmp_ps_mask(
      static_cast<__mmask16>(~below), dHi, dLo, _CMP_LT_OQ);
  return _mm512_mask_srli_epi32(
      _mm512_and_si512(index, _mm512_set1_epi32(0xff)), takeHi, index, 8);
}

/// Per-channel groups, 32 columns at a time (cols % 32 == 0).
template <int Bits, int Layout>
KVQ_AVX512 void nuqColumns(const void *x, kvq_dtype dtype, const Grid &g,
                           const uint16_t *levels, uint8_t *codes) {
  constexpr int bits = Bits, count = 1 << Bits, layout = Layout;
  const int64_t C = g.cols, G = g.group;
  alignas(64) float conv[32 * 16];
  LaneTables t[2];
  for (int64_t rg = 0; rg < g.rows / G; ++rg)
    for (int64_t c = 0; c < C; c += 32) {
      // The 32 channels' tables are contiguous: 32 * count halfs.
      const uint16_t *lv = levels + (rg * C + c) * count;
      for (int i = 0; i < 32 * count; i += 16)
        _mm512_store_ps(conv + i,
                        _mm512_cvtph_ps(_mm256_loadu_si256(
                            reinterpret_cast<const __m256i *>(lv + i))));
      buildLanes(t[0], conv, count, 0);
      buildLanes(t[1], conv, count, 1);
      for (int64_t i = 0; i < G; ++i) {
        const int64_t e = (rg * G + i) * C + c;
        // The rows are a stride apart and each costs many instructions, so
        // out-of-order execution alone keeps few loads in flight: fetch the
        // next 32 columns' line of this row ahead.
        _mm_prefetch(static_cast<const char *>(x) +
                         (e + 32) * (dtype == KVQ_DTYPE_F16 ? 2 : 4),
                     _MM_HINT_T0);
        const __m512i a = nearestLanes<count>(t[0], load16(x, dtype, e));
        const __m512i b = nearestLanes<count>(t[1], load16(x, dtype, e + 16));
        writeCodes32(codes, layout, e, bits, narrow16x2(a, b));
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

KVQ_AVX512 void nuqQuantAvx512(const void *x, kvq_dtype dtype, const Grid &g,
                               int bits, const uint16_t *levels, int layout,
                               uint8_t *codes) {
  const bool rows = g.axis == KVQ_AXIS_PER_TOKEN && g.group % 32 == 0;
  const bool cols = g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 32 == 0;
  const Kernel k =
      rows || cols
          ? kernelForBits<2, 3, 4>(
                bits,
                [&](auto b) { return pick<decltype(b)::value>(rows, layout); })
          : nullptr;
  if (k)
    return k(x, dtype, g, levels, codes);
  x86::nuqQuantAvx2(x, dtype, g, bits, levels, layout, codes);
}

} // namespace

void kvq::x86::fillNuqAvx512(KernelTable &t) { t.nuqQuant = nuqQuantAvx512; }
