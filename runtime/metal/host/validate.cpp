//===- validate.cpp - Argument checks of the Metal entry points -----------===//
//
// Mirrors the checks of the CPU kernels (messages and statuses).
//
//===----------------------------------------------------------------------===//
#include "validate.h"

#include "fp16.h"
#include "kernels.h"
#include "status.h"

#include <cmath>

using namespace kvq;
using namespace kvq::metal;

kvq_status kvq::metal::deviceOf(void *ctx, const char *fn, Device **out) {
  if (!ctx)
    return fail(KVQ_ERR_NULL_POINTER,
                "%s: the Metal context is null (no Metal device?)", fn);
  *out = static_cast<Device *>(ctx);
  return KVQ_OK;
}

kvq_status kvq::metal::checkDtype(kvq_dtype dtype) {
  if (dtype != KVQ_DTYPE_F16 && dtype != KVQ_DTYPE_F32)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown dtype %d",
                static_cast<int>(dtype));
  return KVQ_OK;
}

kvq_status kvq::metal::checkBits(int32_t bits) {
  if (!supportedBits(bits))
    return fail(KVQ_ERR_UNSUPPORTED_BITS,
                "bits = %d is not supported (use 2, 3, 4 or 8)", bits);
  return KVQ_OK;
}

kvq_status kvq::metal::checkMatrix(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative shape [%lld, %lld]",
                static_cast<long long>(rows), static_cast<long long>(cols));
  if (rows == 0 || cols == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "empty input [%lld, %lld]",
                static_cast<long long>(rows), static_cast<long long>(cols));
  return KVQ_OK;
}

kvq_status kvq::metal::makeGeometry(int64_t rows, int64_t cols, kvq_axis axis,
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
  return KVQ_OK;
}

kvq_status kvq::metal::checkLayout(kvq_code_layout layout) {
  if (layout != KVQ_CODES_UNPACKED && layout != KVQ_CODES_PACKED)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown code layout %d",
                static_cast<int>(layout));
  return KVQ_OK;
}

kvq_status kvq::metal::checkFinite(const void *x, kvq_dtype dtype,
                                   int64_t n) {
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

kvq_status kvq::metal::checkHalfTable(const uint16_t *t, int64_t n,
                                      const char *what) {
  for (int64_t i = 0; i < n; ++i)
    if (!halfIsFinite(t[i]))
      return fail(KVQ_ERR_NON_FINITE, "%s entry %lld is not finite", what,
                  static_cast<long long>(i));
  return KVQ_OK;
}

kvq_status kvq::metal::checkCodes(const uint8_t *codes,
                                  kvq_code_layout layout, int64_t n,
                                  int32_t bits) {
  if (layout != KVQ_CODES_UNPACKED)
    return KVQ_OK;
  const int maxCode = (1 << bits) - 1;
  for (int64_t i = 0; i < n; ++i)
    if (codes[i] > maxCode)
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "code %d at element %lld exceeds 2^%d - 1", codes[i],
                  static_cast<long long>(i), bits);
  return KVQ_OK;
}

kvq_status kvq::metal::checkGrid(int64_t threads, const char *fn) {
  if (threads > static_cast<int64_t>(UINT32_MAX))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: %lld elements exceed one Metal dispatch (2^32 - 1 "
                "threads); split the call",
                fn, static_cast<long long>(threads));
  return KVQ_OK;
}
