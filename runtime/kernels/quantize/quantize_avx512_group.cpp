//===- quantize_avx512_group.cpp - KIVI group quantization, AVX-512 -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// groupQuant without excluded elements for groups of 32 codes at a time,
// sixteen lanes per register: per-token groups of a multiple of 32 sixteen
// groups at once (their minima and maxima reduced together by a transpose),
// per-channel groups 32 columns at once. The arithmetic is the AVX2
// kernels' (quantize_avx2.cpp: quantize8's division-free codes with the
// division redone for vectors near a half-integer, fixZeroSign for a zero
// minimum), so the bits are the reference's.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/avx512_util.h"
#include "zero_sign.h"
#include "../x86/x86_kernels.h"

#include "kernels.h"

#include <algorithm>

using namespace kvq;
using namespace kvq::avx2;
using namespace kvq::avx512;

namespace {

template <bool IsMax> KVQ_AVX512 inline __m512 op16(__m512 a, __m512 b) {
  return IsMax ? _mm512_max_ps(a, b) : _mm512_min_ps(a, b);
}

/// Lane k of the result reduces v[k] (min, or max with IsMax): four rounds
/// of pairing halves, 30 shuffles for sixteen reductions. Only the sign of
/// a zero result depends on the order; callers fix it (fixZeroSign).
template <bool IsMax> KVQ_AVX512 inline __m512 reduce16x16(const __m512 *v) {
  constexpr auto op = op16<IsMax>;
  __m512 p[8], q[4], r[2];
  for (int k = 0; k < 8; ++k) // lanes 0-7: v[2k], 8-15: v[2k+1]
    p[k] = op(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee));
  for (int k = 0; k < 4; ++k) // 128-bit block j: v[4k + j]
    q[k] = op(_mm512_shuffle_f32x4(p[2 * k], p[2 * k + 1], 0x88),
              _mm512_shuffle_f32x4(p[2 * k], p[2 * k + 1], 0xdd));
  for (int k = 0; k < 2; ++k) // block j: two of v[8k + j], two of v[8k+4+j]
    r[k] =
        op(_mm512_shuffle_ps(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
           _mm512_shuffle_ps(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane 4j + m now reduces v[4m + j].
  const __m512 f = op(_mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_ps(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
      f);
}

/// Sixteen groups' fp16 scale and zero from their minima and maxima, as
/// uniformParams computes them (a scale rounding to +-0 is stored +0);
/// s, z and r = 1/s (0 where s == 0) as floats.
struct Params16 {
  __m256i sh, zh;
  __m512 s, z, r;
};

KVQ_AVX512 inline Params16 params16(__m512 lo, __m512 hi, int bits) {
  const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 levels = _mm512_set1_ps(static_cast<float>((1 << bits) - 1));
  Params16 p;
  const __m256i s =
      _mm512_cvtps_ph(_mm512_div_ps(_mm512_sub_ps(hi, lo), levels), rn);
  const __m256i mag = _mm256_and_si256(s, _mm256_set1_epi16(0x7fff));
  p.sh =
      _mm256_andnot_si256(_mm256_cmpeq_epi16(mag, _mm256_setzero_si256()), s);
  p.zh = _mm512_cvtps_ph(lo, rn);
  p.s = _mm512_cvtph_ps(p.sh);
  p.z = _mm512_cvtph_ps(p.zh);
  const __mmask16 nz =
      _mm512_cmp_ps_mask(p.s, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  p.r = _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), p.s);
  return p;
}

/// 32 codes of a = x - z (two vectors, each with its scales s and r =
/// 1/s): fastCodes8's t = min(a * r, 512) rounded by vcvtps2dq; if a lane
/// lies within 2^-12 of a half-integer, both vectors take exactCodes8's
/// division instead (0 where s == 0).
/// Clamped to [0, maxc] and narrowed to bytes in element order.
KVQ_AVX512 inline __m256i codes32(__m512 a0, __m512 a1, __m512 s0, __m512 r0,
                                  __m512 s1, __m512 r1, __m512i maxc) {
  const __m512 cap = _mm512_set1_ps(512.0f);
  const __m512 t0 = _mm512_min_ps(_mm512_mul_ps(a0, r0), cap);
  const __m512 t1 = _mm512_min_ps(_mm512_mul_ps(a1, r1), cap);
  __m512i k0 = _mm512_cvtps_epi32(t0), k1 = _mm512_cvtps_epi32(t1);
  const __m512 half = _mm512_set1_ps(0.5f - 0.000244140625f);
  const __m512 d0 = _mm512_abs_ps(_mm512_sub_ps(t0, _mm512_cvtepi32_ps(k0)));
  const __m512 d1 = _mm512_abs_ps(_mm512_sub_ps(t1, _mm512_cvtepi32_ps(k1)));
  if (_mm512_cmp_ps_mask(d0, half, _CMP_GT_OQ) |
      _mm512_cmp_ps_mask(d1, half, _CMP_GT_OQ)) {
    const __m512 zero = _mm512_setzero_ps();
    k0 = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(s0, zero, _CMP_NEQ_OQ),
                                  _mm512_min_ps(_mm512_div_ps(a0, s0), cap));
    k1 = _mm512_maskz_cvtps_epi32(_mm512_cmp_ps_mask(s1, zero, _CMP_NEQ_OQ),
                                  _mm512_min_ps(_mm512_div_ps(a1, s1), cap));
  }
  const __m512i zero = _mm512_setzero_si512();
  k0 = _mm512_min_epi32(_mm512_max_epi32(k0, zero), maxc);
  k1 = _mm512_min_epi32(_mm512_max_epi32(k1, zero), maxc);
  return narrow16x2(k0, k1);
}

/// `lo`, the minima of 16 groups, with each zero given the sign of its
/// group's first zero (fixZeroSign): lane k's group, for k < lanes, has n
/// elements `stride` apart from first + k * laneStep. Only a zero minimum
/// needs it, so lanes are stored and looked up only when there is one.
KVQ_AVX512 inline __m512 fixZeroSigns16(__m512 lo, const void *x,
                                        kvq_dtype dtype, int64_t first,
                                        int64_t laneStep, int lanes, int64_t n,
                                        int64_t stride) {
  if (!_mm512_cmp_ps_mask(lo, _mm512_setzero_ps(), _CMP_EQ_OQ))
    return lo;
  alignas(64) float l[16];
  _mm512_store_ps(l, lo);
  for (int k = 0; k < lanes; ++k)
    l[k] = fixZeroSign(l[k], x, dtype, first + k * laneStep, n, stride);
  return _mm512_load_ps(l);
}

/// Per-token groups of a multiple of 32, sixteen groups per step (a last
/// partial step repeats its last group in the missing lanes). Bits and
/// layout are template arguments so writeCodes32 folds to one packing.
template <int Bits, int Layout>
KVQ_AVX512 void groupQuantRows(const void *x, kvq_dtype dtype, const Grid &g,
                               uint8_t *codes, uint16_t *scale,
                               uint16_t *zero) {
  constexpr int bits = Bits, layout = Layout;
  const __m512i maxc = _mm512_set1_epi32((1 << bits) - 1);
  const int64_t V = g.vectors(), G = g.group;
  for (int64_t v0 = 0; v0 < V; v0 += 16) {
    const int nv = static_cast<int>(std::min<int64_t>(16, V - v0));
    __m512 lo[16], hi[16];
    for (int k = 0; k < 16; ++k) {
      const int64_t base = (v0 + std::min(k, nv - 1)) * G;
      const __m512 e0 = load16(x, dtype, base),
                   e1 = load16(x, dtype, base + 16);
      lo[k] = _mm512_min_ps(e0, e1);
      hi[k] = _mm512_max_ps(e0, e1);
      for (int64_t i = 32; i < G; i += 32) {
        const __m512 f0 = load16(x, dtype, base + i);
        const __m512 f1 = load16(x, dtype, base + i + 16);
        lo[k] = _mm512_min_ps(lo[k], _mm512_min_ps(f0, f1));
        hi[k] = _mm512_max_ps(hi[k], _mm512_max_ps(f0, f1));
      }
    }
    const __m512 los =
        fixZeroSigns16(reduce16x16<false>(lo), x, dtype, v0 * G, G, nv, G, 1);
    const __m512 his = reduce16x16<true>(hi);
    const Params16 p = params16(los, his, bits);
    alignas(32) uint16_t sH[16], zH[16];
    alignas(64) float sF[16], zF[16], rF[16];
    _mm256_store_si256(reinterpret_cast<__m256i *>(sH), p.sh);
    _mm256_store_si256(reinterpret_cast<__m256i *>(zH), p.zh);
    _mm512_store_ps(sF, p.s);
    _mm512_store_ps(zF, p.z);
    _mm512_store_ps(rF, p.r);
    std::copy(sH, sH + nv, scale + v0);
    std::copy(zH, zH + nv, zero + v0);
    for (int k = 0; k < nv; ++k) {
      const int64_t base = (v0 + k) * G;
      const __m512 s = _mm512_set1_ps(sF[k]), z = _mm512_set1_ps(zF[k]);
      const __m512 r = _mm512_set1_ps(rF[k]);
      for (int64_t i = 0; i < G; i += 32)
        writeCodes32(codes, layout, base + i, bits,
                     codes32(_mm512_sub_ps(load16(x, dtype, base + i), z),
                             _mm512_sub_ps(load16(x, dtype, base + i + 16), z),
                             s, r, s, r, maxc));
    }
  }
}

/// Per-channel groups, 32 columns at a time (cols % 32 == 0).
template <int Bits, int Layout>
KVQ_AVX512 void groupQuantColumns(const void *x, kvq_dtype dtype, const Grid &g,
                                  uint8_t *codes, uint16_t *scale,
                                  uint16_t *zero) {
  constexpr int bits = Bits, layout = Layout;
  const __m512i maxc = _mm512_set1_epi32((1 << bits) - 1);
  const int64_t C = g.cols, G = g.group;
  const int64_t elementBytes = dtypeBytes(dtype);
  for (int64_t rg = 0; rg < g.rows / G; ++rg)
    for (int64_t c = 0; c < C; c += 32) {
      const int64_t base = rg * G * C + c;
      __m512 lo[2], hi[2];
      for (int j = 0; j < 2; ++j)
        lo[j] = hi[j] = load16(x, dtype, base + 16 * j);
      for (int64_t i = 1; i < G; ++i)
        for (int j = 0; j < 2; ++j) {
          const __m512 e = load16(x, dtype, base + i * C + 16 * j);
          lo[j] = _mm512_min_ps(lo[j], e);
          hi[j] = _mm512_max_ps(hi[j], e);
        }
      Params16 p[2];
      for (int j = 0; j < 2; ++j) {
        p[j] = params16(
            fixZeroSigns16(lo[j], x, dtype, base + 16 * j, 1, 16, G, C), hi[j],
            bits);
        _mm256_storeu_si256(
            reinterpret_cast<__m256i *>(scale + rg * C + c + 16 * j), p[j].sh);
        _mm256_storeu_si256(
            reinterpret_cast<__m256i *>(zero + rg * C + c + 16 * j), p[j].zh);
      }
      for (int64_t i = 0; i < G; ++i) {
        const int64_t e = base + i * C;
        _mm_prefetch(static_cast<const char *>(x) +
                         (e + x86::kColumnPrefetchAhead) * elementBytes,
                     _MM_HINT_T0);
        const __m512 a0 = _mm512_sub_ps(load16(x, dtype, e), p[0].z);
        const __m512 a1 = _mm512_sub_ps(load16(x, dtype, e + 16), p[1].z);
        writeCodes32(codes, layout, e, bits,
                     codes32(a0, a1, p[0].s, p[0].r, p[1].s, p[1].r, maxc));
      }
    }
}

using Kernel = void (*)(const void *, kvq_dtype, const Grid &, uint8_t *,
                        uint16_t *, uint16_t *);

template <int Bits> KVQ_AVX512 Kernel pick(bool rows, int layout) {
  if (layout == KVQ_CODES_PACKED)
    return rows ? groupQuantRows<Bits, KVQ_CODES_PACKED>
                : groupQuantColumns<Bits, KVQ_CODES_PACKED>;
  return rows ? groupQuantRows<Bits, KVQ_CODES_UNPACKED>
              : groupQuantColumns<Bits, KVQ_CODES_UNPACKED>;
}

KVQ_AVX512 void groupQuantAvx512(const GroupQuantArgs &a) {
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const bool rows = g.axis == KVQ_AXIS_PER_TOKEN && g.group % 32 == 0;
  const bool cols = g.axis == KVQ_AXIS_PER_CHANNEL && g.cols % 32 == 0;
  const Kernel k =
      !a.exclude && (rows || cols)
          ? kernelForBits<2, 3, 4, 8>(
                bits,
                [&](auto b) { return pick<decltype(b)::value>(rows, layout); })
          : nullptr;
  if (k)
    return k(a.x, a.dtype, g, a.codes, a.scale, a.zero);
  x86::groupQuantAvx2(a);
}

} // namespace

void kvq::x86::fillGroupQuantAvx512(KernelTable &t) {
  t.groupQuant = groupQuantAvx512;
}
