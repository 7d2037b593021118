//===- KvqToRuntime.cpp - kvq ops to calls of the kvq runtime -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// convert-kvq-to-runtime: every kvq op (memref form, after bufferization)
// becomes a call of the runtime entry point that RuntimeABI.cpp names for
// the target, on bare pointers and scalars, so the C ABI of runtime.h is
// called as written. !kvq.cache becomes an opaque !llvm.ptr. Every returned
// status goes through kvq_check_status and, with on-error=abort, a
// cf.assert: no failure passes silently.
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"
#include "passes/conversions/RuntimeABI.h"

#include "dialect/RuntimeFields.h"

#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

namespace mlir::kvq {
#define GEN_PASS_DEF_CONVERTKVQTORUNTIME
#include "kvq/passes/Passes.h.inc"
} // namespace mlir::kvq

using namespace mlir;
using namespace mlir::kvq;

namespace {

/// What every pattern needs to know about the conversion.
struct LoweringOptions {
  RuntimeTarget target;
  bool abortOnError;
};

//===----------------------------------------------------------------------===//
// Call building
//===----------------------------------------------------------------------===//

/// The dimension a group runs along in a buffer of rank `rank`.
int64_t groupedDim(QuantAxis axis, int64_t rank) {
  return axis == QuantAxis::PerToken ? rank - 1 : 0;
}

/// The size one dimension of a buffer must have: dimension `sourceDim` of
/// the op's source buffer divided by `divisor`, or, with no source
/// dimension (-1), the fixed size `fixed`.
struct ExpectedSize {
  int64_t sourceDim;
  int64_t divisor = 1;
  int64_t fixed = 0;
};

/// The shape of `source`, dimensions `from` and after.
SmallVector<ExpectedSize> sameShape(Value source, int64_t from = 0) {
  SmallVector<ExpectedSize> shape;
  for (int64_t d = from, e = cast<MemRefType>(source.getType()).getRank();
       d < e; ++d)
    shape.push_back({d});
  return shape;
}

/// The shape of per-group values (scales, zeros, thresholds) of `source`
/// grouped by `group` along `axis`, with a trailing level table of
/// `levels` entries when `levels` > 0.
SmallVector<ExpectedSize> perGroupShape(Value source, QuantAxis axis,
                                        int64_t group, int64_t levels = 0) {
  SmallVector<ExpectedSize> shape = sameShape(source);
  shape[groupedDim(axis, shape.size())].divisor = group;
  if (levels > 0)
    shape.push_back({-1, 1, levels});
  return shape;
}

/// Emits runtime calls and the values they take at one insertion point.
class CallBuilder {
public:
  CallBuilder(ConversionPatternRewriter &rewriter, Operation *op,
              const LoweringOptions &options)
      : rewriter(rewriter), op(op), loc(op->getLoc()), options(options),
        module(op->getParentOfType<ModuleOp>()) {}

  Value i32(int64_t value) {
    // The verifiers bound every attribute that reaches an int32_t parameter
    // (test/dialect/invalid-abi-ints.mlir).
    assert(value >= INT32_MIN && value <= INT32_MAX && "truncated ABI value");
    return arith::ConstantIntOp::create(rewriter, loc, value, 32);
  }
  Value i64(int64_t value) {
    return arith::ConstantIntOp::create(rewriter, loc, value, 64);
  }
  Value f32(double value) {
    return arith::ConstantFloatOp::create(rewriter, loc, rewriter.getF32Type(),
                                          APFloat(float(value)));
  }
  /// A C scalar as the constant of its ABI type.
  Value scalar(int32_t value) { return i32(value); }
  Value scalar(float value) { return f32(value); }
  Value indexToI64(Value index) {
    return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                      index);
  }
  Value null() {
    return LLVM::ZeroOp::create(rewriter, loc,
                                LLVM::LLVMPointerType::get(op->getContext()));
  }

  /// The runtime's dtype code of an f16/f32 buffer.
  Value dtypeOf(Value memref) {
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    return i32(element.isF16() ? KVQ_DTYPE_F16 : KVQ_DTYPE_F32);
  }

