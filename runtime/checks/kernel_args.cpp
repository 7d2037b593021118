//===- kernel_args.cpp - Argument checks of the stateless kernels ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The checks behind kernel_args.h. Both backends validate through these, so
// statuses and messages cannot drift apart between kvq_* and kvq_metal_*;
// the order of the checks inside each function is part of the contract
// (the first failing check decides the status).
//
//===----------------------------------------------------------------------===//
#include "kernel_args.h"

#include "bitpack.h"
#include "checked.h"
#include "config.h"
#include "fp16.h"
#include "status.h"

#include <cmath>

using namespace kvq;

namespace {

/// The one-pass checks run on every quantize call over the whole input, so
/// x86_64 gets clones for AVX-512 and AVX2 lanes (chosen at load time; the
/// checks are integer and comparison operations, the same answer in each).
#if defined(__x86_64__) && defined(__ELF__)
#define KVQ_VALIDATION_CLONES                                                  \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVQ_VALIDATION_CLONES
#endif

/// The status of a null required pointer; `names` lists the pointers the
/// entry point requires, as the message of each entry point spells them.
kvq_status nullArgs(const char *entry, const char *names) {
  return fail(KVQ_ERR_NULL_POINTER, "%s: %s must be non-null", entry, names);
}

/// The prologue of every kernel with a code width: element type, code
/// width, grouping.
kvq_status checkCodedGrid(kvq_dtype dtype, int32_t bits, int64_t rows,
                          int64_t cols, kvq_axis axis, int32_t group, Grid *g) {
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkBits(bits))
    return s;
  return makeGeometry(rows, cols, axis, group, g);
}

/// The prologue of the four quantize/dequantize kernels: checkCodedGrid,
/// then the code layout.
kvq_status checkQuantGrid(kvq_dtype dtype, int32_t bits, int64_t rows,
                          int64_t cols, kvq_axis axis, int32_t group,
                          kvq_code_layout layout, Grid *g) {
  if (kvq_status s = checkCodedGrid(dtype, bits, rows, cols, axis, group, g))
    return s;
  return checkLayout(layout);
}

/// The prologue of the NUQ quantize/dequantize kernels: checkQuantGrid,
/// then 2^bits fp16 levels per vector, all finite.
kvq_status checkNuqGrid(kvq_dtype dtype, int32_t bits, int64_t rows,
                        int64_t cols, kvq_axis axis, int32_t group,
                        kvq_code_layout layout, const uint16_t *levels,
                        Grid *g) {
  if (kvq_status s =
          checkQuantGrid(dtype, bits, rows, cols, axis, group, layout, g))
    return s;
  return checkHalfTable(levels, g->vectors() * (int64_t{1} << bits), "level");
}

/// One branch-free pass over `n` levels in tables of `count` (it
/// vectorizes in 16-bit lanes: it runs on every kvq_nuq_quant call, and the
/// scalar checks cost as much as the kernel): all finite, each table
/// ascending. Finite fp16 values order as the integers sign ? -magnitude :
/// magnitude, which makes -0 and +0 equal as float comparison does. The
/// first level of a table is not compared with the one before it: a 16-bit
/// position, masked by count - 1 (a power of two <= 16 here), skips it.
KVQ_VALIDATION_CLONES
bool levelsFiniteAndAscending(const uint16_t *levels, int64_t n,
                              int64_t count) {
  auto key = [](uint16_t h) {
    const int16_t mag = static_cast<int16_t>(h & 0x7fff);
    return static_cast<int16_t>((h & 0x8000) ? -mag : mag);
  };
  uint16_t bad = 0;
  for (int64_t i = 0; i < n; ++i) // exponent 0x1f carries into bit 15
    bad |= static_cast<uint16_t>((levels[i] & 0x7c00u) + 0x0400u);
  if (count > 16) {
    for (int64_t i = 1; i < n; ++i)
      if (i % count != 0 && key(levels[i]) < key(levels[i - 1]))
        return false;
    return (bad & 0x8000u) == 0;
  }
  // The position in the table counts in 16 bits, like the lanes (count
  // divides 2^16, so it wraps in step).
  const uint16_t last = static_cast<uint16_t>(count - 1);
  uint16_t at = 1;
  for (int64_t i = 1; i < n; ++i, ++at)
    bad |= static_cast<uint16_t>(
        ((at & last) != 0 && key(levels[i]) < key(levels[i - 1])) ? 0x8000u
                                                                  : 0u);
  return (bad & 0x8000u) == 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Single checks
//===----------------------------------------------------------------------===//

kvq_status kvq::checkDtype(kvq_dtype dtype) {
  if (dtype != KVQ_DTYPE_F16 && dtype != KVQ_DTYPE_F32)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown dtype %d",
                static_cast<int>(dtype));
  return KVQ_OK;
}

