// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// my-opt: an optimizer driver embedding kvq through its one entry point
// (test/CMakeLists.txt, kvq-consumer-my-opt, runs --kvq-to-llvm with it).
#include "kvq/passes/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::kvq::registerAllKvq(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "my-opt with kvq\n", registry));
}