  /// The address of the first element of `memref`. The runtime takes dense
  /// row-major buffers, so a memref with another layout is first copied to
  /// an identity-layout one.
  Value pointerTo(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    if (!type.getLayout().isIdentity()) {
      auto dense = MemRefType::get(type.getShape(), type.getElementType());
      Value copy =
          memref::AllocOp::create(rewriter, loc, dense, dynamicDimsOf(memref));
      memref::CopyOp::create(rewriter, loc, memref, copy);
      temporaries.push_back(copy);
      memref = copy;
    }
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, memref);
    return LLVM::IntToPtrOp::create(
        rewriter, loc, LLVM::LLVMPointerType::get(op->getContext()),
        indexToI64(address));
  }
  Value pointerOrNull(Value memref) {
    return memref ? pointerTo(memref) : null();
  }

  /// Size of dimension `dim` of `memref` as i64.
  Value dimI64(Value memref, int64_t dim) {
    auto type = cast<MemRefType>(memref.getType());
    if (!type.isDynamicDim(dim))
      return i64(type.getDimSize(dim));
    return indexToI64(memref::DimOp::create(rewriter, loc, memref, dim));
  }

  /// Size of dimension `dim` of `memref` as the i32 a runtime parameter
  /// takes. A dynamic size is checked at run time (cf.assert: it must fit
  /// in i32, the runtime then applies its own bounds) before it is
  /// truncated; a static size that does not fit is an error here. Either
  /// way no size is truncated in silence.
  FailureOr<Value> dimI32(Value memref, int64_t dim) {
    auto type = cast<MemRefType>(memref.getType());
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (!type.isDynamicDim(dim)) {
      if (type.getDimSize(dim) > kMax)
        return op->emitOpError()
               << "dimension " << dim << " of size " << type.getDimSize(dim)
               << " does not fit the runtime's 32-bit parameter";
      return i32(type.getDimSize(dim));
    }
    Value size = dimI64(memref, dim);
    Value fits = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ule,
                                       size, i64(kMax));
    cf::AssertOp::create(rewriter, loc, fits,
                         "kvq: dimension " + std::to_string(dim) + " of " +
                             op->getName().getStringRef().str() +
                             " does not fit the runtime's 32-bit parameter");
    return arith::TruncIOp::create(rewriter, loc, rewriter.getI32Type(), size)
        .getResult();
  }

  /// [rows, cols] of the runtime's matrix view: dim 0 by the product of the
  /// other dimensions.
  std::pair<Value, Value> matrixOf(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    Value rows = dimI64(memref, 0);
    int64_t staticCols = 1;
    SmallVector<int64_t> dynamicCols;
    for (int64_t d = 1, e = type.getRank(); d < e; ++d) {
      if (type.isDynamicDim(d))
        dynamicCols.push_back(d);
      else
        staticCols *= type.getDimSize(d);
    }
    Value cols = i64(staticCols);
    for (int64_t d : dynamicCols)
      cols = arith::MulIOp::create(rewriter, loc, cols, dimI64(memref, d));
    return {rows, cols};
  }

  /// The dynamic sizes of `memref`, as memref.alloc wants them.
  SmallVector<Value> dynamicDimsOf(Value memref) {
    SmallVector<Value> sizes;
    auto type = cast<MemRefType>(memref.getType());
    for (int64_t d = 0, e = type.getRank(); d < e; ++d)
      if (type.isDynamicDim(d))
        sizes.push_back(memref::DimOp::create(rewriter, loc, memref, d));
    return sizes;
  }

  /// Size `expected` stands for, as an index: a constant when it is fixed
  /// or when the source dimension it divides is static.
  Value sizeOf(Value source, ExpectedSize expected) {
    auto type = cast<MemRefType>(source.getType());
    if (expected.sourceDim < 0)
      return arith::ConstantIndexOp::create(rewriter, loc, expected.fixed);
    if (!type.isDynamicDim(expected.sourceDim))
      return arith::ConstantIndexOp::create(
          rewriter, loc,
          type.getDimSize(expected.sourceDim) / expected.divisor);
    Value size =
        memref::DimOp::create(rewriter, loc, source, expected.sourceDim);
    if (expected.divisor == 1)
      return size;
    Value divisor =
        arith::ConstantIndexOp::create(rewriter, loc, expected.divisor);
    return arith::DivUIOp::create(rewriter, loc, size, divisor);
  }

  /// A fresh buffer of `type` whose dynamic sizes are `shape` (sizes of
  /// `source`).
  Value allocShaped(Type type, Value source, ArrayRef<ExpectedSize> shape) {
    auto memrefType = cast<MemRefType>(type);
    SmallVector<Value> sizes;
    for (int64_t d = 0, e = memrefType.getRank(); d < e; ++d)
      if (memrefType.isDynamicDim(d))
        sizes.push_back(sizeOf(source, shape[d]));
    return memref::AllocOp::create(rewriter, loc, memrefType, sizes);
  }

  /// A fresh buffer of `type` with the shape of `source`.
  Value allocLike(Type type, Value source) {
    return allocShaped(type, source, sameShape(source));
  }

  /// The verifier compares static sizes; where a size is dynamic it can only
  /// find shapes compatible, while the runtime derives every buffer's extent
  /// from the source's. So each size of `buffer` (an operand) that must
  /// equal `shape` is checked when the program runs (cf.assert) if either
  /// side is dynamic: a mismatch would let the runtime read or write past a
  /// buffer.
  void assertShape(Value source, Value buffer, ArrayRef<ExpectedSize> shape,
                   StringRef what) {
    assertSizes(source, cast<MemRefType>(buffer.getType()), buffer, shape,
                what);
  }

  /// The same for a result of `type`, before it is allocated by
  /// allocShaped: only its static sizes can disagree with a dynamic source.
  void assertResultShape(Value source, Type type, ArrayRef<ExpectedSize> shape,
                         StringRef what) {
    assertSizes(source, cast<MemRefType>(type), Value(), shape, what);
  }

  /// A dynamic per-token grouped dimension must be a multiple of `group`:
  /// the runtime sees only the product of the non-token dimensions, so a
  /// group could otherwise straddle two rows of the last dimension and the
  /// runtime write more per-group values than the buffers hold. (Per
  /// channel, the runtime checks the token dimension itself.)
  void assertGroupsDivide(Value source, QuantAxis axis, int64_t group) {
    auto type = cast<MemRefType>(source.getType());
    int64_t dim = groupedDim(axis, type.getRank());
    if (axis != QuantAxis::PerToken || !type.isDynamicDim(dim))
      return;
    Value size = memref::DimOp::create(rewriter, loc, source, dim);
    Value rest = arith::RemUIOp::create(
        rewriter, loc, size,
        arith::ConstantIndexOp::create(rewriter, loc, group));
    Value divides =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, rest,
                              arith::ConstantIndexOp::create(rewriter, loc, 0));
    cf::AssertOp::create(rewriter, loc, divides,
                         "kvq: " + op->getName().getStringRef().str() +
                             ": group size " + std::to_string(group) +
                             " does not divide dimension " +
                             std::to_string(dim));
  }

  /// Calls `fn` with `args` (the Metal context is prepended where the
  /// target needs it) and checks the status it returns. Returns the call's
  /// result, if any.
  Value call(RuntimeFn fn, ValueRange args) {
    SmallVector<Value> operands;
    if (takesMetalContext(fn, options.target))
      operands.push_back(plainCall(RuntimeFn::MetalContext, {}));
    llvm::append_range(operands, args);
    Value result = plainCall(fn, operands);
    // Dense copies made for this call's arguments die with it.
    for (Value temporary : temporaries)
      memref::DeallocOp::create(rewriter, loc, temporary);
    temporaries.clear();
    if (returnsStatus(fn))
      checkStatus(fn, result);
    return result;
  }

