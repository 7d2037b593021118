//===- KvqPlugin.cpp - kvq as a plugin of a stock mlir-opt ----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One module with both of MLIR's plugin entry points:
//
//   mlir-opt --load-dialect-plugin=KvqPlugin.so --load-pass-plugin=KvqPlugin.so
//            --pass-pipeline='builtin.module(kvq-to-llvm)' in.mlir
//
// One file rather than two: the dialect's TypeIDs live in the module, and a
// dialect plugin and a pass plugin each linking their own copy of the dialect
// would disagree on them. dlopen returns the same handle for the same path,
// so the two flags share one copy.
//
// mlir-opt already registers every upstream dialect, extension and pass, so
// the plugin adds only what is kvq's: the dialect with its bufferization
// models, and the kvq passes and pipelines.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqBufferization.h"
#include "kvq/dialect/KvqDialect.h"
#include "kvq/passes/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "kvq", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<mlir::kvq::KvqDialect>();
            mlir::kvq::registerBufferizableOpInterfaceExternalModels(
                *registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "kvq-passes", LLVM_VERSION_STRING,
          [] { mlir::kvq::registerKvqPassesAndPipelines(); }};
}
