//===- outliers_avx2.cpp - AVX2 outliers, screening, key norms, sinks -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The rank split keeps the reference's bisection on float bit patterns; only
// the counting passes are vectorized, so thresholds and masks are the same
// integers. Key norms run four tokens per double vector, each lane summing
// its own token in the reference order, so the norms are bit-identical.
//
//===----------------------------------------------------------------------===//
#include "../x86/avx2_util.h"
#include "../x86/x86_kernels.h"

#include "fp16.h"
#include "outliers_fast.h"
#include "topk_impl.h"

#include <limits>

using namespace kvq;
using namespace kvq::avx2;

namespace {

/// Number of the n contiguous elements at base whose |x| bits are >= t.
KVQ_AVX2 int64_t countAtLeast(const void *x, kvq_dtype dtype, int64_t base,
                              int64_t n, uint32_t t) {
  if (t == 0)
    return n;
  const __m256i tv = _mm256_set1_epi32(static_cast<int32_t>(t - 1));
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  __m256i cnt = _mm256_setzero_si256();
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    __m256i mag = _mm256_and_si256(
        _mm256_castps_si256(load8(x, dtype, base + i)), absMask);
    cnt = _mm256_sub_epi32(cnt, _mm256_cmpgt_epi32(mag, tv));
  }
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), cnt);
  int64_t c = 0;
  for (int32_t l : lanes)
    c += l;
  for (int64_t i = n8; i < n; ++i)
    c += (floatBits(loadElement(x, dtype, base + i)) & 0x7fffffffu) >= t;
  return c;
}

/// kthMagnitude for 1 <= k <= min(n, kOnePassK) by KLargest: the same
/// integers; a block of 8 with none above the k-th kept is skipped by one
/// compare.
KVQ_AVX2 uint32_t kthMagnitudeOnePass(const void *x, kvq_dtype dtype,
                                      int64_t base, int64_t n, int64_t k,
                                      int64_t *ties) {
  KLargest top(k);
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256i mag = _mm256_and_si256(
        _mm256_castps_si256(load8(x, dtype, base + i)), absMask);
    if (top.full()) { // magnitudes are below 2^31: signed compares order them
      const __m256i kth = _mm256_set1_epi32(static_cast<int32_t>(top.kth()));
      if (_mm256_testz_si256(_mm256_cmpgt_epi32(mag, kth),
                             _mm256_set1_epi32(-1)))
        continue;
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), mag);
    for (uint32_t b : lanes)
      top.offer(b);
  }
  for (int64_t i = n8; i < n; ++i)
    top.offer(floatBits(loadElement(x, dtype, base + i)) & 0x7fffffffu);
  return top.kthLargest(ties);
}

/// topkAbsGeneric's bisection with vector counts (no exclusions): the k-th
/// largest magnitude bits and how many elements equal to it to take.
/// 1 <= k <= n.
KVQ_AVX2 uint32_t kthMagnitude(const void *x, kvq_dtype dtype, int64_t base,
                               int64_t n, int64_t k, int64_t *ties) {
  if (k <= kOnePassK)
    return kthMagnitudeOnePass(x, dtype, base, n, k, ties);
  uint32_t lo = 0, hi = 0x7f800001u;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (countAtLeast(x, dtype, base, n, mid) >= k)
      lo = mid;
    else
      hi = mid;
  }
  *ties = k - countAtLeast(x, dtype, base, n, lo + 1);
  return lo;
}

/// Mark the k largest |x| of n contiguous elements (ties to the earlier
/// index) through mark(i, taken); returns the threshold bits (0 if k == 0).
template <class Mark>
KVQ_AVX2 uint32_t topkContiguous(const void *x, kvq_dtype dtype, int64_t base,
                                 int64_t n, int64_t k, Mark &&mark) {
  if (k > n)
    k = n;
  if (k <= 0) {
    for (int64_t i = 0; i < n; ++i)
      mark(i, false);
    return 0;
  }
  int64_t ties;
  const uint32_t t = kthMagnitude(x, dtype, base, n, k, &ties);
  markRanked(
      [&](int64_t i) {
        return floatBits(loadElement(x, dtype, base + i)) & 0x7fffffffu;
      },
      [](int64_t) { return false; }, mark, n, t, ties);
  return t;
}

struct MaskWriter {
  uint8_t *mask;
  int64_t stride;
  int64_t taken = 0;
  void operator()(int64_t i, bool m) {
    mask[i * stride] = m ? 1 : 0;
    taken += m;
  }
};

struct IndexWriter {
  int64_t *indices;
  int64_t out = 0;
  void operator()(int64_t i, bool m) {
    if (m)
      indices[out++] = i;
  }
};