private:
  void assertSizes(Value source, MemRefType type, Value buffer,
                   ArrayRef<ExpectedSize> shape, StringRef what) {
    auto sourceType = cast<MemRefType>(source.getType());
    for (int64_t d = 0, e = type.getRank(); d < e; ++d) {
      ExpectedSize expected = shape[d];
      bool expectedStatic = expected.sourceDim < 0 ||
                            !sourceType.isDynamicDim(expected.sourceDim);
      // Static on both sides: the verifier has compared them. A dynamic
      // result size is allocated from the source, and a size of the source
      // itself is its own: equal by construction.
      if ((!type.isDynamicDim(d) && expectedStatic) ||
          (!buffer && type.isDynamicDim(d)) ||
          (buffer == source && expected.sourceDim == d))
        continue;
      Value actual =
          buffer && type.isDynamicDim(d)
              ? Value(memref::DimOp::create(rewriter, loc, buffer, d))
              : Value(arith::ConstantIndexOp::create(rewriter, loc,
                                                     type.getDimSize(d)));
      Value same =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, actual,
                                sizeOf(source, expected));
      cf::AssertOp::create(rewriter, loc, same,
                           "kvq: " + op->getName().getStringRef().str() + ": " +
                               what.str() + " dimension " + std::to_string(d) +
                               " has the wrong size");
    }
  }

  Value plainCall(RuntimeFn fn, ValueRange args) {
    func::FuncOp callee =
        getOrInsertRuntimeDecl(rewriter, module, fn, options.target);
    auto call = func::CallOp::create(rewriter, loc, callee, args);
    return call.getNumResults() ? call.getResult(0) : Value();
  }

  /// kvq_check_status(status, "<op> at <loc>") reports and records any
  /// failure; with on-error=abort the program then stops at a cf.assert.
  void checkStatus(RuntimeFn fn, Value status) {
    createStatusCheck(rewriter, op, fn, options.target, status,
                      options.abortOnError);
  }

  ConversionPatternRewriter &rewriter;
  SmallVector<Value> temporaries;
  Operation *op;
  Location loc;
  const LoweringOptions &options;
  ModuleOp module;
};

