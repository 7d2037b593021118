//===- kernel_api.cpp - C entry points of the stateless kernels -----------===//
//
// Argument checking and the loops over vectors for the kernels of runtime.h.
// They read fp16/f32 buffers in place and never allocate; everything is
// validated before the first output byte is written.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "status.h"
#include "topk_impl.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kvq;

namespace {

/// The vectors a (rows, cols, axis, group) description splits a matrix into.
struct Geometry {
  int64_t rows = 0, cols = 0, group = 0;
  int axis = 0;
  int64_t vectors = 0;
  int64_t stride = 1; ///< element stride inside a vector
  /// Flat index of element 0 of vector v (vectors in row-major order over
  /// the scale shape).
  int64_t base(int64_t v) const {
    if (axis == KVQ_AXIS_PER_TOKEN) {
      int64_t perRow = cols / group;
      return (v / perRow) * cols + (v % perRow) * group;
    }
    return (v / cols) * group * cols + v % cols;
  }
};

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
  g->vectors = rows * cols / group;
  g->stride = axis == KVQ_AXIS_PER_TOKEN ? 1 : cols;
  return KVQ_OK;
}

kvq_status checkLayout(kvq_code_layout layout) {
  if (layout != KVQ_CODES_UNPACKED && layout != KVQ_CODES_PACKED)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown code layout %d",
                static_cast<int>(layout));
  return KVQ_OK;
}

