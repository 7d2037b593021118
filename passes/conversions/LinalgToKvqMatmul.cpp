//===- LinalgToKvqMatmul.cpp - dense layers to kvq_matmul calls -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// convert-linalg-to-kvq-matmul: a linalg contraction on buffers that is a
// dense layer (y[m][n] += sum_k x[m][k] * w[n][k], weights [out][in])
// becomes one call of kvq_matmul on pointers and strides taken from the
// buffers' strided metadata. What the pass accepts is in Passes.td; every
// condition is checked here before anything is rewritten, so an op that
// fails one is left to convert-linalg-to-loops unchanged.
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"
#include "passes/conversions/RuntimeABI.h"

#include "kvq/runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <optional>

namespace mlir::kvq {
#define GEN_PASS_DEF_CONVERTLINALGTOKVQMATMUL
#include "kvq/passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {

/// One operand of the call: which linalg operand, and the positions of its
/// row and inner dimensions in the buffer (row absent for a vector).
struct Operand {
  Value buffer;
  std::optional<unsigned> rowPos;
  unsigned innerPos;
};

/// A matched dense layer.
struct Layer {
  Operand x, w, y;
  kvq_weight_type weightType;
};

/// The position of loop dimension `dim` among `map`'s results.
std::optional<unsigned> positionOf(AffineMap map, unsigned dim) {
  for (auto [i, e] : llvm::enumerate(map.getResults()))
    if (auto d = dyn_cast<AffineDimExpr>(e); d && d.getPosition() == dim)
      return unsigned(i);
  return std::nullopt;
}

/// `map` is exactly (row?, inner): the operand's layout as the call needs
/// it, when its inner dimension has unit stride.
std::optional<Operand> operandOf(Value buffer, AffineMap map,
                                 std::optional<unsigned> row, unsigned inner) {
  unsigned rank = row ? 2 : 1;
  if (map.getNumResults() != rank)
    return std::nullopt;
  std::optional<unsigned> innerPos = positionOf(map, inner);
  if (!innerPos || *innerPos != rank - 1)
    return std::nullopt;
  std::optional<unsigned> rowPos;
  if (row) {
    rowPos = positionOf(map, *row);
    if (!rowPos || *rowPos != 0)
      return std::nullopt;
  }
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type)
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      strides[*innerPos] != 1)
    return std::nullopt;
  return Operand{buffer, rowPos, *innerPos};
}

/// The weight type of w's block argument: f32 used as is, or f16/bf16
/// widened by one arith.extf (returned in *widened).
std::optional<kvq_weight_type> weightTypeOf(Value wArg, Value operand,
                                            Operation **widened) {
  Type element = wArg.getType();
  *widened = nullptr;
  if (operand == wArg)
    return element.isF32() ? std::optional(KVQ_WEIGHT_F32) : std::nullopt;
  auto ext = operand.getDefiningOp<arith::ExtFOp>();
  if (!ext || ext.getIn() != wArg || !ext.getType().isF32())
    return std::nullopt;
  *widened = ext;
  if (element.isF16())
    return KVQ_WEIGHT_F16;
  if (element.isBF16())
    return KVQ_WEIGHT_BF16;
  return std::nullopt;
}

/// The body is exactly acc + x * w (w possibly widened): returns the
/// weight type, given which block argument is x and which w.
std::optional<kvq_weight_type> contractionBody(Block &body, unsigned xArg,
                                               unsigned wArg) {
  auto yield = dyn_cast<linalg::YieldOp>(body.getTerminator());
  if (!yield || yield.getNumOperands() != 1)
    return std::nullopt;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return std::nullopt;
  Value acc = body.getArgument(2);
  Value product;
  if (add.getLhs() == acc)
    product = add.getRhs();
  else if (add.getRhs() == acc)
    product = add.getLhs();
  else
    return std::nullopt;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &body || !mul.getType().isF32())
    return std::nullopt;
  Value x = body.getArgument(xArg), w = body.getArgument(wArg);
  Value other;
  if (mul.getLhs() == x)
    other = mul.getRhs();
  else if (mul.getRhs() == x)
    other = mul.getLhs();
  else
    return std::nullopt;
  if (!x.getType().isF32())
    return std::nullopt;
  Operation *widened;
  std::optional<kvq_weight_type> type = weightTypeOf(w, other, &widened);
  // Nothing else in the body: add, mul, the widening, the yield.
  size_t expected = 3 + (widened ? 1 : 0);
  if (!type || body.getOperations().size() != expected)
    return std::nullopt;
  return type;
}

/// The buffer `v` views (through subviews, reshapes, casts).
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

