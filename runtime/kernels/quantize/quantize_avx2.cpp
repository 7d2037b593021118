//===- quantize_avx2.cpp - AVX2+F16C uniform and NUQ (de)quantization -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Group quantization with fp16 scale/zero, its inverse, nearest-level NUQ
// quantization and table-lookup dequantization, plus code (un)packing. Every
// result is bit-identical to the reference (quantize_ref_grid.cpp): the same
// IEEE operations in the same order, with two deliberate detours that are
// proven equal (see quantize8 and fixZeroSign).
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "zero_sign.h"

#include <algorithm>

using namespace kvq;
using namespace kvq::avx2;

namespace {

/// Codes of 8 values: clamp(rint((x - z) / s), 0, maxc), 0 where s == 0.
/// Division is the slow part, so t = (x - z) * (1/s) is used when it cannot
/// round differently: |t - (x-z)/s| < 2^-12 for every |t| < 2^10 (two
/// float roundings on |t|), so unless t lies within 2^-12 of a half-integer
/// rint(t) is rint of the correctly rounded quotient. Larger |t| clamp the
/// same way either way. Vectors with a lane near a half take the division.
KVQ_AVX2 inline __m256i quantize8(__m256 x, __m256 z, __m256 s, __m256 r,
                                  __m256 maxc, __m256 nonzero) {
  const __m256 a = _mm256_sub_ps(x, z);
  const __m256 t = _mm256_mul_ps(a, r);
  __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 dist = _mm256_and_ps(_mm256_sub_ps(t, k), absMask);
  const __m256 near =
      _mm256_cmp_ps(dist, _mm256_set1_ps(0.5f - 0.000244140625f), _CMP_GT_OQ);
  if (_mm256_movemask_ps(_mm256_and_ps(near, nonzero)))
    k = _mm256_round_ps(_mm256_div_ps(a, s),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // max(NaN, 0) is 0: lanes with s == 0 (t = NaN or inf) end up masked.
  k = _mm256_min_ps(_mm256_max_ps(k, _mm256_setzero_ps()), maxc);
  return _mm256_cvttps_epi32(_mm256_and_ps(k, nonzero));
}

/// quantize8's division-free path without the clamp, for the 32-code
/// kernels: t = min((x - z) * r, 512) with r = 1/s (0 where s == 0, so such
/// lanes give t = 0), converted by vcvtps2dq, which rounds half to even
/// under the default rounding mode exactly as the reference's nearbyint
/// does. Lanes within 2^-12 of a half-integer are or-ed into `near` (the
/// caller then redoes the vector with exactCodes8). 512 keeps the
/// conversion in range: any t >= 512 clamps to the largest code whichever
/// quotient is used. Negative and oversized codes clamp in narrow32.
KVQ_AVX2 inline __m256i fastCodes8(__m256 a, __m256 r, __m256 &near) {
  const __m256 t = _mm256_min_ps(_mm256_mul_ps(a, r), _mm256_set1_ps(512.0f));
  const __m256i k = _mm256_cvtps_epi32(t);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 dist =
      _mm256_and_ps(_mm256_sub_ps(t, _mm256_cvtepi32_ps(k)), absMask);
  near = _mm256_or_ps(
      near,
      _mm256_cmp_ps(dist, _mm256_set1_ps(0.5f - 0.000244140625f), _CMP_GT_OQ));
  return k;
}

/// The exact codes of a vector: rint((x - z) / s) with the division, 0 in
/// lanes where s == 0 (their 0/0 or x/0 becomes 512 in vminps and is masked).
KVQ_AVX2 inline __m256i exactCodes8(__m256 a, __m256 s, __m256 nonzero) {
  const __m256 t = _mm256_min_ps(_mm256_div_ps(a, s), _mm256_set1_ps(512.0f));
  return _mm256_and_si256(_mm256_cvtps_epi32(t), _mm256_castps_si256(nonzero));
}

/// fp16 scale/zero of eight groups from their min/max, as uniformParams
/// does per group (lanes whose fp16 scale is +-0 store +0).
KVQ_AVX2 inline void params8(__m256 lo, __m256 hi, int bits, __m128i *sh,
                             __m128i *zh) {
  const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m256 levels = _mm256_set1_ps(static_cast<float>((1 << bits) - 1));
  __m128i s = _mm256_cvtps_ph(_mm256_div_ps(_mm256_sub_ps(hi, lo), levels), rn);
  const __m128i mag = _mm_and_si128(s, _mm_set1_epi16(0x7fff));
  *sh = _mm_andnot_si128(_mm_cmpeq_epi16(mag, _mm_setzero_si128()), s);
  *zh = _mm256_cvtps_ph(lo, rn);
}

/// Per-token groups (contiguous, group % 8 == 0): eight groups share one
/// vector computation of their scale/zero.
KVQ_AVX2 void groupQuantRows(const void *x, kvq_dtype dtype, const Grid &g,
                             int bits, int layout, uint8_t *codes,
                             uint16_t *scale, uint16_t *zero) {
  const __m256 maxc = _mm256_set1_ps(static_cast<float>((1 << bits) - 1));
  const int64_t V = g.vectors();
  for (int64_t v0 = 0; v0 < V; v0 += 8) {
    const int nv = static_cast<int>(std::min<int64_t>(8, V - v0));
    alignas(32) float los[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    alignas(32) float his[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < nv; ++k) {
      const int64_t base = g.base(v0 + k);
      __m256 lo = load8(x, dtype, base), hi = lo;
      for (int64_t i = 8; i < g.group; i += 8) {
        __m256 e = load8(x, dtype, base + i);
        lo = _mm256_min_ps(lo, e);
        hi = _mm256_max_ps(hi, e);
      }
      los[k] = fixZeroSign(hmin(lo), x, dtype, base, g.group, 1);
      his[k] = hmax(hi);
    }
    __m128i sh, zh;
    params8(_mm256_load_ps(los), _mm256_load_ps(his), bits, &sh, &zh);
    alignas(16) uint16_t sH[8], zH[8];
    _mm_store_si128(reinterpret_cast<__m128i *>(sH), sh);
    _mm_store_si128(reinterpret_cast<__m128i *>(zH), zh);
    alignas(32) float sF[8], zF[8], rF[8];
    const __m256 s = _mm256_cvtph_ps(sh);
    _mm256_store_ps(sF, s);
    _mm256_store_ps(zF, _mm256_cvtph_ps(zh));
    _mm256_store_ps(rF, _mm256_div_ps(_mm256_set1_ps(1.0f), s));
    for (int k = 0; k < nv; ++k) {
      scale[v0 + k] = sH[k];
      zero[v0 + k] = zH[k];
      const int64_t base = g.base(v0 + k);
      const __m256 sv = _mm256_set1_ps(sF[k]), zv = _mm256_set1_ps(zF[k]);
      const __m256 rv = _mm256_set1_ps(sF[k] != 0.0f ? rF[k] : 0.0f);
      const __m256 nz =
          _mm256_castsi256_ps(_mm256_set1_epi32(sF[k] != 0.0f ? -1 : 0));
      for (int64_t i = 0; i < g.group; i += 8)
        writeCodes8(codes, layout, base + i, bits,
                    quantize8(load8(x, dtype, base + i), zv, sv, rv, maxc, nz));
    }
  }
}

/// Horizontal minimum (IsMax: maximum) of eight vectors at once: lane k of
/// the result reduces v[k]. Pairwise interleaves halve the vectors three
/// times (14 shuffles and 7 min/max for eight reductions instead of 48
/// instructions for eight separate ones). min/max of floats is exact, so
/// only which of +0 / -0 comes out can depend on the order; the caller
/// resolves that the reference's way (fixZeroSign).
template <bool IsMax> KVQ_AVX2 inline __m256 minOrMax(__m256 a, __m256 b) {
  return IsMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
}

template <bool IsMax> KVQ_AVX2 inline __m256 reduce8x8(const __m256 *v) {
  constexpr auto op = minOrMax<IsMax>;
  __m256 p[4];
  for (int i = 0; i < 4; ++i)
    p[i] = op(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
              _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  const __m256 q0 = op(_mm256_shuffle_ps(p[0], p[1], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(p[0], p[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 q1 = op(_mm256_shuffle_ps(p[2], p[3], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(p[2], p[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return op(_mm256_permute2f128_ps(q0, q1, 0x20),
            _mm256_permute2f128_ps(q0, q1, 0x31));
}

/// Per-token groups of a multiple of 32: like groupQuantRows, but 32 codes
/// per step, so they narrow and pack in vector registers (writeCodes32).
/// Group v starts at v * group (per-token groups tile each row).
KVQ_AVX2 void groupQuantRows32(const void *x, kvq_dtype dtype, const Grid &g,
                               int bits, int layout, uint8_t *codes,
                               uint16_t *scale, uint16_t *zero) {
  const __m256i maxc8 = _mm256_set1_epi8(static_cast<char>((1 << bits) - 1));
  const int64_t V = g.vectors(), G = g.group;
  for (int64_t v0 = 0; v0 < V; v0 += 8) {
    const int nv = static_cast<int>(std::min<int64_t>(8, V - v0));
    __m256 lo[8], hi[8];
    for (int k = 0; k < 8; ++k) {
      // Missing groups of a last partial batch repeat the previous one.
      const int64_t base = (v0 + std::min(k, nv - 1)) * G;
      __m256 lo0 = load8(x, dtype, base), hi0 = lo0;
      __m256 lo1 = load8(x, dtype, base + 8), hi1 = lo1;
      for (int64_t i = 16; i < G; i += 16) {
        const __m256 e0 = load8(x, dtype, base + i);
        const __m256 e1 = load8(x, dtype, base + i + 8);
        lo0 = _mm256_min_ps(lo0, e0);
        hi0 = _mm256_max_ps(hi0, e0);
        lo1 = _mm256_min_ps(lo1, e1);
        hi1 = _mm256_max_ps(hi1, e1);
      }
      lo[k] = _mm256_min_ps(lo0, lo1);
      hi[k] = _mm256_max_ps(hi0, hi1);
    }
    alignas(32) float los[8], his[8];
    _mm256_store_ps(los, reduce8x8<false>(lo));
    _mm256_store_ps(his, reduce8x8<true>(hi));
    for (int k = 0; k < nv; ++k)
      if (los[k] == 0.0f)
        los[k] = fixZeroSign(los[k], x, dtype, (v0 + k) * G, G, 1);
    __m128i sh, zh;
    params8(_mm256_load_ps(los), _mm256_load_ps(his), bits, &sh, &zh);
    alignas(16) uint16_t sH[8], zH[8];
    _mm_store_si128(reinterpret_cast<__m128i *>(sH), sh);
    _mm_store_si128(reinterpret_cast<__m128i *>(zH), zh);
    alignas(32) float sF[8], zF[8], rF[8];
    const __m256 s = _mm256_cvtph_ps(sh);
    const __m256 nz = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_NEQ_OQ);
    _mm256_store_ps(sF, s);
    _mm256_store_ps(zF, _mm256_cvtph_ps(zh));
    _mm256_store_ps(rF,
                    _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), s), nz));
    for (int k = 0; k < nv; ++k) {
      scale[v0 + k] = sH[k];
      zero[v0 + k] = zH[k];
      const int64_t base = (v0 + k) * G;
      const __m256 sv = _mm256_set1_ps(sF[k]), zv = _mm256_set1_ps(zF[k]);
      const __m256 rv = _mm256_set1_ps(rF[k]);
      for (int64_t i = 0; i < G; i += 32) {
        __m256 a[4];
        __m256i c[4];
        __m256 near = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
          a[j] = _mm256_sub_ps(load8(x, dtype, base + i + 8 * j), zv);
          c[j] = fastCodes8(a[j], rv, near);
        }
        if (_mm256_movemask_ps(near)) {
          const __m256 nzv =
              _mm256_castsi256_ps(_mm256_set1_epi32(sF[k] != 0.0f ? -1 : 0));
          for (int j = 0; j < 4; ++j)
            c[j] = exactCodes8(a[j], sv, nzv);
        }
        writeCodes32(codes, layout, base + i, bits,
                     narrow32(c[0], c[1], c[2], c[3], maxc8));
      }
    }
  }
}

/// Per-channel groups, 32 columns at a time: four vectors of scales and
/// zeros, and the 32 codes of a row segment are contiguous, so they pack
/// in registers (writeCodes32).
KVQ_AVX2 void groupQuantColumns32(const void *x, kvq_dtype dtype, const Grid &g,
                                  int bits, int layout, uint8_t *codes,
                                  uint16_t *scale, uint16_t *zero) {
  const __m256i maxc8 = _mm256_set1_epi8(static_cast<char>((1 << bits) - 1));
  const int64_t C = g.cols, G = g.group;
  for (int64_t rg = 0; rg < g.rows / G; ++rg)
    for (int64_t c = 0; c < C; c += 32) {
      const int64_t base = rg * G * C + c;
      __m256 lo[4], hi[4];
      for (int j = 0; j < 4; ++j)
        lo[j] = hi[j] = load8(x, dtype, base + 8 * j);
      for (int64_t i = 1; i < G; ++i)
        for (int j = 0; j < 4; ++j) {
          const __m256 e = load8(x, dtype, base + i * C + 8 * j);
          lo[j] = _mm256_min_ps(lo[j], e);
          hi[j] = _mm256_max_ps(hi[j], e);
        }
      __m256 z[4], r[4];
      alignas(32) float sAll[32], nzAll[32];
      for (int j = 0; j < 4; ++j) {
        // Only a zero minimum needs the sign of the group's first zero.
        if (_mm256_movemask_ps(
                _mm256_cmp_ps(lo[j], _mm256_setzero_ps(), _CMP_EQ_OQ))) {
          alignas(32) float los[8];
          _mm256_store_ps(los, lo[j]);
          for (int lane = 0; lane < 8; ++lane)
            los[lane] =
                fixZeroSign(los[lane], x, dtype, base + 8 * j + lane, G, C);
          lo[j] = _mm256_load_ps(los);
        }
        __m128i sh, zh;
        params8(lo[j], hi[j], bits, &sh, &zh);
        _mm_storeu_si128(
            reinterpret_cast<__m128i *>(scale + rg * C + c + 8 * j), sh);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(zero + rg * C + c + 8 * j),
                         zh);
        const __m256 s = _mm256_cvtph_ps(sh);
        const __m256 nz = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_NEQ_OQ);
        z[j] = _mm256_cvtph_ps(zh);
        r[j] = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), s), nz);
        _mm256_store_ps(sAll + 8 * j, s);
        _mm256_store_ps(nzAll + 8 * j, nz);
      }
      for (int64_t i = 0; i < G; ++i) {
        const int64_t e = base + i * C;
        _mm_prefetch(static_cast<const char *>(x) +
                         (e + x86::kColumnPrefetchAhead) * dtypeBytes(dtype),
                     _MM_HINT_T0);
        __m256 a[4];
        __m256i k[4];
        __m256 near = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
          a[j] = _mm256_sub_ps(load8(x, dtype, e + 8 * j), z[j]);
          k[j] = fastCodes8(a[j], r[j], near);
        }
        if (_mm256_movemask_ps(near))
          for (int j = 0; j < 4; ++j)
            k[j] = exactCodes8(a[j], _mm256_load_ps(sAll + 8 * j),
                               _mm256_load_ps(nzAll + 8 * j));
        writeCodes32(codes, layout, e, bits,
                     narrow32(k[0], k[1], k[2], k[3], maxc8));
      }
    }
}

/// Per-channel groups: eight columns at a time, scale/zero computed in
/// vectors exactly as uniformParams does per column.
KVQ_AVX2 void groupQuantColumns(const void *x, kvq_dtype dtype, const Grid &g,
                                int bits, int layout, uint8_t *codes,
                                uint16_t *scale, uint16_t *zero) {
  const float levels = static_cast<float>((1 << bits) - 1);
  const __m256 maxc = _mm256_set1_ps(levels);
  const int64_t C = g.cols, G = g.group;
  for (int64_t rg = 0; rg < g.rows / G; ++rg)
    for (int64_t c = 0; c < C; c += 8) {
      const int64_t base = rg * G * C + c;
      __m256 lo = load8(x, dtype, base), hi = lo;
      for (int64_t i = 1; i < G; ++i) {
        __m256 e = load8(x, dtype, base + i * C);
        lo = _mm256_min_ps(lo, e);
        hi = _mm256_max_ps(hi, e);
      }
      alignas(32) float los[8];
      _mm256_store_ps(los, lo);
      for (int lane = 0; lane < 8; ++lane)
        los[lane] = fixZeroSign(los[lane], x, dtype, base + lane, G, C);
      lo = _mm256_load_ps(los);
      const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      __m128i sh = _mm256_cvtps_ph(
          _mm256_div_ps(_mm256_sub_ps(hi, lo), _mm256_set1_ps(levels)), rn);
      // A scale that rounds to +-0 is stored as +0 (constant group).
      const __m128i mag = _mm_and_si128(sh, _mm_set1_epi16(0x7fff));
      sh = _mm_andnot_si128(_mm_cmpeq_epi16(mag, _mm_setzero_si128()), sh);
      const __m128i zh = _mm256_cvtps_ph(lo, rn);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(scale + rg * C + c), sh);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(zero + rg * C + c), zh);
      const __m256 s = _mm256_cvtph_ps(sh), z = _mm256_cvtph_ps(zh);
      const __m256 nz = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_NEQ_OQ);
      const __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
      for (int64_t i = 0; i < G; ++i)
        writeCodes8(
            codes, layout, base + i * C, bits,
            quantize8(load8(x, dtype, base + i * C), z, s, r, maxc, nz));
    }
}

