//===- kernel_api.cpp - C entry points of the stateless kernels -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The kernels of runtime.h: arguments are checked by kernel_args.h (shared
// with the Metal backend), the computation goes through the active kernel
// table (SIMD or reference). Nothing allocates, and everything is validated
// before the first output byte is written.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "guard.h"
#include "kernel_args.h"
#include "kernels.h"

using namespace kvq;

extern "C" {

KVQ_RT_EXPORT int64_t kvq_packed_size(int64_t n, int32_t bits) {
  if (n < 0 || bits <= 0 || bits > 8)
    return 0;
  return packedBytes(n, bits);
}

KVQ_RT_EXPORT kvq_status kvq_group_quant(const void *x, kvq_dtype dtype,
                                         int64_t rows, int64_t cols,
                                         kvq_axis axis, int32_t group,
                                         int32_t bits, const uint8_t *exclude,
                                         kvq_code_layout layout, uint8_t *codes,
                                         uint16_t *scale, uint16_t *zero) {
  return kvq::guarded("kvq_group_quant", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s = validateGroupQuantArgs("kvq_group_quant", x, dtype, rows,
                                              cols, axis, group, bits, layout,
                                              codes, scale, zero, &g))
      return s;
    GroupQuantArgs a;
    a.x = x;
    a.dtype = dtype;
    a.grid = g;
    a.bits = bits;
    a.exclude = exclude;
    a.layout = layout;
    a.codes = codes;
    a.scale = scale;
    a.zero = zero;
    kernels().groupQuant(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_group_dequant(
    const uint8_t *codes, kvq_code_layout layout, const uint16_t *scale,
    const uint16_t *zero, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, int32_t bits, void *out, kvq_dtype dtype) {
  return kvq::guarded("kvq_group_dequant", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s = validateGroupDequantArgs(
            "kvq_group_dequant", codes, layout, scale, zero, rows, cols, axis,
            group, bits, out, dtype, &g))
      return s;
    GroupDequantArgs a;
    a.codes = codes;
    a.layout = layout;
    a.scale = scale;
    a.zero = zero;
    a.grid = g;
    a.bits = bits;
    a.out = out;
    a.dtype = dtype;
    kernels().groupDequant(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT int64_t kvq_nuq_fit_scratch_size(int64_t len, int32_t bits) {
  (void)bits; // the level sums live on the stack (at most 256 levels)
  return lloydScratchFloats(len);
}

KVQ_RT_EXPORT kvq_status kvq_nuq_fit(const void *x, kvq_dtype dtype,
                                     int64_t rows, int64_t cols, kvq_axis axis,
                                     int32_t group, int32_t bits, int32_t iters,
                                     const uint8_t *exclude, float *scratch,
                                     int64_t scratch_floats, uint16_t *levels) {
  return kvq::guarded("kvq_nuq_fit", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s = validateNuqFitArgs("kvq_nuq_fit", x, dtype, rows, cols,
                                          axis, group, bits, iters, scratch,
                                          scratch_floats, levels, &g))
      return s;
    const int count = 1 << bits;
    float fitted[kMaxLevels];
    for (int64_t v = 0; v < g.vectors(); ++v) {
      int64_t base = g.base(v), m = 0;
      for (int64_t i = 0; i < g.group; ++i) {
        int64_t e = base + i * g.stride();
        if (!exclude || !exclude[e])
          scratch[m++] = loadElement(x, dtype, e);
      }
      LloydFitGatheredArgs fit;
      fit.data = scratch;
      fit.m = m;
      fit.work = scratch + m;
      fit.bits = bits;
      fit.iters = iters;
      fit.levels = fitted;
      kernels().lloydFitGathered(fit);
      for (int l = 0; l < count; ++l)
        levels[v * count + l] = floatToHalf(fitted[l]);
    }
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_nuq_quant(const void *x, kvq_dtype dtype,
                                       int64_t rows, int64_t cols,
                                       kvq_axis axis, int32_t group,
                                       int32_t bits, const uint16_t *levels,
                                       kvq_code_layout layout, uint8_t *codes) {
  return kvq::guarded("kvq_nuq_quant", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s =
            validateNuqQuantArgs("kvq_nuq_quant", x, dtype, rows, cols, axis,
                                 group, bits, levels, layout, codes, &g))
      return s;
    NuqQuantArgs a;
    a.x = x;
    a.dtype = dtype;
    a.grid = g;
    a.bits = bits;
    a.levels = levels;
    a.layout = layout;
    a.codes = codes;
    kernels().nuqQuant(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_nuq_dequant(const uint8_t *codes,
                                         kvq_code_layout layout,
                                         const uint16_t *levels, int64_t rows,
                                         int64_t cols, kvq_axis axis,
                                         int32_t group, int32_t bits, void *out,
                                         kvq_dtype dtype) {
  return kvq::guarded("kvq_nuq_dequant", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s = validateNuqDequantArgs("kvq_nuq_dequant", codes, layout,
                                              levels, rows, cols, axis, group,
                                              bits, out, dtype, &g))
      return s;
    NuqDequantArgs a;
    a.codes = codes;
    a.layout = layout;
    a.levels = levels;
    a.grid = g;
    a.bits = bits;
    a.out = out;
    a.dtype = dtype;
    kernels().nuqDequant(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_outlier_split(
    const void *x, kvq_dtype dtype, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, float fraction, const uint8_t *exclude,
    uint8_t *outlier_mask, float *threshold) {
  return kvq::guarded("kvq_outlier_split", [&]() -> kvq_status {
    Grid g;
    if (kvq_status s =
            validateOutlierSplitArgs("kvq_outlier_split", x, dtype, rows, cols,
                                     axis, group, fraction, outlier_mask, &g))
      return s;
    OutlierSplitArgs a;
    a.x = x;
    a.dtype = dtype;
    a.grid = g;
    a.fraction = fraction;
    a.exclude = exclude;
    a.mask = outlier_mask;
    a.threshold = threshold;
    kernels().outlierSplit(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_outlier_screen(const void *x, kvq_dtype dtype,
                                            int64_t rows, int64_t cols,
                                            const float *threshold,
                                            uint8_t *outlier_mask) {
  return kvq::guarded("kvq_outlier_screen", [&]() -> kvq_status {
    if (kvq_status s =
            validateOutlierScreenArgs("kvq_outlier_screen", x, dtype, rows,
                                      cols, threshold, outlier_mask))
      return s;
    OutlierScreenArgs a;
    a.x = x;
    a.dtype = dtype;
    a.rows = rows;
    a.cols = cols;
    a.threshold = threshold;
    a.mask = outlier_mask;
    kernels().outlierScreen(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_key_norm(const void *keys, kvq_dtype dtype,
                                      int64_t tokens, int32_t kv_heads,
                                      int32_t head_dim, float *norms) {
  return kvq::guarded("kvq_key_norm", [&]() -> kvq_status {
    if (kvq_status s = validateKeyNormArgs("kvq_key_norm", keys, dtype, tokens,
                                           kv_heads, head_dim, norms))
      return s;
    KeyNormArgs a;
    a.keys = keys;
    a.dtype = dtype;
    a.tokens = tokens;
    a.heads = kv_heads;
    a.headDim = head_dim;
    a.norms = norms;
    kernels().keyNorm(a);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_sink_select(const float *norms, int64_t tokens,
                                         int32_t k, int64_t *positions) {
  return kvq::guarded("kvq_sink_select", [&]() -> kvq_status {
    if (kvq_status s = validateSinkSelectArgs("kvq_sink_select", norms, tokens,
                                              k, positions))
      return s;
    TopkIndicesArgs a;
    a.values = norms;
    a.n = tokens;
    a.k = k;
    a.indices = positions;
    kernels().topkIndices(a);
    return KVQ_OK;
  });
}

} // extern "C"
