//===- kernel_api.cpp - C entry points of the stateless kernels -----------===//
//
// Argument checking for the kernels of runtime.h; the computation goes
// through the active kernel table (SIMD or reference). Nothing allocates,
// and everything is validated before the first output byte is written.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "status.h"

#include <cmath>

using namespace kvq;

namespace {

/// The stateless kernels validate here and compute through kernels(), so
/// the SIMD table of the CPU serves them (kernels_matrix.cpp has the
/// reference loops).
using Geometry = Grid;

kvq_status checkDtype(kvq_dtype dtype) {
  if (dtype != KVQ_DTYPE_F16 && dtype != KVQ_DTYPE_F32)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown dtype %d",
                static_cast<int>(dtype));
  return KVQ_OK;
}

kvq_status checkBits(int32_t bits) {
  if (!supportedBits(bits))
    return fail(KVQ_ERR_UNSUPPORTED_BITS,
                "bits = %d is not supported (use 2, 3, 4 or 8)", bits);
  return KVQ_OK;
}

kvq_status checkMatrix(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "negative shape [%lld, %lld]", static_cast<long long>(rows),
                static_cast<long long>(cols));
  if (rows == 0 || cols == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "empty input [%lld, %lld]",
                static_cast<long long>(rows), static_cast<long long>(cols));
  return KVQ_OK;
}

kvq_status makeGeometry(int64_t rows, int64_t cols, kvq_axis axis,
                        int32_t group, Geometry *g) {
  if (kvq_status s = checkMatrix(rows, cols))
    return s;
  if (axis != KVQ_AXIS_PER_TOKEN && axis != KVQ_AXIS_PER_CHANNEL)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown axis %d",
                static_cast<int>(axis));
  int64_t along = axis == KVQ_AXIS_PER_TOKEN ? cols : rows;
  if (group <= 0 || along % group != 0)
    return fail(KVQ_ERR_BAD_GROUP_SIZE,
                "group size %d does not divide the %s dimension %lld", group,
                axis == KVQ_AXIS_PER_TOKEN ? "column" : "row",
                static_cast<long long>(along));
  g->rows = rows;
  g->cols = cols;
  g->group = group;
  g->axis = axis;
  return KVQ_OK;
}

kvq_status checkLayout(kvq_code_layout layout) {
  if (layout != KVQ_CODES_UNPACKED && layout != KVQ_CODES_PACKED)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown code layout %d",
                static_cast<int>(layout));
  return KVQ_OK;
}

/// Every element must be finite and fit fp16 (the runtime stores fp16).
/// A branch-free pass first (it vectorizes: this check runs on every
/// quantize call and must not cost more than the SIMD kernel), then a scan
/// for the first offender only when there is one. An f32 value is finite in
/// fp16 exactly when |v| < 65520 (floatToHalf rounds 65520 up to infinity).
kvq_status checkFinite(const void *x, kvq_dtype dtype, int64_t n) {
  bool bad = false;
  if (dtype == KVQ_DTYPE_F16) {
    const uint16_t *h = static_cast<const uint16_t *>(x);
    unsigned any = 0;
    for (int64_t i = 0; i < n; ++i)
      any |= (h[i] & 0x7c00u) == 0x7c00u;
    bad = any != 0;
  } else {
    const float *f = static_cast<const float *>(x);
    unsigned any = 0;
    for (int64_t i = 0; i < n; ++i)
      any |= !(std::fabs(f[i]) < 65520.0f);
    bad = any != 0;
  }
  if (!bad)
    return KVQ_OK;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (dtype == KVQ_DTYPE_F16) {
      ok = halfIsFinite(static_cast<const uint16_t *>(x)[i]);
    } else {
      float v = static_cast<const float *>(x)[i];
      ok = std::isfinite(v) && halfIsFinite(floatToHalf(v));
    }
    if (!ok)
      return fail(KVQ_ERR_NON_FINITE,
                  "element %lld is NaN, infinite or outside the fp16 range",
                  static_cast<long long>(i));
  }
  return KVQ_OK;
}