KVQ_AVX2 void groupDequantAvx2(const GroupDequantArgs &a) {
  const uint8_t *codes = a.codes;
  const int layout = a.layout, bits = a.bits;
  const uint16_t *scale = a.scale, *zero = a.zero;
  const Grid &g = a.grid;
  void *out = a.out;
  const kvq_dtype dtype = a.dtype;
  if (g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0) {
    for (int64_t v = 0; v < g.vectors(); ++v) {
      const int64_t base = g.base(v);
      const __m256 s = _mm256_set1_ps(halfToFloat(scale[v]));
      const __m256 z = _mm256_set1_ps(halfToFloat(zero[v]));
      for (int64_t i = 0; i < g.group; i += 8) {
        __m256 c =
            _mm256_cvtepi32_ps(readCodes8(codes, layout, base + i, bits));
        store8(out, dtype, base + i, _mm256_add_ps(_mm256_mul_ps(c, s), z));
      }
    }
    return;
  }
  if (g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0) {
    const int64_t C = g.cols, G = g.group;
    for (int64_t rg = 0; rg < g.rows / G; ++rg)
      for (int64_t c = 0; c < C; c += 8) {
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i *>(scale + rg * C + c)));
        const __m256 z = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i *>(zero + rg * C + c)));
        for (int64_t i = 0; i < G; ++i) {
          const int64_t e = (rg * G + i) * C + c;
          __m256 v = _mm256_cvtepi32_ps(readCodes8(codes, layout, e, bits));
          store8(out, dtype, e, _mm256_add_ps(_mm256_mul_ps(v, s), z));
        }
      }
    return;
  }
  groupDequantRef(a);
}

