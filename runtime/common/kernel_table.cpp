//===- kernel_table.cpp - Selection of the active kernel table ------------===//
//
// One place that decides which implementation of the hot primitives runs:
// the SIMD table of this build and CPU (runtime/x86, runtime/neon), unless
// the environment asks for the reference with KVQ_KERNELS=reference.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "kernels.h"

#include <cstdlib>
#include <cstring>

#if !defined(KVQ_HAVE_SIMD_TABLE)
const kvq::KernelTable *kvq::simdKernelTable() { return nullptr; }
#endif

const kvq::KernelTable &kvq::referenceKernels() {
  static const KernelTable table = {"reference",
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
                                    referenceAttendOps()};
  return table;
}

const kvq::KernelTable *kvq::simdKernels() {
  static const KernelTable *table = simdKernelTable();
  return table;
}

const kvq::KernelTable &kvq::kernels() {
  // Decided once: the stores and the C entry points must agree for the
  // whole life of the process.
  static const KernelTable *active = [] {
    const char *env = std::getenv("KVQ_KERNELS");
    if (env && std::strcmp(env, "reference") == 0)
      return &referenceKernels();
    const KernelTable *simd = simdKernels();
    return simd ? simd : &referenceKernels();
  }();
  return *active;
}
