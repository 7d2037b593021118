//===- Pipelines.cpp - named kvq pipelines --------------------------------===//
//
// --kvq-to-llvm: a tensor-level model graph down to the LLVM dialect with
// runtime calls for the CPU backend. --kvq-to-metal: the same graph down to
// the calls of the Metal backend (func/memref level).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
struct KvqPipelineOptions : public PassPipelineOptions<KvqPipelineOptions> {
  PassOptions::Option<std::string> onError{
      *this, "on-error",
      llvm::cl::desc("After a failed runtime call: abort or report"),
      llvm::cl::init("abort")};
};

/// Tensors to memrefs, then kvq ops to runtime calls for `target`.
void buildToRuntimeCalls(OpPassManager &pm, const KvqPipelineOptions &options,
                         StringRef target) {
  // Elementwise arith on tensors (a model's casts and scales) has no
  // bufferization of its own: make it linalg first.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // The runtime takes dense row-major buffers; identity layouts at function
  // boundaries avoid copies into such buffers.
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Free what the graph allocates. kvq ops in memref form declare their
  // results as allocations, so this runs before they become runtime calls.
  bufferization::buildBufferDeallocationPipeline(pm);
  kvq::ConvertKvqToRuntimeOptions lowering;
  lowering.target = target.str();
  lowering.onError = options.onError;
  pm.addPass(kvq::createConvertKvqToRuntime(lowering));
  pm.addPass(createCanonicalizerPass());
}

void buildKvqToLLVM(OpPassManager &pm, const KvqPipelineOptions &options) {
  buildToRuntimeCalls(pm, options, "cpu");
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void buildKvqToMetal(OpPassManager &pm, const KvqPipelineOptions &options) {
  buildToRuntimeCalls(pm, options, "metal");
}
} // namespace

void mlir::kvq::registerKvqPipelines() {
  PassPipelineRegistration<KvqPipelineOptions>(
      "kvq-to-llvm",
      "Bufferize, lower kvq ops to CPU runtime calls (kvq_*), and convert "
      "everything to the LLVM dialect",
      buildKvqToLLVM);
  PassPipelineRegistration<KvqPipelineOptions>(
      "kvq-to-metal",
      "Bufferize and lower kvq ops to Metal runtime calls (kvq_metal_*)",
      buildKvqToMetal);
}