//===----------------------------------------------------------------------===//
// NUQ: nearest level and table lookup
//===----------------------------------------------------------------------===//

/// Up to 16 levels for eight lanes: lane-major tables (level l of lane i at
/// [l*8 + i]) and, per level, the first index holding the same value
/// (nearestLevel's tie rule).
struct LaneLevels {
  alignas(32) float level[16 * 8];
  alignas(32) int32_t firstEqual[16 * 8];
  int count;
};

/// Fill lane `lane` of t from `count` ascending fp16 levels.
void setLane(LaneLevels &t, int lane, const uint16_t *levels, int count) {
  for (int l = 0; l < count; ++l) {
    t.level[l * 8 + lane] = halfToFloat(levels[l]);
    int f = l;
    while (f > 0 && t.level[(f - 1) * 8 + lane] == t.level[l * 8 + lane])
      --f;
    t.firstEqual[l * 8 + lane] = f;
  }
}

/// nearestLevel for eight values at once, each lane with its own table:
/// hi = #levels < x (lower_bound), then the reference's comparison of the
/// two neighbours in float, ties (and x above all) to the first equal level.
KVQ_AVX2 inline __m256i nearest8(const LaneLevels &t, __m256 x) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i hi = _mm256_setzero_si256();
  for (int l = 0; l < t.count; ++l) {
    __m256 lt = _mm256_cmp_ps(_mm256_load_ps(t.level + l * 8), x, _CMP_LT_OQ);
    hi = _mm256_sub_epi32(hi, _mm256_castps_si256(lt));
  }
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i count = _mm256_set1_epi32(t.count);
  const __m256i lo =
      _mm256_max_epi32(_mm256_sub_epi32(hi, one), _mm256_setzero_si256());
  const __m256i hiC = _mm256_min_epi32(hi, _mm256_sub_epi32(count, one));
  const __m256i loIdx = _mm256_add_epi32(_mm256_slli_epi32(lo, 3), lanes);
  const __m256i hiIdx = _mm256_add_epi32(_mm256_slli_epi32(hiC, 3), lanes);
  const __m256 lvLo = _mm256_i32gather_ps(t.level, loIdx, 4);
  const __m256 lvHi = _mm256_i32gather_ps(t.level, hiIdx, 4);
  const __m256 dLo = _mm256_sub_ps(x, lvLo), dHi = _mm256_sub_ps(lvHi, x);
  const __m256i takeHi = _mm256_and_si256(
      _mm256_cmpgt_epi32(count, hi),
      _mm256_castps_si256(_mm256_cmp_ps(dHi, dLo, _CMP_LT_OQ)));
  const __m256i first = _mm256_i32gather_epi32(t.firstEqual, loIdx, 4);
  return _mm256_blendv_epi8(first, hi, takeHi);
}