kvq_status checkHalfTable(const uint16_t *t, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; ++i)
    if (!halfIsFinite(t[i]))
      return fail(KVQ_ERR_NON_FINITE, "%s entry %lld is not finite", what,
                  static_cast<long long>(i));
  return KVQ_OK;
}

} // namespace

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
                                         kvq_code_layout layout,
                                         uint8_t *codes, uint16_t *scale,
                                         uint16_t *zero) {
  if (!x || !codes || !scale || !zero)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_group_quant: x, codes, scale and zero must be non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (kvq_status s = checkLayout(layout))
    return s;
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
    return s;

  kernels().groupQuant(x, dtype, g, bits, exclude, layout, codes, scale,
                       zero);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_group_dequant(const uint8_t *codes,
                                           kvq_code_layout layout,
                                           const uint16_t *scale,
                                           const uint16_t *zero, int64_t rows,
                                           int64_t cols, kvq_axis axis,
                                           int32_t group, int32_t bits,
                                           void *out, kvq_dtype dtype) {
  if (!codes || !scale || !zero || !out)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_group_dequant: codes, scale, zero and out must be "
                "non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (kvq_status s = checkLayout(layout))
    return s;
  if (kvq_status s = checkHalfTable(scale, g.vectors(), "scale"))
    return s;
  if (kvq_status s = checkHalfTable(zero, g.vectors(), "zero"))
    return s;
  const int maxCode = (1 << bits) - 1;
  if (layout == KVQ_CODES_UNPACKED)
    for (int64_t i = 0; i < rows * cols; ++i)
      if (codes[i] > maxCode)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "code %d at element %lld exceeds 2^%d - 1", codes[i],
                    static_cast<long long>(i), bits);
  kernels().groupDequant(codes, layout, scale, zero, g, bits, out, dtype);
  return KVQ_OK;
}

KVQ_RT_EXPORT int64_t kvq_nuq_fit_scratch_size(int64_t len, int32_t bits) {
  (void)bits; // the level sums live on the stack (at most 256 levels)
  return len < 0 ? 0 : len;
}

