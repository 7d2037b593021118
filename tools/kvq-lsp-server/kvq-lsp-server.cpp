//===- kvq-lsp-server.cpp - mlir-lsp-server with the kvq dialect ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The language server editors start for .mlir files (diagnostics, hover,
// go-to-definition, completion), built on upstream's MLIRLspServerLib with
// the same dialects as kvq-opt, so a kvq op is parsed and verified exactly
// as kvq-opt would. Point the editor's MLIR extension at this binary (VS
// Code: "mlir.server_path").
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Registration.h"

#include "cl_version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"

int main(int argc, char **argv) {
  kvq::cli::setVersionPrinter("kvq-lsp-server");
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::kvq::registerAllKvq(registry);
  return mlir::failed(mlir::MlirLspServerMain(argc, argv, registry)) ? 1 : 0;
}
