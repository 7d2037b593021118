//===- kernel_table.cpp - Selection of the active kernel table ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One place that decides which implementation of the hot primitives runs:
// the SIMD table of this build and CPU (runtime/kernels/x86, runtime/kernels/neon), unless
// the environment asks for the reference with KVQ_KERNELS=reference (or
// for another table this CPU runs by its name, e.g. KVQ_KERNELS=avx2).
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"

#include <cstdlib>
#include <cstring>

#if !defined(KVQ_HAVE_SIMD_TABLE)
const kvq::KernelTable *kvq::simdKernelTable() { return nullptr; }
const kvq::KernelTable *kvq::simdFallbackKernelTable() { return nullptr; }
std::vector<const kvq::KernelTable *> kvq::simdTablesForSelection() {
  return {};
}
#endif

namespace {

/// No attention kernels of its own: selectAttendOps fills every entry from
/// referenceAttendOps().
kvq::AttendOps noAttendKernels(const kvq::AttendShape &) { return {}; }

} // namespace

const kvq::KernelTable &kvq::referenceKernels() {
  static const KernelTable table = {
      "reference",
      packCodesRef,
      unpackCodesRef,
      uniformCalibrateRef,
      uniformQuantizeRef,
      lloydFitRef,
      topkAbsRef,
      groupQuantRef,
      groupDequantRef,
      nuqQuantRef,
      nuqDequantRef,
      lloydFitGathered,
      outlierSplitRef,
      outlierScreenRef,
      keyNormRef,
      topkIndicesRef,
      noAttendKernels,
      matmulRef,
      floatToHalfN};
  return table;
}

const kvq::KernelTable *kvq::simdKernels() {
  static const KernelTable *table = simdKernelTable();
  return table;
}

std::vector<const kvq::KernelTable *> kvq::simdKernelVariants() {
  std::vector<const KernelTable *> out;
  if (const KernelTable *best = simdKernels())
    out.push_back(best);
  if (const KernelTable *next = simdFallbackKernelTable())
    out.push_back(next);
  return out;
}

const kvq::KernelTable &kvq::kernels() {
  // Decided once: the stores and the C entry points must agree for the
  // whole life of the process.
  static const KernelTable *active = [] {
    const char *env = std::getenv("KVQ_KERNELS");
    if (env && std::strcmp(env, "reference") == 0)
      return &referenceKernels();
    // A named SIMD table this CPU runs (e.g. avx2 on an AVX-512 machine),
    // for comparisons; an unknown name keeps the default.
    if (env)
      for (const KernelTable *t : simdKernelVariants())
        if (std::strcmp(env, t->name) == 0)
          return t;
    const KernelTable *simd = simdKernels();
    return simd ? simd : &referenceKernels();
  }();
  return *active;
}
