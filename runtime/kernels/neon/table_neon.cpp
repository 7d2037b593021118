//===- table_neon.cpp - The arm64 NEON kernel table -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// NEON is baseline on AArch64, so the table is always available. Entries
// without a NEON version keep the reference (or the shared portable fast
// path: the sorted-runs Lloyd fit).
//
//===----------------------------------------------------------------------===//
#include "neon_kernels.h"

#include "lloyd_fast.h"
#include "outliers_fast.h"

namespace {

kvq::AttendOps attendNeon(const kvq::AttendShape &s) {
  kvq::AttendOps ops{};
  kvq::neon::fillAttendNeon(s, ops);
  kvq::neon::fillNibbleNeon(s, ops);
  return ops;
}

} // namespace

const kvq::KernelTable *kvq::simdKernelTable() {
  static const KernelTable table = [] {
    KernelTable t = referenceKernels();
    t.name = "neon";
    t.lloydFit = lloydFitFast;
    t.lloydFitGathered = lloydFitGatheredFast;
    t.topkAbs = topkAbsFast;
    neon::fillQuantNeon(t);
    neon::fillOutliersNeon(t);
    t.attendFor = attendNeon;
    t.matmul = neon::matmulNeon;
    return t;
  }();
  return &table;
}

const kvq::KernelTable *kvq::simdFallbackKernelTable() { return nullptr; }

std::vector<const kvq::KernelTable *> kvq::simdTablesForSelection() {
  return {simdKernelTable()};
}
