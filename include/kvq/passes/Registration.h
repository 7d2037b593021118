//===- Registration.h -------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// One registration entry point for embedders.
//
// What a tool embedding kvq calls once: the kvq dialect with its
// bufferization models, the kvq passes and pipelines, and every upstream
// dialect, interface and LLVM IR translation that --kvq-to-llvm and
// --kvq-to-metal need, so a driver built on MlirOptMain (or a compiler
// running the pipelines through a PassManager) needs nothing else:
//
//   mlir::DialectRegistry registry;
//   mlir::kvq::registerAllKvq(registry);
//   return mlir::asMainReturnCode(
//       mlir::MlirOptMain(argc, argv, "my-opt", registry));
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_REGISTRATION_H
#define KVQ_PASSES_REGISTRATION_H

namespace mlir {
class DialectRegistry;
namespace kvq {

/// Inserts the kvq dialect and the upstream dialects a kvq pipeline goes
/// through (func, arith, math, tensor, linalg, bufferization, memref, scf,
/// cf, affine, index, ub, llvm), and attaches their external models: the
/// One-Shot Bufferize models of kvq, arith, tensor, linalg, scf, cf and
/// func, the buffer-deallocation models, and the convert-to-llvm
/// interfaces. Touches no global state.
void registerKvqDialects(DialectRegistry &registry);

/// Registers the translations of the builtin and llvm dialects to LLVM IR
/// (what mlir-translate --mlir-to-llvmir or an ExecutionEngine needs after
/// --kvq-to-llvm).
void registerKvqLLVMIRTranslations(DialectRegistry &registry);

/// Registers the kvq passes (--kvq-configure-caches,
/// --kvq-quantize-kv-cache, --convert-kvq-to-runtime) and pipelines
/// (--kvq-to-llvm, --kvq-to-metal) with MLIR's global pass registry. Safe
/// to call more than once (the work is done once per process).
void registerKvqPassesAndPipelines();

/// All of the above: the one call an embedder makes.
void registerAllKvq(DialectRegistry &registry);

} // namespace kvq
} // namespace mlir

#endif // KVQ_PASSES_REGISTRATION_H
