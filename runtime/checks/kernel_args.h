//===- kernel_args.h - Argument checks of the stateless kernels -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One validation function per stateless kernel of runtime.h, shared by the
// CPU entry points (kernel_api.cpp) and the Metal ones
// (metal/host/kernels_*.cpp), so that a graph lowered for either backend
// fails on the same argument with the same status and message. Each takes
// the name of the calling entry point, which the null-pointer messages
// quote; everything else in the messages is backend-neutral.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CHECKS_KERNEL_ARGS_H
#define KVQ_RUNTIME_CHECKS_KERNEL_ARGS_H

#include "kernels.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq {

//===----------------------------------------------------------------------===//
// Single checks (also used by the cache entry points)
//===----------------------------------------------------------------------===//

/// KVQ_DTYPE_F16 or KVQ_DTYPE_F32.
kvq_status checkDtype(kvq_dtype dtype);

/// KVQ_ERR_INVALID_ARGUMENT (naming `entry` and `name`) unless the buffer
/// `p` of a known dtype is aligned to its elements: 2 bytes for fp16, 4 for
/// f32. The runtime reads and writes those buffers as uint16_t or float.
kvq_status checkAligned(const char *entry, const void *p, kvq_dtype dtype,
                        const char *name);
/// A supported code width (2, 3, 4, 8).
kvq_status checkBits(int32_t bits);
/// A non-negative, non-empty [rows, cols] shape.
kvq_status checkMatrix(int64_t rows, int64_t cols);
/// The shape, the axis and a group dividing the grouped dimension; fills g.
kvq_status makeGeometry(int64_t rows, int64_t cols, kvq_axis axis,
                        int32_t group, Grid *g);
/// KVQ_CODES_UNPACKED or KVQ_CODES_PACKED.
kvq_status checkLayout(kvq_code_layout layout);
/// Every element finite and within the fp16 range (the runtime stores fp16).
kvq_status checkFinite(const void *x, kvq_dtype dtype, int64_t n);
/// checkFinite's one vectorized pass alone: true when every element is
/// finite in fp16 (a caller then looks for the first offender itself).
bool allFiniteInHalf(const void *x, kvq_dtype dtype, int64_t n);
/// Every fp16 table entry finite; `what` names the table in the message.
kvq_status checkHalfTable(const uint16_t *t, int64_t n, const char *what);
/// Unpacked codes below 2^bits (packed codes cannot exceed it).
kvq_status checkCodes(const uint8_t *codes, kvq_code_layout layout, int64_t n,
                      int32_t bits);

//===----------------------------------------------------------------------===//
// Whole argument lists, in the order of the checks of each kernel
//===----------------------------------------------------------------------===//

/// kvq_group_quant; fills g.
kvq_status validateGroupQuantArgs(const char *entry, const void *x,
                                  kvq_dtype dtype, int64_t rows, int64_t cols,
                                  kvq_axis axis, int32_t group, int32_t bits,
                                  kvq_code_layout layout, const uint8_t *codes,
                                  const uint16_t *scale, const uint16_t *zero,
                                  Grid *g);

/// kvq_group_dequant (scale/zero tables and unpacked codes included).
kvq_status validateGroupDequantArgs(const char *entry, const uint8_t *codes,
                                    kvq_code_layout layout,
                                    const uint16_t *scale, const uint16_t *zero,
                                    int64_t rows, int64_t cols, kvq_axis axis,
                                    int32_t group, int32_t bits,
                                    const void *out, kvq_dtype dtype, Grid *g);

/// kvq_nuq_fit (iterations and the caller's scratch size included).
kvq_status validateNuqFitArgs(const char *entry, const void *x, kvq_dtype dtype,
                              int64_t rows, int64_t cols, kvq_axis axis,
                              int32_t group, int32_t bits, int32_t iters,
                              const float *scratch, int64_t scratchFloats,
                              const uint16_t *levels, Grid *g);

/// kvq_nuq_quant (level tables finite and ascending).
kvq_status validateNuqQuantArgs(const char *entry, const void *x,
                                kvq_dtype dtype, int64_t rows, int64_t cols,
                                kvq_axis axis, int32_t group, int32_t bits,
                                const uint16_t *levels, kvq_code_layout layout,
                                const uint8_t *codes, Grid *g);

/// kvq_nuq_dequant (level tables finite, unpacked codes in range).
kvq_status validateNuqDequantArgs(const char *entry, const uint8_t *codes,
                                  kvq_code_layout layout,
                                  const uint16_t *levels, int64_t rows,
                                  int64_t cols, kvq_axis axis, int32_t group,
                                  int32_t bits, const void *out,
                                  kvq_dtype dtype, Grid *g);

/// kvq_outlier_split (fraction in [0, 1)).
kvq_status validateOutlierSplitArgs(const char *entry, const void *x,
                                    kvq_dtype dtype, int64_t rows, int64_t cols,
                                    kvq_axis axis, int32_t group,
                                    float fraction, const uint8_t *outlierMask,
                                    Grid *g);

/// kvq_outlier_screen (no threshold NaN).
kvq_status validateOutlierScreenArgs(const char *entry, const void *x,
                                     kvq_dtype dtype, int64_t rows,
                                     int64_t cols, const float *threshold,
                                     const uint8_t *outlierMask);

/// kvq_key_norm.
kvq_status validateKeyNormArgs(const char *entry, const void *keys,
                               kvq_dtype dtype, int64_t tokens, int32_t kvHeads,
                               int32_t headDim, const float *norms);

/// kvq_sink_select (norms finite and non-negative, k <= tokens).
kvq_status validateSinkSelectArgs(const char *entry, const float *norms,
                                  int64_t tokens, int32_t k,
                                  const int64_t *positions);

} // namespace kvq

#endif // KVQ_RUNTIME_CHECKS_KERNEL_ARGS_H
