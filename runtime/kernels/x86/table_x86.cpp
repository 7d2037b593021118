//===- table_x86.cpp - Run-time selection of the x86 tables ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The x86_64 SIMD table exists only when the CPU (and the OS, for the YMM
// state) supports AVX2, F16C and FMA; otherwise kernels() keeps the
// reference. With AVX-512F the table takes the AVX-512 kernels where there
// are any (the AVX2-only table stays available for differential tests).
// Checked with cpuid/xgetbv directly so the test does not depend
// on which feature names a compiler's __builtin_cpu_supports knows.
//
//===----------------------------------------------------------------------===//
#include "x86_kernels.h"

#include "lloyd_fast.h"

#include <cpuid.h>

namespace {

bool cpuHasAvx2F16cFma() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27),
             avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c))
    return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0x6u) != 0x6u) // XMM and YMM state saved by the OS
    return false;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  return b & (1u << 5); // AVX2
}

/// AVX-512F with the OS saving the opmask and ZMM state.
bool cpuHasAvx512f() {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(b & (1u << 16)))
    return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xe6u) == 0xe6u;
}

kvq::AttendOps attendAvx2(const kvq::AttendShape &s) {
  kvq::AttendOps ops{};
  kvq::x86::fillAttendAvx2(s, ops);
  kvq::x86::fillHalfNarrowAvx2(s, ops);
  kvq::x86::fillNibbleAvx2(s, ops);
  kvq::x86::fillLutRowsAvx2(s, ops);
  kvq::x86::fillOutliersAvx2(s, ops);
  kvq::x86::fillGroupWeightsAvx2(s, ops);
  return ops;
}

/// The AVX2 kernels with the AVX-512 ones swapped in where those cover the
/// shape; elsewhere the AVX2 entry stays (or the reference where that is
/// null).
kvq::AttendOps attendAvx512(const kvq::AttendShape &s) {
  kvq::AttendOps ops = attendAvx2(s);
  kvq::x86::fillNibbleAvx512(s, ops);
  kvq::x86::fillPairsAvx512(s, ops);
  kvq::x86::fillGroupWeightsAvx512(s, ops);
  kvq::x86::fillRopeNibbleAvx512(s, ops);
  kvq::x86::fillRopeRowsAvx512(s, ops);
  kvq::x86::fillLutAvx512(s, ops);
  kvq::x86::fillHalfAvx512(s, ops);
  return ops;
}

const kvq::KernelTable &avx2Table() {
  static const kvq::KernelTable table = [] {
    kvq::KernelTable t = kvq::referenceKernels();
    t.name = "avx2";
    kvq::x86::fillQuantAvx2(t);
    kvq::x86::fillOutliersAndSinksAvx2(t);
    // The portable Lloyd fit over sorted runs (lloyd_fast.h).
    t.lloydFit = kvq::lloydFitFast;
    t.lloydFitGathered = kvq::lloydFitGatheredFast;
    kvq::x86::fillConvertAvx2(t);
    t.attendFor = attendAvx2;
    t.matmul = kvq::x86::matmulAvx2;
    return t;
  }();
  return table;
}

/// The AVX2 table with the kernels that have an AVX-512 version swapped in.
const kvq::KernelTable &avx512Table() {
  static const kvq::KernelTable table = [] {
    kvq::KernelTable t = avx2Table();
    t.name = "avx512";
    kvq::x86::fillNuqAvx512(t);
    kvq::x86::fillSortAvx512(t);
    kvq::x86::fillGroupQuantAvx512(t);
    t.attendFor = attendAvx512;
    t.matmul = kvq::x86::matmulAvx512;
    return t;
  }();
  return table;
}

} // namespace

const kvq::KernelTable *kvq::simdKernelTable() {
  if (!cpuHasAvx2F16cFma())
    return nullptr;
  return cpuHasAvx512f() ? &avx512Table() : &avx2Table();
}

const kvq::KernelTable *kvq::simdFallbackKernelTable() {
  if (!cpuHasAvx2F16cFma() || !cpuHasAvx512f())
    return nullptr;
  return &avx2Table();
}

// Building the tables runs no AVX2 or AVX-512 instruction (they only take
// the kernels' addresses), so both exist on any x86_64 CPU.
std::vector<const kvq::KernelTable *> kvq::simdTablesForSelection() {
  return {&avx512Table(), &avx2Table()};
}
