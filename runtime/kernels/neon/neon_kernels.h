//===- neon_kernels.h - Pieces of the NEON kernel table ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Each arm64 kernel file fills its part of the table; table_neon.cpp
// assembles them.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_NEON_NEON_KERNELS_H
#define KVQ_RUNTIME_KERNELS_NEON_NEON_KERNELS_H

#include "kernels.h"

namespace kvq {
namespace neon {

/// quantize_neon.cpp: (un)packing, uniform (de)quantization.
void fillQuantNeon(KernelTable &t);
/// outliers_neon.cpp: outlier screening.
void fillOutliersNeon(KernelTable &t);
/// attend_neon.cpp: the fused-attention inner kernels that cover shape s.
void fillAttendNeon(const AttendShape &s, AttendOps &ops);
/// attend_neon_nibble.cpp: key dots over nibble-major blocks.
void fillNibbleNeon(const AttendShape &s, AttendOps &ops);
/// matmul_neon.cpp: KernelTable::matmul.
void matmulNeon(const MatmulArgs &a, int64_t j0, int64_t j1);

} // namespace neon
} // namespace kvq

#endif // KVQ_RUNTIME_KERNELS_NEON_NEON_KERNELS_H