KVQ_AVX2 void outlierSplitAvx2(const OutlierSplitArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const float fraction = a.fraction;
  uint8_t *mask = a.mask;
  float *threshold = a.threshold;
  if (a.exclude || g.axis != KVQ_AXIS_PER_TOKEN)
    return outlierSplitRef(a);
  for (int64_t v = 0; v < g.vectors(); ++v) {
    const int64_t base = g.base(v);
    const int64_t k = outlierCount(fraction, g.group);
    uint32_t t =
        topkContiguous(x, dtype, base, g.group, k, MaskWriter{mask + base, 1});
    if (threshold)
      threshold[v] =
          k > 0 ? bitsToFloat(t) : std::numeric_limits<float>::infinity();
  }
}

KVQ_AVX2 void topkAbsAvx2(const TopkAbsArgs &a) {
  const float *x = a.x;
  const int64_t n = a.n, stride = a.stride;
  const uint8_t *exclude = a.exclude;
  const int64_t k = a.k;
  uint8_t *mask = a.mask;
  const int64_t maskStride = a.maskStride;
  float *threshold = a.threshold;
  if (stride != 1 || exclude)
    return topkAbsRef(a);
  MaskWriter w{mask, maskStride};
  uint32_t t = topkContiguous(x, KVQ_DTYPE_F32, 0, n, k, w);
  if (threshold)
    *threshold =
        w.taken ? bitsToFloat(t) : std::numeric_limits<float>::infinity();
}

KVQ_AVX2 void topkIndicesAvx2(const TopkIndicesArgs &a) {
  topkContiguous(a.values, KVQ_DTYPE_F32, 0, a.n, a.k, IndexWriter{a.indices});
}

KVQ_AVX2 void outlierScreenAvx2(const OutlierScreenArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const int64_t rows = a.rows, cols = a.cols;
  const float *threshold = a.threshold;
  uint8_t *mask = a.mask;
  if (cols % 8 != 0)
    return outlierScreenRef(a);
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i one = _mm256_set1_epi32(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 8) {
      __m256 mag = _mm256_and_ps(load8(x, dtype, r * cols + c), absMask);
      __m256 ge =
          _mm256_cmp_ps(mag, _mm256_loadu_ps(threshold + c), _CMP_GE_OQ);
      uint64_t b = narrow8(_mm256_and_si256(_mm256_castps_si256(ge), one));
      std::memcpy(mask + r * cols + c, &b, 8);
    }
}

KVQ_AVX2 inline __m128 load4(const void *x, kvq_dtype dtype, int64_t i) {
  if (dtype == KVQ_DTYPE_F16)
    return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(
        static_cast<const uint16_t *>(x) + i)));
  return _mm_loadu_ps(static_cast<const float *>(x) + i);
}

KVQ_AVX2 void keyNormAvx2(const KeyNormArgs &a) {
  const void *keys = a.keys;
  const kvq_dtype dtype = a.dtype;
  const int64_t tokens = a.tokens, headDim = a.headDim;
  const int heads = a.heads;
  float *norms = a.norms;
  if (headDim % 4 != 0)
    return keyNormRef(a);
  const int64_t C = heads * headDim;
  const int64_t t4 = tokens & ~int64_t{3};
  for (int64_t t = 0; t < t4; t += 4) {
    __m256d total = _mm256_setzero_pd();
    for (int h = 0; h < heads; ++h) {
      __m256d sq = _mm256_setzero_pd();
      const int64_t base = t * C + h * headDim;
      for (int64_t d = 0; d < headDim; d += 4) {
        __m128 r0 = load4(keys, dtype, base + d);
        __m128 r1 = load4(keys, dtype, base + C + d);
        __m128 r2 = load4(keys, dtype, base + 2 * C + d);
        __m128 r3 = load4(keys, dtype, base + 3 * C + d);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3); // r_j = element d + j of 4 tokens
        // Exact squares (24-bit mantissas) added in the reference's order.
        const __m128 column[4] = {r0, r1, r2, r3};
        for (int j = 0; j < 4; ++j) {
          __m256d v = _mm256_cvtps_pd(column[j]);
          sq = _mm256_add_pd(sq, _mm256_mul_pd(v, v));
        }
      }
      total = _mm256_add_pd(total, _mm256_sqrt_pd(sq));
    }
    __m256d mean = _mm256_div_pd(total, _mm256_set1_pd(heads));
    _mm_storeu_ps(norms + t, _mm256_cvtpd_ps(mean));
  }
  if (t4 < tokens) {
    const int64_t elem = dtypeBytes(dtype);
    KeyNormArgs rest = a; // the last tokens % 4 rows
    rest.keys = static_cast<const uint8_t *>(keys) + t4 * C * elem;
    rest.tokens = tokens - t4;
    rest.norms = norms + t4;
    keyNormRef(rest);
  }
}

} // namespace

void kvq::x86::fillOutliersAndSinksAvx2(KernelTable &t) {
  t.topkAbs = topkAbsAvx2;
  t.outlierSplit = outlierSplitAvx2;
  t.outlierScreen = outlierScreenAvx2;
  t.keyNorm = keyNormAvx2;
  t.topkIndices = topkIndicesAvx2;
}
