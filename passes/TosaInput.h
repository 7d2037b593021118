//===- TosaInput.h - TOSA graphs brought to linalg ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Graphs in TOSA (torch-mlir's TOSA backend, TFLite and buddy-mlir's
// importers) enter kvq through upstream's own conversions: the cache pass
// matches the linalg they produce, and --kvq-to-llvm lowers it. One list,
// so that both see the same linalg.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TOSAINPUT_H
#define KVQ_PASSES_TOSAINPUT_H

#include "mlir/Pass/PassManager.h"

namespace mlir::kvq {

/// Adds, to a pass manager anchored on func.func, upstream's TOSA to
/// linalg/tensor/arith/scf conversions (tosa.scatter to scf loops first:
/// tosa-to-linalg leaves it illegal). A function without TOSA is unchanged.
void addTosaToLinalg(OpPassManager &funcPm);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TOSAINPUT_H