kvq_status kvq::checkAligned(const char *entry, const void *p, kvq_dtype dtype,
                             const char *name) {
  const auto size = static_cast<uintptr_t>(dtypeBytes(dtype));
  if (reinterpret_cast<uintptr_t>(p) % size != 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: %s is not aligned to its %d-byte %s elements", entry, name,
                static_cast<int>(size),
                dtype == KVQ_DTYPE_F16 ? "fp16" : "f32");
  return KVQ_OK;
}

kvq_status kvq::checkBits(int32_t bits) {
  if (!supportedBits(bits))
    return fail(KVQ_ERR_UNSUPPORTED_BITS,
                "bits = %d is not supported (use 2, 3, 4 or 8)", bits);
  return KVQ_OK;
}

kvq_status kvq::checkMatrix(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative shape [%lld, %lld]",
                static_cast<long long>(rows), static_cast<long long>(cols));
  if (rows == 0 || cols == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "empty input [%lld, %lld]",
                static_cast<long long>(rows), static_cast<long long>(cols));
  // Every kernel forms rows * cols and sizes derived from it (elements x
  // 4 bytes, vectors x 2^bits levels): bounded here, before any of them.
  int64_t elements;
  if (!checkedProduct({rows, cols}, limits::kKernelElements, &elements))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "shape [%lld, %lld] has more than 2^48 elements",
                static_cast<long long>(rows), static_cast<long long>(cols));
  return KVQ_OK;
}

kvq_status kvq::makeGeometry(int64_t rows, int64_t cols, kvq_axis axis,
                             int32_t group, Grid *g) {
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

kvq_status kvq::checkLayout(kvq_code_layout layout) {
  if (layout != KVQ_CODES_UNPACKED && layout != KVQ_CODES_PACKED)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "unknown code layout %d",
                static_cast<int>(layout));
  return KVQ_OK;
}

/// Branch-free, so that it vectorizes (every quantize call and cache
/// update runs it over its whole input).
KVQ_VALIDATION_CLONES
bool kvq::allFiniteInHalf(const void *x, kvq_dtype dtype, int64_t n) {
  if (dtype == KVQ_DTYPE_F16) {
    // Exponent 0x1f carries into bit 15; 16-bit lanes, full vectors.
    const uint16_t *h = static_cast<const uint16_t *>(x);
    uint16_t any = 0;
    for (int64_t i = 0; i < n; ++i)
      any |= static_cast<uint16_t>((h[i] & 0x7c00u) + 0x0400u);
    return (any & 0x8000u) == 0;
  }
  const float *f = static_cast<const float *>(x);
  unsigned any = 0;
  for (int64_t i = 0; i < n; ++i)
    any |= !(std::fabs(f[i]) < 65520.0f);
  return any == 0;
}

/// A branch-free pass first (it vectorizes: this check runs on every
/// quantize call and must not cost more than the SIMD kernel), then a scan
/// for the first offender only when there is one. An f32 value is finite in
/// fp16 exactly when |v| < 65520 (floatToHalf rounds 65520 up to infinity).
kvq_status kvq::checkFinite(const void *x, kvq_dtype dtype, int64_t n) {
  if (allFiniteInHalf(x, dtype, n))
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

kvq_status kvq::checkHalfTable(const uint16_t *t, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; ++i)
    if (!halfIsFinite(t[i]))
      return fail(KVQ_ERR_NON_FINITE, "%s entry %lld is not finite", what,
                  static_cast<long long>(i));
  return KVQ_OK;
}