std::optional<Layer> matchLayer(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op->getNumRegions() != 1)
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || !dims->batch.empty() || dims->k.size() != 1)
    return std::nullopt;
  // x is the input with the output's row dimension (if any) and k; w the
  // one with the output's inner dimension and k.
  unsigned xIndex, wIndex, nDim, kDim = dims->k[0];
  std::optional<unsigned> mDim;
  if (dims->n.size() == 1 && dims->m.size() <= 1) {
    xIndex = 0, wIndex = 1, nDim = dims->n[0];
    if (!dims->m.empty())
      mDim = dims->m[0];
  } else if (dims->n.empty() && dims->m.size() == 1) {
    xIndex = 1, wIndex = 0, nDim = dims->m[0];
  } else {
    return std::nullopt;
  }
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  OpOperand *xOperand = op.getDpsInputOperand(xIndex);
  OpOperand *wOperand = op.getDpsInputOperand(wIndex);
  OpOperand *yOperand = op.getDpsInitOperand(0);
  std::optional<Operand> x =
      operandOf(xOperand->get(), maps[xIndex], mDim, kDim);
  std::optional<Operand> w =
      operandOf(wOperand->get(), maps[wIndex], nDim, kDim);
  std::optional<Operand> y = operandOf(yOperand->get(), maps[2], mDim, nDim);
  if (!x || !w || !y ||
      !cast<MemRefType>(y->buffer.getType()).getElementType().isF32())
    return std::nullopt;
  std::optional<kvq_weight_type> type =
      contractionBody(op->getRegion(0).front(), xIndex, wIndex);
  if (!type)
    return std::nullopt;
  // y must not overlap x or w: the call reads them while it writes y.
  Value yRoot = rootOf(y->buffer);
  if (!isa_and_nonnull<memref::AllocOp, memref::AllocaOp>(
          yRoot.getDefiningOp()) ||
      yRoot == rootOf(x->buffer) || yRoot == rootOf(w->buffer))
    return std::nullopt;
  return Layer{*x, *w, *y, *type};
}

/// Pointer, row stride and sizes of one operand, from its metadata.
struct Strided {
  Value pointer, rowStride;
  SmallVector<Value> sizes;
};

Strided stridedOf(OpBuilder &b, Location loc, const Operand &operand,
                  int64_t elementBytes) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, operand.buffer);
  Type i64 = b.getI64Type();
  auto toI64 = [&](Value index) {
    return arith::IndexCastOp::create(b, loc, i64, index).getResult();
  };
  Value base = toI64(memref::ExtractAlignedPointerAsIndexOp::create(
      b, loc, meta.getBaseBuffer()));
  Value offsetBytes = arith::MulIOp::create(
      b, loc, toI64(meta.getOffset()),
      arith::ConstantIntOp::create(b, loc, elementBytes, 64));
  Value address = arith::AddIOp::create(b, loc, base, offsetBytes);
  Strided s;
  s.pointer = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
  for (Value size : meta.getSizes())
    s.sizes.push_back(toI64(size));
  if (operand.rowPos)
    s.rowStride = toI64(meta.getStrides()[*operand.rowPos]);
  return s;
}

struct ConvertLinalgToKvqMatmulPass
    : public mlir::kvq::impl::ConvertLinalgToKvqMatmulBase<
          ConvertLinalgToKvqMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<linalg::LinalgOp, Layer>> layers;
    module.walk([&](linalg::LinalgOp op) {
      if (std::optional<Layer> layer = matchLayer(op))
        layers.push_back({op, *layer});
    });
    for (auto &[op, layer] : layers)
      rewrite(op, layer);
  }

  void rewrite(linalg::LinalgOp op, const Layer &layer) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t wBytes = layer.weightType == KVQ_WEIGHT_F32 ? 4 : 2;
    Strided x = stridedOf(b, loc, layer.x, 4);
    Strided w = stridedOf(b, loc, layer.w, wBytes);
    Strided y = stridedOf(b, loc, layer.y, 4);
    auto i64 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
    };
    Value k = x.sizes[layer.x.innerPos];
    Value n = w.sizes[*layer.w.rowPos];
    Value m = layer.x.rowPos ? x.sizes[*layer.x.rowPos] : i64(1);
    // A vector x or y is one row: its stride only has to cover it.
    Value xStride = layer.x.rowPos ? x.rowStride : k;
    Value yStride = layer.y.rowPos ? y.rowStride : n;
    func::FuncOp callee = getOrInsertRuntimeDecl(b, getOperation(),
                                                 RuntimeFn::Matmul,
                                                 RuntimeTarget::CPU);
    Value wType = arith::ConstantIntOp::create(b, loc, layer.weightType, 32);
    Value status =
        func::CallOp::create(b, loc, callee,
                             ValueRange{x.pointer, xStride, w.pointer, wType,
                                        w.rowStride, y.pointer, yStride, m, n,
                                        k})
            .getResult(0);
    createStatusCheck(b, op, RuntimeFn::Matmul, RuntimeTarget::CPU, status,
                      onError == OnRuntimeError::Abort);
    op->erase();
  }
};

} // namespace
