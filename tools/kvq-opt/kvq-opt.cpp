//===- kvq-opt.cpp - mlir-opt with the kvq dialect and passes -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The kvq driver: every upstream dialect, extension and pass (a model graph
// mixes func, tensor, linalg, arith, ...), plus the kvq dialect and passes.
//
//===----------------------------------------------------------------------===//
#include "dialect/KvqBufferization.h"
#include "dialect/KvqDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::kvq::registerKvqPasses();
  mlir::kvq::registerKvqPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::kvq::KvqDialect>();
  mlir::kvq::registerBufferizableOpInterfaceExternalModels(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "kvq optimizer driver: the kvq dialect and its passes\n",
      registry));
}