kvq_status kvq::checkCodes(const uint8_t *codes, kvq_code_layout layout,
                           int64_t n, int32_t bits) {
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

//===----------------------------------------------------------------------===//
// Whole argument lists
//===----------------------------------------------------------------------===//

kvq_status
kvq::validateGroupQuantArgs(const char *entry, const void *x, kvq_dtype dtype,
                            int64_t rows, int64_t cols, kvq_axis axis,
                            int32_t group, int32_t bits, kvq_code_layout layout,
                            const uint8_t *codes, const uint16_t *scale,
                            const uint16_t *zero, Grid *g) {
  if (!x || !codes || !scale || !zero)
    return nullArgs(entry, "x, codes, scale and zero");
  if (kvq_status s =
          checkQuantGrid(dtype, bits, rows, cols, axis, group, layout, g))
    return s;
  if (kvq_status s = checkAligned(entry, x, dtype, "x"))
    return s;
  return checkFinite(x, dtype, rows * cols);
}

kvq_status
kvq::validateGroupDequantArgs(const char *entry, const uint8_t *codes,
                              kvq_code_layout layout, const uint16_t *scale,
                              const uint16_t *zero, int64_t rows, int64_t cols,
                              kvq_axis axis, int32_t group, int32_t bits,
                              const void *out, kvq_dtype dtype, Grid *g) {
  if (!codes || !scale || !zero || !out)
    return nullArgs(entry, "codes, scale, zero and out");
  if (kvq_status s =
          checkQuantGrid(dtype, bits, rows, cols, axis, group, layout, g))
    return s;
  if (kvq_status s = checkAligned(entry, out, dtype, "out"))
    return s;
  if (kvq_status s = checkHalfTable(scale, g->vectors(), "scale"))
    return s;
  if (kvq_status s = checkHalfTable(zero, g->vectors(), "zero"))
    return s;
  if (kvq_status s = checkCodes(codes, layout, rows * cols, bits))
    return s;
  if (dtype != KVQ_DTYPE_F16)
    return KVQ_OK; // code * scale + zero of finite fp16 values is finite
  // fp16 output: code * scale + zero can round past 65504 to Inf (e.g. the
  // quantization of a group spanning [-65504, 65504]). Per vector the value
  // is monotone in the code, so the two extreme codes decide; only a
  // vector whose extreme overflows has its actual codes scanned.
  const int maxCode = (1 << bits) - 1;
  auto value = [&](int64_t v, int code) {
    return static_cast<float>(code) * halfToFloat(scale[v]) +
           halfToFloat(zero[v]);
  };
  auto overflows = [](float x) { return !(std::fabs(x) < 65520.0f); };
  for (int64_t v = 0; v < g->vectors(); ++v) {
    if (!overflows(value(v, 0)) && !overflows(value(v, maxCode)))
      continue;
    for (int64_t i = 0; i < g->group; ++i) {
      const int64_t e = g->base(v) + i * g->stride();
      const int code =
          layout == KVQ_CODES_PACKED ? packedCodeAt(codes, e, bits) : codes[e];
      if (overflows(value(v, code)))
        return fail(KVQ_ERR_NON_FINITE,
                    "dequantized element %lld = %g is outside the fp16 range "
                    "(use f32 output)",
                    static_cast<long long>(e),
                    static_cast<double>(value(v, code)));
    }
  }
  return KVQ_OK;
}

kvq_status kvq::validateNuqFitArgs(const char *entry, const void *x,
                                   kvq_dtype dtype, int64_t rows, int64_t cols,
                                   kvq_axis axis, int32_t group, int32_t bits,
                                   int32_t iters, const float *scratch,
                                   int64_t scratchFloats,
                                   const uint16_t *levels, Grid *g) {
  if (!x || !scratch || !levels)
    return nullArgs(entry, "x, scratch and levels");
  if (kvq_status s = checkCodedGrid(dtype, bits, rows, cols, axis, group, g))
    return s;
  if (kvq_status s = checkAligned(entry, x, dtype, "x"))
    return s;
  if (iters < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "lloyd iterations %d < 0", iters);
  if (iters > limits::kLloydIters)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "lloyd iterations %d exceed %d",
                iters, limits::kLloydIters);
  // The size rule is the CPU's (kvq_nuq_fit_scratch_size), named as such in
  // the message on both backends: Metal only checks it for ABI parity.
  const int64_t needed = kvq_nuq_fit_scratch_size(group, bits);
  if (scratchFloats < needed)
    return fail(KVQ_ERR_BUFFER_TOO_SMALL,
                "scratch holds %lld floats, kvq_nuq_fit needs %lld",
                static_cast<long long>(scratchFloats),
                static_cast<long long>(needed));
  return checkFinite(x, dtype, rows * cols);
}