/// The runtime's code of a quantization axis.
int32_t axisCode(QuantAxis axis) {
  return axis == QuantAxis::PerToken ? KVQ_AXIS_PER_TOKEN
                                     : KVQ_AXIS_PER_CHANNEL;
}

/// Base of every kvq lowering: the options and a memref-form check (the
/// tensor forms must be bufferized first).
template <typename OpTy> struct KvqLowering : public OpConversionPattern<OpTy> {
  KvqLowering(const TypeConverter &converter, MLIRContext *context,
              const LoweringOptions &options)
      : OpConversionPattern<OpTy>(converter, context), options(options) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    for (Type type : op->getOperandTypes())
      if (isa<TensorType>(type))
        return rewriter.notifyMatchFailure(
            op, "tensor form: run --one-shot-bufferize first");
    CallBuilder builder(rewriter, op, options);
    return lower(op, adaptor, builder, rewriter);
  }

  virtual LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor,
                              CallBuilder &b,
                              ConversionPatternRewriter &rewriter) const = 0;

  const LoweringOptions &options;
};

//===----------------------------------------------------------------------===//
// Conversion patterns: primitive ops
//===----------------------------------------------------------------------===//

/// kvq.group_quant -> kvq_group_quant into fresh codes/scale/zero buffers.
struct GroupQuantLowering : KvqLowering<GroupQuantOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(GroupQuantOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value input = adaptor.getInput();
    SmallVector<ExpectedSize> same = sameShape(input),
                              grouped = perGroupShape(input, op.getAxis(),
                                                      op.getGroup());
    b.assertGroupsDivide(input, op.getAxis(), op.getGroup());
    if (adaptor.getExclude())
      b.assertShape(input, adaptor.getExclude(), same, "exclude mask");
    b.assertResultShape(input, op.getCodes().getType(), same, "codes");
    b.assertResultShape(input, op.getScale().getType(), grouped, "scale");
    b.assertResultShape(input, op.getZeroPoint().getType(), grouped,
                        "zero point");
    Value codes = b.allocShaped(op.getCodes().getType(), input, same);
    Value scale = b.allocShaped(op.getScale().getType(), input, grouped);
    Value zero = b.allocShaped(op.getZeroPoint().getType(), input, grouped);
    auto [rows, cols] = b.matrixOf(input);
    b.call(RuntimeFn::GroupQuant,
           {b.pointerTo(input), b.dtypeOf(input), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.i32(op.getBits()), b.pointerOrNull(adaptor.getExclude()),
            b.i32(KVQ_CODES_UNPACKED), b.pointerTo(codes), b.pointerTo(scale),
            b.pointerTo(zero)});
    rewriter.replaceOp(op, {codes, scale, zero});
    return success();
  }
};