KVQ_RT_EXPORT kvq_status kvq_nuq_fit(const void *x, kvq_dtype dtype,
                                     int64_t rows, int64_t cols, kvq_axis axis,
                                     int32_t group, int32_t bits,
                                     int32_t iters, const uint8_t *exclude,
                                     float *scratch, int64_t scratch_floats,
                                     uint16_t *levels) {
  if (!x || !scratch || !levels)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_nuq_fit: x, scratch and levels must be non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (iters < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "lloyd iterations %d < 0", iters);
  if (scratch_floats < kvq_nuq_fit_scratch_size(group, bits))
    return fail(KVQ_ERR_BUFFER_TOO_SMALL,
                "scratch holds %lld floats, kvq_nuq_fit needs %lld",
                static_cast<long long>(scratch_floats),
                static_cast<long long>(kvq_nuq_fit_scratch_size(group, bits)));
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
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
    kernels().lloydFitGathered(scratch, m, bits, iters, fitted, nullptr);
    for (int l = 0; l < count; ++l)
      levels[v * count + l] = floatToHalf(fitted[l]);
  }
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_nuq_quant(const void *x, kvq_dtype dtype,
                                       int64_t rows, int64_t cols,
                                       kvq_axis axis, int32_t group,
                                       int32_t bits, const uint16_t *levels,
                                       kvq_code_layout layout, uint8_t *codes) {
  if (!x || !levels || !codes)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_nuq_quant: x, levels and codes must be non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (kvq_status s = checkLayout(layout))
    return s;
  const int count = 1 << bits;
  if (kvq_status s = checkHalfTable(levels, g.vectors() * count, "level"))
    return s;
  for (int64_t v = 0; v < g.vectors(); ++v)
    for (int l = 1; l < count; ++l)
      if (halfToFloat(levels[v * count + l]) <
          halfToFloat(levels[v * count + l - 1]))
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "levels of vector %lld are not ascending",
                    static_cast<long long>(v));
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
    return s;
  kernels().nuqQuant(x, dtype, g, bits, levels, layout, codes);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_nuq_dequant(const uint8_t *codes,
                                         kvq_code_layout layout,
                                         const uint16_t *levels, int64_t rows,
                                         int64_t cols, kvq_axis axis,
                                         int32_t group, int32_t bits,
                                         void *out, kvq_dtype dtype) {
  if (!codes || !levels || !out)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_nuq_dequant: codes, levels and out must be non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (kvq_status s = checkLayout(layout))
    return s;
  const int count = 1 << bits;
  if (kvq_status s = checkHalfTable(levels, g.vectors() * count, "level"))
    return s;
  if (layout == KVQ_CODES_UNPACKED)
    for (int64_t i = 0; i < rows * cols; ++i)
      if (codes[i] >= count)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "code %d at element %lld exceeds 2^%d - 1", codes[i],
                    static_cast<long long>(i), bits);
  kernels().nuqDequant(codes, layout, levels, g, bits, out, dtype);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_outlier_split(const void *x, kvq_dtype dtype,
                                           int64_t rows, int64_t cols,
                                           kvq_axis axis, int32_t group,
                                           float fraction,
                                           const uint8_t *exclude,
                                           uint8_t *outlier_mask,
                                           float *threshold) {
  if (!x || !outlier_mask)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_outlier_split: x and outlier_mask must be non-null");
  Geometry g;
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, &g))
    return s;
  if (!(fraction >= 0.0f && fraction < 1.0f))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "outlier fraction %g is not in [0, 1)",
                static_cast<double>(fraction));
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
    return s;
  kernels().outlierSplit(x, dtype, g, fraction, exclude, outlier_mask,
                         threshold);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_outlier_screen(const void *x, kvq_dtype dtype,
                                            int64_t rows, int64_t cols,
                                            const float *threshold,
                                            uint8_t *outlier_mask) {
  if (!x || !threshold || !outlier_mask)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_outlier_screen: x, threshold and outlier_mask must be "
                "non-null");
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkMatrix(rows, cols))
    return s;
  for (int64_t c = 0; c < cols; ++c)
    if (std::isnan(threshold[c]))
      return fail(KVQ_ERR_NON_FINITE, "threshold %lld is NaN",
                  static_cast<long long>(c));
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
    return s;
  kernels().outlierScreen(x, dtype, rows, cols, threshold, outlier_mask);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_key_norm(const void *keys, kvq_dtype dtype,
                                      int64_t tokens, int32_t kv_heads,
                                      int32_t head_dim, float *norms) {
  if (!keys || !norms)
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_key_norm: keys and norms must be non-null");
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kv_heads < 0 || head_dim < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative kv_heads or head_dim");
  if (kvq_status s = checkMatrix(tokens, int64_t{kv_heads} * head_dim))
    return s;
  const int64_t channels = int64_t{kv_heads} * head_dim;
  if (kvq_status s = checkFinite(keys, dtype, tokens * channels))
    return s;
  kernels().keyNorm(keys, dtype, tokens, kv_heads, head_dim, norms);
  return KVQ_OK;
}

KVQ_RT_EXPORT kvq_status kvq_sink_select(const float *norms, int64_t tokens,
                                         int32_t k, int64_t *positions) {
  if (!norms || (!positions && k > 0))
    return fail(KVQ_ERR_NULL_POINTER,
                "kvq_sink_select: norms and positions must be non-null");
  if (tokens < 0 || k < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative tokens or k");
  if (tokens == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "kvq_sink_select: zero tokens");
  if (k > tokens)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "k = %d exceeds tokens = %lld", k,
                static_cast<long long>(tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    if (!std::isfinite(norms[t]))
      return fail(KVQ_ERR_NON_FINITE, "norm %lld is not finite",
                  static_cast<long long>(t));
    if (norms[t] < 0.0f)
      return fail(KVQ_ERR_INVALID_ARGUMENT, "norm %lld is negative",
                  static_cast<long long>(t));
  }
  kernels().topkIndices(norms, tokens, k, positions);
  return KVQ_OK;
}

} // extern "C"
