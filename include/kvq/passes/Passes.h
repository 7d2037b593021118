//===- Passes.h - kvq passes ------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Declarations and registration of every kvq pass and pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_PASSES_H
#define KVQ_PASSES_PASSES_H

// Only what the declarations need: each pass's source includes the dialects
// it depends on (dependentDialects), so that every user of this header does
// not parse Linalg, LLVM, Tensor and MemRef (~8 s of compile time per file).
#include "kvq/dialect/KvqDialect.h"
#include "kvq/passes/OptionalParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::kvq {

/// The runtime whose entry points convert-kvq-to-runtime calls (the
/// `target` option).
enum class RuntimeTarget { CPU, Metal };

/// What lowered code does after a failed runtime call (the `on-error`
/// option): stop (cf.assert) or record the status and continue.
enum class OnRuntimeError { Abort, Report };

/// The spellings of the two enums above, for convert-kvq-to-runtime's
/// options and the --kvq-to-llvm / --kvq-to-metal pipelines alike.
inline auto runtimeTargetValues() {
  return llvm::cl::values(
      clEnumValN(RuntimeTarget::CPU, "cpu", "kvq_* (libkvq_runtime_cpu)"),
      clEnumValN(RuntimeTarget::Metal, "metal",
                 "kvq_metal_* (libkvq_runtime_metal)"));
}
inline auto onRuntimeErrorValues() {
  return llvm::cl::values(
      clEnumValN(OnRuntimeError::Abort, "abort", "cf.assert: stop the program"),
      clEnumValN(OnRuntimeError::Report, "report",
                 "record the status (kvq_take_pending_status) and continue"));
}

#define GEN_PASS_DECL
#include "kvq/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kvq/passes/Passes.h.inc"

/// Registers the named pipelines --kvq-to-llvm and --kvq-to-metal.
void registerKvqPipelines();

} // namespace mlir::kvq

#endif // KVQ_PASSES_PASSES_H
