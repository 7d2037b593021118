//===- KvqBufferization.cpp - One-Shot Bufferize models of kvq ops --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every kvq op reads its tensor operands and produces fresh results; no
// result aliases an operand. Bufferizing an op therefore rebuilds it on the
// operands' buffers with identity-layout memref results, which the runtime
// lowering allocates. No copy is inserted for reads.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqBufferization.h"
#include "kvq/dialect/KvqDialect.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
/// Shared model: read-only operands, freshly allocated results.
template <typename OpTy>
struct ReadOnlyAllocatingOpModel
    : public BufferizableOpInterface::ExternalModel<
          ReadOnlyAllocatingOpModel<OpTy>, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  /// Results bufferize to identity-layout memrefs in the default space: the
  /// runtime takes dense row-major buffers.
  FailureOr<BufferLikeType> getBufferType(Operation *, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    auto tensor = cast<RankedTensorType>(value.getType());
    return cast<BufferLikeType>(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      if (!isa<TensorType>(operand.getType())) {
        operands.push_back(operand);
        continue;
      }
      FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
      if (failed(buffer))
        return failure();
      operands.push_back(*buffer);
    }
    SmallVector<Type> resultTypes;
    for (Type type : op->getResultTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      resultTypes.push_back(
          MemRefType::get(tensor.getShape(), tensor.getElementType()));
    }
    OperationState rebuilt(op->getLoc(), op->getName(), operands, resultTypes,
                           op->getAttrs());
    rebuilt.propertiesAttr = op->getPropertiesAsAttribute();
    Operation *memrefOp = rewriter.create(rebuilt);
    replaceOpWithBufferizedValues(rewriter, op, memrefOp->getResults());
    return success();
  }
};

template <typename... OpTys> void attachModels(MLIRContext *ctx) {
  (OpTys::template attachInterface<ReadOnlyAllocatingOpModel<OpTys>>(*ctx),
   ...);
}
} // namespace

void mlir::kvq::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, kvq::KvqDialect *) {
    attachModels<kvq::GroupQuantOp, kvq::GroupDequantOp, kvq::NuqFitOp,
                 kvq::NuqQuantOp, kvq::NuqDequantOp, kvq::OutlierSplitOp,
                 kvq::OutlierScreenOp, kvq::KeyNormOp, kvq::SinkSelectOp,
                 kvq::CacheUpdateOp, kvq::CacheAttendOp>(ctx);
  });
}