/// kvq.group_dequant -> kvq_group_dequant into a fresh output buffer.
struct GroupDequantLowering : KvqLowering<GroupDequantOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(GroupDequantOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value codes = adaptor.getCodes();
    SmallVector<ExpectedSize> same = sameShape(codes),
                              grouped = perGroupShape(codes, op.getAxis(),
                                                      op.getGroup());
    b.assertGroupsDivide(codes, op.getAxis(), op.getGroup());
    b.assertShape(codes, adaptor.getScale(), grouped, "scale");
    b.assertShape(codes, adaptor.getZeroPoint(), grouped, "zero point");
    b.assertResultShape(codes, op.getOutput().getType(), same, "output");
    Value out = b.allocShaped(op.getOutput().getType(), codes, same);
    auto [rows, cols] = b.matrixOf(codes);
    b.call(RuntimeFn::GroupDequant,
           {b.pointerTo(codes), b.i32(KVQ_CODES_UNPACKED),
            b.pointerTo(adaptor.getScale()),
            b.pointerTo(adaptor.getZeroPoint()), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.i32(op.getBits()), b.pointerTo(out), b.dtypeOf(out)});
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// kvq.nuq_fit -> kvq_nuq_fit with a scratch buffer sized by the runtime
/// (kernels never allocate) and freed right after.
struct NuqFitLowering : KvqLowering<NuqFitOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(NuqFitOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    // The level table's trailing size is 2^bits, not a size of the input.
    SmallVector<ExpectedSize> tables = perGroupShape(
        input, op.getAxis(), op.getGroup(), int64_t{1} << op.getBits());
    b.assertGroupsDivide(input, op.getAxis(), op.getGroup());
    if (adaptor.getExclude())
      b.assertShape(input, adaptor.getExclude(), sameShape(input),
                    "exclude mask");
    b.assertResultShape(input, op.getLevels().getType(), tables, "levels");
    Value levels = b.allocShaped(op.getLevels().getType(), input, tables);
    Value scratchFloats = b.call(RuntimeFn::NuqFitScratchSize,
                                 {b.i64(op.getGroup()), b.i32(op.getBits())});
    Value scratchSize = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getIndexType(), scratchFloats);
    Value scratch = memref::AllocOp::create(
        rewriter, loc,
        MemRefType::get({ShapedType::kDynamic}, rewriter.getF32Type()),
        ValueRange{scratchSize});
    auto [rows, cols] = b.matrixOf(input);
    b.call(RuntimeFn::NuqFit,
           {b.pointerTo(input), b.dtypeOf(input), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.i32(op.getBits()), b.i32(op.getIters()),
            b.pointerOrNull(adaptor.getExclude()), b.pointerTo(scratch),
            scratchFloats, b.pointerTo(levels)});
    memref::DeallocOp::create(rewriter, loc, scratch);
    rewriter.replaceOp(op, levels);
    return success();
  }
};

/// kvq.nuq_quant -> kvq_nuq_quant into fresh unpacked codes.
struct NuqQuantLowering : KvqLowering<NuqQuantOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(NuqQuantOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value input = adaptor.getInput();
    b.assertGroupsDivide(input, op.getAxis(), op.getGroup());
    b.assertShape(input, adaptor.getLevels(),
                  perGroupShape(input, op.getAxis(), op.getGroup(),
                                int64_t{1} << op.getBits()),
                  "levels");
    b.assertResultShape(input, op.getCodes().getType(), sameShape(input),
                        "codes");
    Value codes = b.allocLike(op.getCodes().getType(), input);
    auto [rows, cols] = b.matrixOf(input);
    b.call(RuntimeFn::NuqQuant,
           {b.pointerTo(input), b.dtypeOf(input), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.i32(op.getBits()), b.pointerTo(adaptor.getLevels()),
            b.i32(KVQ_CODES_UNPACKED), b.pointerTo(codes)});
    rewriter.replaceOp(op, codes);
    return success();
  }
};

/// kvq.nuq_dequant -> kvq_nuq_dequant (table lookup) into a fresh buffer.
struct NuqDequantLowering : KvqLowering<NuqDequantOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(NuqDequantOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value codes = adaptor.getCodes();
    b.assertGroupsDivide(codes, op.getAxis(), op.getGroup());
    b.assertShape(codes, adaptor.getLevels(),
                  perGroupShape(codes, op.getAxis(), op.getGroup(),
                                int64_t{1} << op.getBits()),
                  "levels");
    b.assertResultShape(codes, op.getOutput().getType(), sameShape(codes),
                        "output");
    Value out = b.allocLike(op.getOutput().getType(), codes);
    auto [rows, cols] = b.matrixOf(codes);
    b.call(RuntimeFn::NuqDequant,
           {b.pointerTo(codes), b.i32(KVQ_CODES_UNPACKED),
            b.pointerTo(adaptor.getLevels()), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.i32(op.getBits()), b.pointerTo(out), b.dtypeOf(out)});
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// kvq.outlier_split -> kvq_outlier_split into a fresh mask and thresholds.
struct OutlierSplitLowering : KvqLowering<OutlierSplitOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(OutlierSplitOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value input = adaptor.getInput();
    SmallVector<ExpectedSize> same = sameShape(input),
                              grouped = perGroupShape(input, op.getAxis(),
                                                      op.getGroup());
    b.assertGroupsDivide(input, op.getAxis(), op.getGroup());
    if (adaptor.getExclude())
      b.assertShape(input, adaptor.getExclude(), same, "exclude mask");
    b.assertResultShape(input, op.getMask().getType(), same, "mask");
    b.assertResultShape(input, op.getThreshold().getType(), grouped,
                        "threshold");
    Value mask = b.allocShaped(op.getMask().getType(), input, same);
    Value threshold =
        b.allocShaped(op.getThreshold().getType(), input, grouped);
    auto [rows, cols] = b.matrixOf(input);
    b.call(RuntimeFn::OutlierSplit,
           {b.pointerTo(input), b.dtypeOf(input), rows, cols,
            b.i32(axisCode(op.getAxis())), b.i32(op.getGroup()),
            b.f32(op.getFraction().convertToDouble()),
            b.pointerOrNull(adaptor.getExclude()), b.pointerTo(mask),
            b.pointerTo(threshold)});
    rewriter.replaceOp(op, {mask, threshold});
    return success();
  }
};