KVQ_AVX2 void nuqDequantAvx2(const NuqDequantArgs &a) {
  const uint8_t *codes = a.codes;
  const int layout = a.layout, bits = a.bits;
  const uint16_t *levels = a.levels;
  const Grid &g = a.grid;
  void *out = a.out;
  const kvq_dtype dtype = a.dtype;
  const int count = 1 << bits;
  alignas(32) float table[kMaxLevels * 8];
  if (g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0) {
    for (int64_t v = 0; v < g.vectors(); ++v) {
      for (int l = 0; l < count; ++l)
        table[l] = halfToFloat(levels[v * count + l]);
      const int64_t base = g.base(v);
      for (int64_t i = 0; i < g.group; i += 8)
        store8(out, dtype, base + i,
               _mm256_i32gather_ps(
                   table, readCodes8(codes, layout, base + i, bits), 4));
    }
    return;
  }
  if (g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0) {
    const int64_t C = g.cols, G = g.group;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t rg = 0; rg < g.rows / G; ++rg)
      for (int64_t c = 0; c < C; c += 8) {
        for (int lane = 0; lane < 8; ++lane)
          for (int l = 0; l < count; ++l)
            table[l * 8 + lane] =
                halfToFloat(levels[(rg * C + c + lane) * count + l]);
        for (int64_t i = 0; i < G; ++i) {
          const int64_t e = (rg * G + i) * C + c;
          __m256i idx = _mm256_add_epi32(
              _mm256_slli_epi32(readCodes8(codes, layout, e, bits), 3), lanes);
          store8(out, dtype, e, _mm256_i32gather_ps(table, idx, 4));
        }
      }
    return;
  }
  nuqDequantRef(a);
}

