//===- Pipelines.cpp - named kvq pipelines --------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// --kvq-to-llvm: a tensor-level model graph (linalg, tensor, arith or
// TOSA) down to the LLVM dialect with runtime calls for the CPU backend
// (dense layers too, unless matmul-kernels=false). --kvq-to-metal: the
// same graph down to the calls of the Metal backend (func/memref level).
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"
#include "passes/TosaInput.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
/// Rewrites linalg.softmax (and any other aggregated op) into the generics
/// it stands for: convert-linalg-to-loops only lowers structured ops.
struct DecomposeAggregatedOpsPass
    : public PassWrapper<DecomposeAggregatedOpsPass,
                         OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DecomposeAggregatedOpsPass)
  StringRef getArgument() const final { return "kvq-decompose-aggregated-ops"; }
  void runOnOperation() override {
    SmallVector<linalg::AggregatedOpInterface> ops;
    getOperation().walk(
        [&](linalg::AggregatedOpInterface op) { ops.push_back(op); });
    for (linalg::AggregatedOpInterface op : ops) {
      OpBuilder b(op);
      // A softmax on buffers (a bufferized graph) is decomposed on tensors
      // read from its input and written into its output; it never reads its
      // output, so the tensors' init is empty.
      if (auto sm = dyn_cast<linalg::SoftmaxOp>(op.getOperation());
          sm && sm.hasPureBufferSemantics()) {
        Location loc = sm.getLoc();
        auto tensorOf = [](Value m) {
          auto t = cast<MemRefType>(m.getType());
          return RankedTensorType::get(t.getShape(), t.getElementType());
        };
        Value in = bufferization::ToTensorOp::create(
            b, loc, tensorOf(sm.getInput()), sm.getInput(), /*restrict=*/true);
        Value init = tensor::EmptyOp::create(
            b, loc, tensor::getMixedSizes(b, loc, in),
            tensorOf(sm.getOutput()).getElementType());
        auto onTensors = linalg::SoftmaxOp::create(
            b, loc, init.getType(), in, init, sm.getDimension());
        FailureOr<SmallVector<Value>> parts =
            cast<linalg::AggregatedOpInterface>(onTensors.getOperation())
                .decomposeOperation(b);
        if (failed(parts)) {
          sm->emitError("cannot decompose ") << sm->getName();
          return signalPassFailure();
        }
        bufferization::MaterializeInDestinationOp::create(
            b, loc, TypeRange{}, (*parts)[0], sm.getOutput(),
            /*restrict=*/true, /*writable=*/true);
        onTensors->erase();
        sm->erase();
        continue;
      }
      FailureOr<SmallVector<Value>> parts = op.decomposeOperation(b);
      if (failed(parts)) {
        op->emitError("cannot decompose ") << op->getName();
        return signalPassFailure();
      }
      op->replaceAllUsesWith(*parts);
      op->erase();
    }
  }
};

/// Drops memref results that are a function argument (a model's cache
/// tensors, written in place and returned), in functions the module does
/// not call: the caller already holds those buffers. Upstream's
/// drop-equivalent-buffer-results leaves public functions alone.
struct DropArgumentResultsPass
    : public PassWrapper<DropArgumentResultsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropArgumentResultsPass)
  StringRef getArgument() const final { return "kvq-drop-argument-results"; }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (func::FuncOp f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || !f.getBody().hasOneBlock() ||
          !SymbolTable::symbolKnownUseEmpty(f, module))
        continue;
      auto ret = dyn_cast<func::ReturnOp>(f.getBody().front().getTerminator());
      if (!ret)
        continue;
      llvm::BitVector drop(ret.getNumOperands());
      SmallVector<Value> kept;
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value base = v;
        while (auto cast = base.getDefiningOp<memref::CastOp>())
          base = cast.getSource();
        if (isa<BaseMemRefType>(v.getType()) && isa<BlockArgument>(base) &&
            cast<BlockArgument>(base).getOwner() == &f.getBody().front())
          drop.set(i);
        else
          kept.push_back(v);
      }
      if (drop.none())
        continue;
      OpBuilder b(ret);
      func::ReturnOp::create(b, ret.getLoc(), kept);
      ret.erase();
      if (failed(f.eraseResults(drop)))
        return signalPassFailure();
    }
  }
};

struct KvqPipelineOptions : public PassPipelineOptions<KvqPipelineOptions> {
  PassOptions::Option<kvq::OnRuntimeError> onError{
      *this, "on-error",
      llvm::cl::desc("What generated code does after a failed runtime call"),
      llvm::cl::init(kvq::OnRuntimeError::Abort), kvq::onRuntimeErrorValues()};
  PassOptions::Option<bool> matmulKernels{
      *this, "matmul-kernels",
      llvm::cl::desc("Rewrite dense layers into kvq_matmul calls "
                     "(convert-linalg-to-kvq-matmul); false leaves them to "
                     "convert-linalg-to-loops"),
      llvm::cl::init(true)};
};

/// Tensors to memrefs, then kvq ops to runtime calls for `target`.
void buildToRuntimeCalls(OpPassManager &pm, const KvqPipelineOptions &options,
                         kvq::RuntimeTarget target) {
  // A graph in TOSA becomes linalg first (a no-op on one without).
  kvq::addTosaToLinalg(pm.nest<func::FuncOp>());
  // Elementwise arith on tensors (a model's casts and scales) has no
  // bufferization of its own: make it linalg first.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addNestedPass<func::FuncOp>(
      std::make_unique<DecomposeAggregatedOpsPass>());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // The runtime takes dense row-major buffers; identity layouts at function
  // boundaries avoid copies into such buffers.
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A loop over layers carries the activations as a fresh tensor each
  // iteration (only the caches are updated in place).
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // A model's cache tensors are written in place and returned: such results
  // alias an argument, and the caller already holds them.
  pm.addPass(std::make_unique<DropArgumentResultsPass>());
  // Free what the graph allocates. kvq ops in memref form declare their
  // results as allocations, so this runs before they become runtime calls.
  bufferization::buildBufferDeallocationPipeline(pm);
  kvq::ConvertKvqToRuntimeOptions lowering;
  lowering.target = target;
  lowering.onError = options.onError;
  pm.addPass(kvq::createConvertKvqToRuntime(lowering));
  // The deallocation pipeline clones buffers a function returns when they
  // may alias another; clones become allocations and copies.
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createCanonicalizerPass());
}

void buildKvqToLLVM(OpPassManager &pm, const KvqPipelineOptions &options) {
  buildToRuntimeCalls(pm, options, kvq::RuntimeTarget::CPU);
  if (options.matmulKernels) {
    kvq::ConvertLinalgToKvqMatmulOptions matmul;
    matmul.onError = options.onError;
    pm.addPass(kvq::createConvertLinalgToKvqMatmul(matmul));
  }
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void buildKvqToMetal(OpPassManager &pm, const KvqPipelineOptions &options) {
  buildToRuntimeCalls(pm, options, kvq::RuntimeTarget::Metal);
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