/// kvq.outlier_screen -> kvq_outlier_screen into a fresh mask.
struct OutlierScreenLowering : KvqLowering<OutlierScreenOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(OutlierScreenOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value input = adaptor.getInput();
    // One threshold per column: the input's shape without its token
    // dimension.
    b.assertShape(input, adaptor.getThreshold(), sameShape(input, 1),
                  "threshold");
    b.assertResultShape(input, op.getMask().getType(), sameShape(input),
                        "mask");
    Value mask = b.allocLike(op.getMask().getType(), input);
    auto [rows, cols] = b.matrixOf(input);
    b.call(RuntimeFn::OutlierScreen,
           {b.pointerTo(input), b.dtypeOf(input), rows, cols,
            b.pointerTo(adaptor.getThreshold()), b.pointerTo(mask)});
    rewriter.replaceOp(op, mask);
    return success();
  }
};

/// kvq.key_norm -> kvq_key_norm into a fresh [tokens] buffer.
struct KeyNormLowering : KvqLowering<KeyNormOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(KeyNormOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value keys = adaptor.getKeys();
    // kv_heads and head_dim may be dynamic: read them from the buffer (a
    // static constant from getDimSize would be -1 here).
    FailureOr<Value> heads = b.dimI32(keys, 1), dim = b.dimI32(keys, 2);
    if (failed(heads) || failed(dim))
      return failure();
    b.assertResultShape(keys, op.getNorms().getType(), sameShape(keys),
                        "norms");
    Value norms = b.allocLike(op.getNorms().getType(), keys);
    b.call(RuntimeFn::KeyNorm,
           {b.pointerTo(keys), b.dtypeOf(keys), b.dimI64(keys, 0), *heads, *dim,
            b.pointerTo(norms)});
    rewriter.replaceOp(op, norms);
    return success();
  }
};

/// kvq.sink_select -> kvq_sink_select into a fresh [count] buffer.
struct SinkSelectLowering : KvqLowering<SinkSelectOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(SinkSelectOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value norms = adaptor.getNorms();
    // `count` positions, not one per token; the runtime refuses a count
    // above a dynamic token count itself.
    ExpectedSize count{-1, 1, int64_t(op.getCount())};
    Value positions = b.allocShaped(op.getPositions().getType(), norms, count);
    b.call(RuntimeFn::SinkSelect,
           {b.pointerTo(norms), b.dimI64(norms, 0), b.i32(op.getCount()),
            b.pointerTo(positions)});
    rewriter.replaceOp(op, positions);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Conversion patterns: cache ops
//===----------------------------------------------------------------------===//

/// A one-slot i64 stack buffer for runtime out-parameters.
Value allocaSlot(ConversionPatternRewriter &rewriter, Location loc,
                 int64_t slots = 1) {
  return memref::AllocaOp::create(
      rewriter, loc, MemRefType::get({slots}, rewriter.getI64Type()));
}

Value loadSlot(ConversionPatternRewriter &rewriter, Location loc, Value slot,
               int64_t index) {
  Value i = arith::ConstantIndexOp::create(rewriter, loc, index);
  return memref::LoadOp::create(rewriter, loc, slot, ValueRange{i});
}

/// kvq.cache_create -> kvq_cache_create_flat with the type's configuration.
struct CacheCreateLowering : KvqLowering<CacheCreateOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheCreateOp op, OpAdaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    CacheType type = op.getCache().getType();
    CacheConfigAttr c = type.getConfig();
    Value slot = allocaSlot(rewriter, loc);
    int32_t backend = options.target == RuntimeTarget::Metal ? KVQ_BACKEND_METAL
                                                             : KVQ_BACKEND_CPU;
    // The fields as the verifier judged them (runtimeFields: n_sink_tokens
    // defaulted per method, no RoPE as KVQ_ROPE_NONE), one operand per
    // kvq_config field in the flat constructor's order.
    const kvq_config cfg = ::kvq::runtimeConfig(
        runtimeFields(c),
        ::kvq::CacheShape{type.getLayers(), type.getKvHeads(),
                          type.getHeadDim()},
        backend);
    SmallVector<Value> operands;
#define KVQ_OPERAND(type, name) operands.push_back(b.scalar(cfg.name));
    KVQ_CONFIG_FIELDS(KVQ_OPERAND)
#undef KVQ_OPERAND
    operands.push_back(b.pointerTo(slot));
    b.call(RuntimeFn::CacheCreate, operands);
    Value handle = LLVM::IntToPtrOp::create(
        rewriter, loc, LLVM::LLVMPointerType::get(op.getContext()),
        loadSlot(rewriter, loc, slot, 0));
    rewriter.replaceOp(op, handle);
    return success();
  }
};