//===----------------------------------------------------------------------===//
// Strided primitives of the cache stores
//===----------------------------------------------------------------------===//

KVQ_AVX2 void uniformCalibrateAvx2(const UniformCalibrateArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int bits = a.bits;
  uint16_t *scale = a.scale, *zero = a.zero;
  if (stride != 1 || exclude || n < 8)
    return uniformCalibrateRef(a);
  __m256 lo = _mm256_loadu_ps(x), hi = lo;
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) {
    __m256 e = _mm256_loadu_ps(x + i);
    lo = _mm256_min_ps(lo, e);
    hi = _mm256_max_ps(hi, e);
  }
  float l = hmin(lo), h = hmax(hi);
  for (; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  uniformParams(fixZeroSign(l, x, KVQ_DTYPE_F32, 0, n, 1), h, true, bits, scale,
                zero);
}

KVQ_AVX2 void uniformQuantizeAvx2(const UniformQuantizeArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint16_t scale = a.scale, zero = a.zero;
  const int bits = a.bits;
  uint8_t *codes = a.codes;
  const int64_t codeStride = a.codeStride;
  if (stride != 1 || codeStride != 1)
    return uniformQuantizeRef(a);
  const float s = halfToFloat(scale);
  const __m256 sv = _mm256_set1_ps(s), zv = _mm256_set1_ps(halfToFloat(zero));
  const __m256 rv = _mm256_set1_ps(s != 0.0f ? 1.0f / s : 0.0f);
  const __m256 nz = _mm256_castsi256_ps(_mm256_set1_epi32(s != 0.0f ? -1 : 0));
  const __m256 maxc = _mm256_set1_ps(static_cast<float>((1 << bits) - 1));
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    uint64_t b =
        narrow8(quantize8(_mm256_loadu_ps(x + i), zv, sv, rv, maxc, nz));
    std::memcpy(codes + i, &b, 8);
  }
  if (n8 < n)
    uniformQuantizeRef({x + n8, n - n8, 1, scale, zero, bits, codes + n8, 1});
}

