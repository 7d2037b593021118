//===- validate.h - Argument checks of the Metal entry points ----*- C++ -*-===//
//
// The same checks, in the same order and with the same statuses, as the CPU
// kernels of runtime/common/kernel_api.cpp, so a graph lowered for Metal
// fails exactly where its CPU twin fails. Everything is checked before any
// device work, so outputs are written only on success.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_METAL_HOST_VALIDATE_H
#define KVQ_METAL_HOST_VALIDATE_H

#include "device.h"
#include "kvq/runtime.h"

#include <cstdint>

namespace kvq::metal {

/// The vectors a (rows, cols, axis, group) description splits a matrix into.
struct Geometry {
  int64_t rows = 0, cols = 0, group = 0;
  int32_t axis = 0;
  int64_t vectors = 0;
};

/// The device behind a context pointer (null -> KVQ_ERR_NULL_POINTER).
kvq_status deviceOf(void *ctx, const char *fn, Device **out);

kvq_status checkDtype(kvq_dtype dtype);
kvq_status checkBits(int32_t bits);
kvq_status checkMatrix(int64_t rows, int64_t cols);
kvq_status makeGeometry(int64_t rows, int64_t cols, kvq_axis axis,
                        int32_t group, Geometry *g);
kvq_status checkLayout(kvq_code_layout layout);
/// Every element finite and within the fp16 range.
kvq_status checkFinite(const void *x, kvq_dtype dtype, int64_t n);
/// Every fp16 table entry finite.
kvq_status checkHalfTable(const uint16_t *t, int64_t n, const char *what);
/// Unpacked codes below 2^bits.
kvq_status checkCodes(const uint8_t *codes, kvq_code_layout layout, int64_t n,
                      int32_t bits);
/// One dispatch covers at most 2^32 - 1 threads (uint thread positions).
kvq_status checkGrid(int64_t threads, const char *fn);

/// Bytes per element of dtype.
inline size_t dtypeSize(kvq_dtype dtype) {
  return dtype == KVQ_DTYPE_F16 ? 2 : 4;
}

} // namespace kvq::metal

#endif // KVQ_METAL_HOST_VALIDATE_H
