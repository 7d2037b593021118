//===- validate.h - Argument checks of the Metal entry points ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The argument checks themselves are the CPU kernels' (checks/kernel_args.h),
// so a graph lowered for Metal fails exactly where its CPU twin fails. This
// header adds what only Metal needs: the device behind a context and the
// size limit of one dispatch. Everything is checked before any device work,
// so outputs are written only on success.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_VALIDATE_H
#define KVQ_RUNTIME_METAL_HOST_VALIDATE_H

#include "device.h"
#include "kernel_args.h"
#include "kvq/runtime.h"

#include <cstddef>
#include <cstdint>

namespace kvq::metal {

/// The vectors a (rows, cols, axis, group) description splits a matrix
/// into: the CPU's grid, so both backends agree on the vector order.
using Geometry = kvq::Grid;

/// The device behind a context pointer (null -> KVQ_ERR_NULL_POINTER).
kvq_status deviceOf(void *ctx, const char *fn, Device **out);

/// One dispatch covers at most 2^32 - 1 threads (uint thread positions).
kvq_status checkGrid(int64_t threads, const char *fn);

/// Bytes per element of dtype (kvq::dtypeBytes), as a buffer size.
inline size_t dtypeSize(kvq_dtype dtype) {
  return static_cast<size_t>(kvq::dtypeBytes(dtype));
}

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_VALIDATE_H
