//===- table_neon.cpp - The arm64 NEON kernel table -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// NEON is baseline on AArch64, so the table is always available. Entries
// without a NEON version keep the reference (or the shared portable fast
// path: the merge-walk Lloyd fit).
//
//===----------------------------------------------------------------------===//
#include "neon_kernels.h"

#include "kernels_fast.h"

const kvq::KernelTable *kvq::simdKernelTable() {
  static const KernelTable table = [] {
    KernelTable t = referenceKernels();
    t.name = "neon";
    t.lloydFit = lloydFitWalk;
    t.lloydFitGathered = lloydFitGatheredWalk;
    neon::fillQuantNeon(t);
    neon::fillAttendNeon(t.attend);
    neon::fillNibbleNeon(t.attend);
    return t;
  }();
  return &table;
}

const kvq::KernelTable *kvq::simdFallbackKernelTable() { return nullptr; }