/// kvq.cache_destroy -> kvq_cache_destroy.
struct CacheDestroyLowering : KvqLowering<CacheDestroyOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheDestroyOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    b.call(RuntimeFn::CacheDestroy, {adaptor.getCache()});
    rewriter.eraseOp(op);
    return success();
  }
};

/// kvq.cache_update -> kvq_cache_update; the fetch form then asks the
/// length, allocates [length, heads, head_dim] K and V and fetches into
/// them.
struct CacheUpdateLowering : KvqLowering<CacheUpdateOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheUpdateOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value cache = adaptor.getCache();
    Value keys = adaptor.getKeys();
    Value layer = b.i32(op.getLayer());
    // The runtime reads [tokens, kv_heads, head_dim] of the cache's shape
    // from keys and values alike, tokens being the keys'.
    CacheType cacheType = op.getCache().getType();
    SmallVector<ExpectedSize> kv = {
        {0}, {-1, 1, cacheType.getKvHeads()}, {-1, 1, cacheType.getHeadDim()}};
    b.assertShape(keys, keys, kv, "keys");
    b.assertShape(keys, adaptor.getValues(), kv, "values");
    b.call(RuntimeFn::CacheUpdate,
           {cache, layer, b.pointerTo(keys), b.pointerTo(adaptor.getValues()),
            b.dimI64(keys, 0), b.dtypeOf(keys)});
    if (op.getFetched().empty()) {
      rewriter.eraseOp(op);
      return success();
    }
    Value slot = allocaSlot(rewriter, loc);
    b.call(RuntimeFn::CacheLength, {cache, layer, b.pointerTo(slot)});
    Value length = loadSlot(rewriter, loc, slot, 0);
    Value lengthIndex = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getIndexType(), length);
    SmallVector<Value> fetched;
    for (Value result : op.getFetched()) {
      // [length, kv_heads, head_dim]; the last two may be dynamic in the
      // type but are the cache's.
      auto type = cast<MemRefType>(result.getType());
      SmallVector<Value> sizes;
      for (int64_t d = 0; d < 3; ++d)
        if (type.isDynamicDim(d))
          sizes.push_back(d == 0 ? lengthIndex
                                 : arith::ConstantIndexOp::create(rewriter, loc,
                                                                  kv[d].fixed));
      fetched.push_back(memref::AllocOp::create(rewriter, loc, type, sizes));
    }
    b.call(RuntimeFn::CacheFetch,
           {cache, layer, b.pointerTo(fetched[0]), b.pointerTo(fetched[1]),
            length, b.dtypeOf(fetched[0])});
    rewriter.replaceOp(op, fetched);
    return success();
  }
};

/// kvq.cache_attend -> kvq_cache_attend into a fresh output buffer.
struct CacheAttendLowering : KvqLowering<CacheAttendOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheAttendOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Value queries = adaptor.getQueries();
    FailureOr<Value> qHeads = b.dimI32(queries, 1);
    if (failed(qHeads))
      return failure();
    // The runtime reads queries of the cache's head_dim (and checks the
    // query heads against the KV heads itself).
    int64_t headDim = op.getCache().getType().getHeadDim();
    b.assertShape(queries, queries, {{0}, {1}, {-1, 1, headDim}}, "queries");
    b.assertResultShape(queries, op.getOutput().getType(), sameShape(queries),
                        "output");
    Value out = b.allocLike(op.getOutput().getType(), queries);
    b.call(RuntimeFn::CacheAttend,
           {adaptor.getCache(), b.i32(op.getLayer()), b.pointerTo(queries),
            b.dimI64(queries, 0), *qHeads, b.pointerTo(out)});
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// kvq.cache_stats -> kvq_cache_stats into a stack kvq_stats, then loads
/// of the four fields the op returns.
struct CacheStatsLowering : KvqLowering<CacheStatsOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheStatsOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value stats = allocaSlot(rewriter, loc, stats_slot::kCount);
    int64_t layer = op.getLayer() ? int64_t(*op.getLayer()) : -1;
    b.call(RuntimeFn::CacheStats,
           {adaptor.getCache(), b.i32(layer), b.pointerTo(stats)});
    Value bitsAsInt =
        loadSlot(rewriter, loc, stats, stats_slot::kEffectiveBits);
    Value bits = arith::BitcastOp::create(rewriter, loc, rewriter.getF64Type(),
                                          bitsAsInt);
    rewriter.replaceOp(
        op, {loadSlot(rewriter, loc, stats, stats_slot::kTokens),
             loadSlot(rewriter, loc, stats, stats_slot::kTotalBytes),
             loadSlot(rewriter, loc, stats, stats_slot::kFp16Bytes), bits});
    return success();
  }
};