kvq_status kvq::validateNuqQuantArgs(const char *entry, const void *x,
                                     kvq_dtype dtype, int64_t rows,
                                     int64_t cols, kvq_axis axis, int32_t group,
                                     int32_t bits, const uint16_t *levels,
                                     kvq_code_layout layout,
                                     const uint8_t *codes, Grid *g) {
  if (!x || !levels || !codes)
    return nullArgs(entry, "x, levels and codes");
  if (kvq_status s =
          checkQuantGrid(dtype, bits, rows, cols, axis, group, layout, g))
    return s;
  if (kvq_status s = checkAligned(entry, x, dtype, "x"))
    return s;
  const int64_t count = int64_t{1} << bits;
  if (levelsFiniteAndAscending(levels, g->vectors() * count, count))
    return checkFinite(x, dtype, rows * cols);
  // Some table is bad: the checks in their order name the first offender.
  if (kvq_status s = checkHalfTable(levels, g->vectors() * count, "level"))
    return s;
  for (int64_t v = 0; v < g->vectors(); ++v)
    for (int64_t l = 1; l < count; ++l)
      if (halfToFloat(levels[v * count + l]) <
          halfToFloat(levels[v * count + l - 1]))
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "levels of vector %lld are not ascending",
                    static_cast<long long>(v));
  return checkFinite(x, dtype, rows * cols);
}

kvq_status kvq::validateNuqDequantArgs(
    const char *entry, const uint8_t *codes, kvq_code_layout layout,
    const uint16_t *levels, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, int32_t bits, const void *out, kvq_dtype dtype, Grid *g) {
  if (!codes || !levels || !out)
    return nullArgs(entry, "codes, levels and out");
  if (kvq_status s =
          checkNuqGrid(dtype, bits, rows, cols, axis, group, layout, levels, g))
    return s;
  if (kvq_status s = checkAligned(entry, out, dtype, "out"))
    return s;
  return checkCodes(codes, layout, rows * cols, bits);
}

kvq_status kvq::validateOutlierSplitArgs(const char *entry, const void *x,
                                         kvq_dtype dtype, int64_t rows,
                                         int64_t cols, kvq_axis axis,
                                         int32_t group, float fraction,
                                         const uint8_t *outlierMask, Grid *g) {
  if (!x || !outlierMask)
    return nullArgs(entry, "x and outlier_mask");
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkAligned(entry, x, dtype, "x"))
    return s;
  if (kvq_status s = makeGeometry(rows, cols, axis, group, g))
    return s;
  if (!(fraction >= 0.0f && fraction < 1.0f)) // NaN fails too
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "outlier fraction %g is not in [0, 1)",
                static_cast<double>(fraction));
  return checkFinite(x, dtype, rows * cols);
}

kvq_status kvq::validateOutlierScreenArgs(const char *entry, const void *x,
                                          kvq_dtype dtype, int64_t rows,
                                          int64_t cols, const float *threshold,
                                          const uint8_t *outlierMask) {
  if (!x || !threshold || !outlierMask)
    return nullArgs(entry, "x, threshold and outlier_mask");
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkAligned(entry, x, dtype, "x"))
    return s;
  if (kvq_status s = checkMatrix(rows, cols))
    return s;
  for (int64_t c = 0; c < cols; ++c)
    if (std::isnan(threshold[c]))
      return fail(KVQ_ERR_NON_FINITE, "threshold %lld is NaN",
                  static_cast<long long>(c));
  return checkFinite(x, dtype, rows * cols);
}

kvq_status kvq::validateKeyNormArgs(const char *entry, const void *keys,
                                    kvq_dtype dtype, int64_t tokens,
                                    int32_t kvHeads, int32_t headDim,
                                    const float *norms) {
  if (!keys || !norms)
    return nullArgs(entry, "keys and norms");
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkAligned(entry, keys, dtype, "keys"))
    return s;
  if (kvHeads < 0 || headDim < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative kv_heads or head_dim");
  const int64_t channels = int64_t{kvHeads} * headDim;
  if (kvq_status s = checkMatrix(tokens, channels))
    return s;
  return checkFinite(keys, dtype, tokens * channels);
}

kvq_status kvq::validateSinkSelectArgs(const char *entry, const float *norms,
                                       int64_t tokens, int32_t k,
                                       const int64_t *positions) {
  if (!norms || (!positions && k > 0))
    return nullArgs(entry, "norms and positions");
  if (tokens < 0 || k < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "negative tokens or k");
  if (tokens == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "%s: zero tokens", entry);
  if (tokens > limits::kKernelElements)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: tokens %lld exceed 2^48", entry,
                static_cast<long long>(tokens));
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
  return KVQ_OK;
}
