//===- attend_select.cpp - The one choice of a cache's attention ops ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A kernel table declares, per attention op, which cache shapes its kernel
// covers (KernelTable::attendFor, written next to the kernels); here each
// entry becomes that kernel or, for the shapes it does not cover, the
// reference. The stores call this once per cache, so the attention loops
// never test a shape and no SIMD kernel carries a fallback of its own.
//
//===----------------------------------------------------------------------===//
#include "kernels.h"

kvq::AttendOps kvq::selectAttendOps(const KernelTable &t,
                                    const AttendShape &shape) {
  AttendOps ops = t.attendFor(shape);
  const AttendOps &ref = referenceAttendOps();
#define KVQ_TAKE_REFERENCE(op)                                                 \
  if (!ops.op)                                                                 \
    ops.op = ref.op;
  KVQ_ATTEND_OPS(KVQ_TAKE_REFERENCE)
#undef KVQ_TAKE_REFERENCE
  return ops;
}