/// Every element must be finite and fit fp16 (the runtime stores fp16).
kvq_status checkFinite(const void *x, kvq_dtype dtype, int64_t n) {
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

uint8_t codeAt(const uint8_t *codes, kvq_code_layout layout, int64_t i,
               int bits) {
  return layout == KVQ_CODES_PACKED ? packedCodeAt(codes, i, bits) : codes[i];
}

void setCode(uint8_t *codes, kvq_code_layout layout, int64_t i, int bits,
             uint8_t code) {
  if (layout == KVQ_CODES_UNPACKED) {
    codes[i] = code;
    return;
  }
  // The packed buffer was zeroed first, so OR-ing the bits in is enough.
  int64_t bit = i * bits;
  uint32_t shifted = static_cast<uint32_t>(code) << (bit & 7);
  codes[bit >> 3] |= static_cast<uint8_t>(shifted & 0xffu);
  if ((bit & 7) + bits > 8)
    codes[(bit >> 3) + 1] |= static_cast<uint8_t>(shifted >> 8);
}

void clearCodes(uint8_t *codes, kvq_code_layout layout, int64_t n, int bits) {
  if (layout == KVQ_CODES_PACKED)
    std::memset(codes, 0, static_cast<size_t>(packedBytes(n, bits)));
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

  const float maxCode = static_cast<float>((1 << bits) - 1);
  clearCodes(codes, layout, rows * cols, bits);
  for (int64_t v = 0; v < g.vectors; ++v) {
    int64_t base = g.base(v);
    bool any = false;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      if (exclude && exclude[e])
        continue;
      float val = loadElement(x, dtype, e);
      lo = any ? (val < lo ? val : lo) : val;
      hi = any ? (val > hi ? val : hi) : val;
      any = true;
    }
    uniformParams(lo, hi, any, bits, &scale[v], &zero[v]);
    float s = halfToFloat(scale[v]), z = halfToFloat(zero[v]);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      setCode(codes, layout, e, bits,
              uniformCode(loadElement(x, dtype, e), s, z, maxCode));
    }
  }
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
  if (kvq_status s = checkHalfTable(scale, g.vectors, "scale"))
    return s;
  if (kvq_status s = checkHalfTable(zero, g.vectors, "zero"))
    return s;
  const int maxCode = (1 << bits) - 1;
  if (layout == KVQ_CODES_UNPACKED)
    for (int64_t i = 0; i < rows * cols; ++i)
      if (codes[i] > maxCode)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "code %d at element %lld exceeds 2^%d - 1", codes[i],
                    static_cast<long long>(i), bits);
  for (int64_t v = 0; v < g.vectors; ++v) {
    float s = halfToFloat(scale[v]), z = halfToFloat(zero[v]);
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      storeElement(out, dtype, e,
                   uniformDequant(codeAt(codes, layout, e, bits), s, z));
    }
  }
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
  for (int64_t v = 0; v < g.vectors; ++v) {
    int64_t base = g.base(v), m = 0;
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      if (!exclude || !exclude[e])
        scratch[m++] = loadElement(x, dtype, e);
    }
    lloydFitGathered(scratch, m, bits, iters, fitted, nullptr);
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
  if (kvq_status s = checkHalfTable(levels, g.vectors * count, "level"))
    return s;
  for (int64_t v = 0; v < g.vectors; ++v)
    for (int l = 1; l < count; ++l)
      if (halfToFloat(levels[v * count + l]) <
          halfToFloat(levels[v * count + l - 1]))
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "levels of vector %lld are not ascending",
                    static_cast<long long>(v));
  if (kvq_status s = checkFinite(x, dtype, rows * cols))
    return s;
  clearCodes(codes, layout, rows * cols, bits);
  float table[kMaxLevels];
  for (int64_t v = 0; v < g.vectors; ++v) {
    for (int l = 0; l < count; ++l)
      table[l] = halfToFloat(levels[v * count + l]);
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      setCode(codes, layout, e, bits,
              static_cast<uint8_t>(
                  nearestLevel(table, count, loadElement(x, dtype, e))));
    }
  }
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
  if (kvq_status s = checkHalfTable(levels, g.vectors * count, "level"))
    return s;
  if (layout == KVQ_CODES_UNPACKED)
    for (int64_t i = 0; i < rows * cols; ++i)
      if (codes[i] >= count)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "code %d at element %lld exceeds 2^%d - 1", codes[i],
                    static_cast<long long>(i), bits);
  for (int64_t v = 0; v < g.vectors; ++v) {
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * g.stride;
      storeElement(out, dtype, e,
                   halfToFloat(levels[v * count +
                                      codeAt(codes, layout, e, bits)]));
    }
  }
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
  for (int64_t v = 0; v < g.vectors; ++v) {
    int64_t base = g.base(v);
    auto at = [&](int64_t i) { return base + i * g.stride; };
    int64_t eligible = 0;
    for (int64_t i = 0; i < g.group; ++i)
      eligible += !(exclude && exclude[at(i)]);
    int64_t k = outlierCount(fraction, eligible);
    uint32_t t = topkAbsGeneric(
        [&](int64_t i) { return loadElement(x, dtype, at(i)); },
        [&](int64_t i) { return exclude && exclude[at(i)]; },
        [&](int64_t i, bool m) { outlier_mask[at(i)] = m ? 1 : 0; }, g.group,
        k);
    if (threshold)
      threshold[v] =
          k > 0 ? bitsToFloat(t) : std::numeric_limits<float>::infinity();
  }
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
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = std::fabs(loadElement(x, dtype, r * cols + c));
      outlier_mask[r * cols + c] = v >= threshold[c] ? 1 : 0;
    }
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
  // One row at a time through a small stack buffer keeps the kernel
  // allocation-free for any head count.
  constexpr int64_t kChunk = 1024;
  float row[kChunk];
  for (int64_t t = 0; t < tokens; ++t) {
    double total = 0.0;
    for (int32_t h = 0; h < kv_heads; ++h) {
      double sq = 0.0;
      for (int64_t d0 = 0; d0 < head_dim; d0 += kChunk) {
        int64_t len = head_dim - d0 < kChunk ? head_dim - d0 : kChunk;
        for (int64_t d = 0; d < len; ++d)
          row[d] = loadElement(keys, dtype,
                               t * channels + int64_t{h} * head_dim + d0 + d);
        for (int64_t d = 0; d < len; ++d)
          sq += static_cast<double>(row[d]) * row[d];
      }
      total += std::sqrt(sq);
    }
    norms[t] = static_cast<float>(total / kv_heads);
  }
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
  topkIndicesRef(norms, tokens, k, positions);
  return KVQ_OK;
}

} // extern "C"