/// unpackCodes: 3-bit codes 16 at a time from their 6 bytes (codes3x16;
/// the pre-RoPE key pass of a 3-bit KIVI cache unpacks every key row, and
/// the SWAR loop spent ~12 scalar operations per 8 codes there); other
/// widths and the tail by SWAR.
KVQ_AVX2 void unpackCodesAvx2(const uint8_t *packed, int64_t n, int bits,
                              uint8_t *codes) {
  if (bits != 3) {
    unpackCodesSwar(packed, n, bits, codes);
    return;
  }
  const __m256i seven = _mm256_set1_epi32(7);
  // After the two packs the bytes are codes 0-3, 8-11, 4-7, 12-15.
  const __m128i order =
      _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i lo, hi;
    codes3x16(packed + i / 8 * 3, lo, hi);
    const __m256i words = _mm256_packus_epi32(_mm256_and_si256(lo, seven),
                                              _mm256_and_si256(hi, seven));
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                           _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + i),
                     _mm_shuffle_epi8(bytes, order));
  }
  if (i < n)
    unpackCodesSwar(packed + i / 8 * 3, n - i, 3, codes + i);
}

} // namespace

KVQ_AVX2 void kvq::x86::groupQuantAvx2(const GroupQuantArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const uint8_t *exclude = a.exclude;
  uint8_t *codes = a.codes;
  uint16_t *scale = a.scale, *zero = a.zero;
  if (!exclude && g.axis == KVQ_AXIS_PER_TOKEN && g.group % 32 == 0)
    return groupQuantRows32(x, dtype, g, bits, layout, codes, scale, zero);
  if (!exclude && g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 32 == 0)
    return groupQuantColumns32(x, dtype, g, bits, layout, codes, scale, zero);
  if (!exclude && g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0)
    return groupQuantRows(x, dtype, g, bits, layout, codes, scale, zero);
  if (!exclude && g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0)
    return groupQuantColumns(x, dtype, g, bits, layout, codes, scale, zero);
  groupQuantRef(a);
}

