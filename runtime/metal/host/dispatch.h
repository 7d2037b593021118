//===- dispatch.h - Kernel launches shared by the entry points ---*- C++ -*-===//
//
// Small wrappers for launches more than one entry point needs (packing,
// parameter blocks), so the cache and the stateless kernels run the very
// same dispatches.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_METAL_HOST_DISPATCH_H
#define KVQ_METAL_HOST_DISPATCH_H

#include "../kernels/kvq_params.h"
#include "staging.h"
#include "validate.h"

namespace kvq::metal {

/// Pack `rows` streams of n unpacked codes (codes is [rows, n]) into
/// rowBytes-byte rows of `out` starting at outOffset.
kvq_status packCodes(Staging &st, const Buffer &codes, int64_t rows,
                     int64_t n, int32_t bits, const Buffer &out,
                     size_t outOffset, int64_t rowBytes);

/// The parameter block of a matrix kernel.
kvq_metal_matrix matrixParams(const Geometry &g, int32_t bits,
                              kvq_dtype dtype);

} // namespace kvq::metal

#endif // KVQ_METAL_HOST_DISPATCH_H