/// kvq.cache_truncate -> kvq_cache_truncate (CPU only for now).
struct CacheTruncateLowering : KvqLowering<CacheTruncateOp> {
  using KvqLowering::KvqLowering;
  LogicalResult lower(CacheTruncateOp op, OpAdaptor adaptor, CallBuilder &b,
                      ConversionPatternRewriter &rewriter) const override {
    if (!hasRuntimeSymbol(RuntimeFn::CacheTruncate, options.target))
      return rewriter.notifyMatchFailure(op, "no entry point on this target");
    b.call(RuntimeFn::CacheTruncate,
           {adaptor.getCache(), adaptor.getNTokens()});
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertKvqToRuntimePass
    : public mlir::kvq::impl::ConvertKvqToRuntimeBase<ConvertKvqToRuntimePass> {
  using ConvertKvqToRuntimeBase::ConvertKvqToRuntimeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    LoweringOptions options;
    options.target = target;
    options.abortOnError = onError == OnRuntimeError::Abort;

    // Tensor forms have no buffers to pass: say so rather than "failed to
    // legalize".
    WalkResult tensors = module.walk([](Operation *op) {
      if (!isa<KvqDialect>(op->getDialect()))
        return WalkResult::advance();
      auto isTensor = [](Type type) { return isa<TensorType>(type); };
      if (llvm::any_of(op->getOperandTypes(), isTensor) ||
          llvm::any_of(op->getResultTypes(), isTensor)) {
        op->emitError("convert-kvq-to-runtime needs the memref form of kvq "
                      "ops; run --one-shot-bufferize first (or use "
                      "--kvq-to-llvm / --kvq-to-metal)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (tensors.wasInterrupted())
      return signalPassFailure();

    // An entry point the target's runtime lacks: say so rather than
    // "failed to legalize".
    WalkResult missing = module.walk([&](CacheTruncateOp op) {
      if (hasRuntimeSymbol(RuntimeFn::CacheTruncate, options.target))
        return WalkResult::advance();
      op.emitOpError() << "has no runtime entry point on the metal target "
                          "(the Metal runtime cannot truncate a cache yet)";
      return WalkResult::interrupt();
    });
    if (missing.wasInterrupted())
      return signalPassFailure();

    TypeConverter converter;
    converter.addConversion([](Type type) { return type; });
    converter.addConversion([context](CacheType) -> Type {
      return LLVM::LLVMPointerType::get(context);
    });

    ConversionTarget legality(*context);
    legality.addIllegalDialect<KvqDialect>();
    legality.addLegalDialect<arith::ArithDialect, cf::ControlFlowDialect,
                             LLVM::LLVMDialect, memref::MemRefDialect>();
    legality.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp func) {
      return converter.isSignatureLegal(func.getFunctionType()) &&
             converter.isLegal(&func.getBody());
    });
    legality.markUnknownOpDynamicallyLegal(
        [&](Operation *op) { return converter.isLegal(op); });

    RewritePatternSet patterns(context);
    populateKvqToRuntimePatterns(converter, patterns, options);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateBranchOpInterfaceTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversions(converter, patterns);

    if (failed(applyFullConversion(module, legality, std::move(patterns))))
      signalPassFailure();
  }

  static void populateKvqToRuntimePatterns(TypeConverter &converter,
                                           RewritePatternSet &patterns,
                                           const LoweringOptions &options) {
    // The options outlive the patterns: both die with runOnOperation.
    patterns
        .add<GroupQuantLowering, GroupDequantLowering, NuqFitLowering,
             NuqQuantLowering, NuqDequantLowering, OutlierSplitLowering,
             OutlierScreenLowering, KeyNormLowering, SinkSelectLowering,
             CacheCreateLowering, CacheDestroyLowering, CacheUpdateLowering,
             CacheAttendLowering, CacheStatsLowering, CacheTruncateLowering>(
            converter, patterns.getContext(), options);
  }
};

} // namespace