KVQ_AVX2 void kvq::x86::nuqQuantAvx2(const NuqQuantArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const uint16_t *levels = a.levels;
  uint8_t *codes = a.codes;
  const int count = 1 << bits;
  LaneLevels t;
  t.count = count;
  if (count <= 16 && g.axis == KVQ_AXIS_PER_TOKEN && g.group % 8 == 0) {
    for (int64_t v = 0; v < g.vectors(); ++v) {
      for (int lane = 0; lane < 8; ++lane)
        setLane(t, lane, levels + v * count, count);
      const int64_t base = g.base(v);
      for (int64_t i = 0; i < g.group; i += 8)
        writeCodes8(codes, layout, base + i, bits,
                    nearest8(t, load8(x, dtype, base + i)));
    }
    return;
  }
  if (count <= 16 && g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 8 == 0) {
    const int64_t C = g.cols, G = g.group;
    for (int64_t rg = 0; rg < g.rows / G; ++rg)
      for (int64_t c = 0; c < C; c += 8) {
        for (int lane = 0; lane < 8; ++lane)
          setLane(t, lane, levels + (rg * C + c + lane) * count, count);
        for (int64_t i = 0; i < G; ++i) {
          const int64_t e = (rg * G + i) * C + c;
          writeCodes8(codes, layout, e, bits, nearest8(t, load8(x, dtype, e)));
        }
      }
    return;
  }
  nuqQuantRef(a);
}

void kvq::x86::fillQuantAvx2(KernelTable &t) {
  t.packCodes = packCodesSwar;
  t.unpackCodes = unpackCodesAvx2;
  t.uniformCalibrate = uniformCalibrateAvx2;
  t.uniformQuantize = uniformQuantizeAvx2;
  t.groupQuant = x86::groupQuantAvx2;
  t.groupDequant = groupDequantAvx2;
  t.nuqQuant = x86::nuqQuantAvx2;
  t.nuqDequant = nuqDequantAvx2;
}
