//===- kernel_table.cpp - Selection of the active kernel table ------------===//
//
// One place that decides which implementation of the hot primitives runs.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "kernels.h"

const kvq::KernelTable &kvq::referenceKernels() {
  static const KernelTable table = {
      "reference",        packCodesRef, unpackCodesRef, uniformCalibrateRef,
      uniformQuantizeRef, lloydFitRef,  topkAbsRef};
  return table;
}

const kvq::KernelTable &kvq::kernels() { return referenceKernels(); }
