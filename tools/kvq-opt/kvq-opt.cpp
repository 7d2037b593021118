//===- kvq-opt.cpp - mlir-opt with the kvq dialect and passes -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The kvq driver: every upstream dialect, extension and pass (a model graph
// mixes func, tensor, linalg, arith, ...), plus kvq through the one entry
// point embedders use too (passes/Registration.h).
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Registration.h"

#include "cl_version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  kvq::cli::setVersionPrinter("kvq-opt");
  mlir::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::kvq::registerAllKvq(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "kvq optimizer driver: the kvq dialect and its passes\n",
      registry));
}
