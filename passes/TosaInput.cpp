//===- TosaInput.cpp - TOSA graphs brought to linalg ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//

#include "passes/TosaInput.h"

#include "mlir/Conversion/TosaToArith/TosaToArith.h"
#include "mlir/Conversion/TosaToLinalg/TosaToLinalg.h"
#include "mlir/Conversion/TosaToSCF/TosaToSCF.h"
#include "mlir/Conversion/TosaToTensor/TosaToTensor.h"
#include "mlir/Dialect/Tosa/Transforms/Passes.h"

void mlir::kvq::addTosaToLinalg(OpPassManager &funcPm) {
  // The order of upstream's tosa-to-linalg-pipeline, without its
  // module-level validation and its canonicalizations (the cache pass
  // matches what the conversions write, not a refolded graph), with the
  // conversions it leaves to others: scatter and control flow to scf,
  // constants to arith, reshapes and slices to tensor.
  funcPm.addPass(createTosaToSCFPass());
  funcPm.addPass(tosa::createTosaOptionalDecompositionsPass());
  funcPm.addPass(tosa::createTosaInferShapesPass());
  funcPm.addPass(tosa::createTosaMakeBroadcastablePass());
  funcPm.addPass(tosa::createTosaToLinalgNamed());
  funcPm.addPass(tosa::createTosaToLinalg());
  funcPm.addPass(createTosaToArithPass());
  funcPm.addPass(createTosaToTensorPass());
}
