//===- KvqOps.cpp - kvq op verifiers --------------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Cross-operand rules of the kvq ops. Every message names the offending
// value; test/dialect/invalid.mlir asserts each of them.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"

#include "kvq/config_limits.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::kvq;

#define GET_OP_CLASSES
#include "kvq/dialect/KvqOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared shape rules
//===----------------------------------------------------------------------===//

/// Prints a shape as `128x8x?` for diagnostics.
static std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "a scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << '?';
        else
          os << d;
      },
      "x");
  return text;
}

/// Operands and results are all tensors (a model graph) or all memrefs
/// (after bufferization); a mix has no meaning.
static LogicalResult verifyOneKind(Operation *op) {
  bool tensors = false, memrefs = false;
  auto note = [&](Type type) {
    tensors |= isa<TensorType>(type);
    memrefs |= isa<MemRefType>(type);
  };
  llvm::for_each(op->getOperandTypes(), note);
  llvm::for_each(op->getResultTypes(), note);
  if (tensors && memrefs)
    return op->emitOpError(
        "mixes tensors and memrefs; use all tensors or all memrefs");
  return success();
}

/// Memref operands are read; memref results are fresh allocations the op
/// fills. Tensor forms have no memory effects.
static void addBufferEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()))
      effects.emplace_back(MemoryEffects::Read::get(), &operand);
  for (OpResult result : op->getResults())
    if (isa<MemRefType>(result.getType())) {
      effects.emplace_back(MemoryEffects::Allocate::get(), result);
      effects.emplace_back(MemoryEffects::Write::get(), result);
    }
}

#define KVQ_BUFFER_EFFECTS(OP)                                                 \
  void OP::getEffects(                                                         \
      SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>      \
          &effects) {                                                          \
    addBufferEffects(*this, effects);                                          \
  }
KVQ_BUFFER_EFFECTS(GroupQuantOp)
KVQ_BUFFER_EFFECTS(GroupDequantOp)
KVQ_BUFFER_EFFECTS(NuqFitOp)
KVQ_BUFFER_EFFECTS(NuqQuantOp)
KVQ_BUFFER_EFFECTS(NuqDequantOp)
KVQ_BUFFER_EFFECTS(OutlierSplitOp)
KVQ_BUFFER_EFFECTS(OutlierScreenOp)
KVQ_BUFFER_EFFECTS(KeyNormOp)
KVQ_BUFFER_EFFECTS(SinkSelectOp)
#undef KVQ_BUFFER_EFFECTS

/// The cache is read and written: the append mutates runtime state.
void CacheUpdateOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getCacheMutable());
  effects.emplace_back(MemoryEffects::Write::get(), &getCacheMutable());
  addBufferEffects(*this, effects);
}

/// Attention only reads the cache.
void CacheAttendOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getCacheMutable());
  addBufferEffects(*this, effects);
}

/// Rejects bit widths the runtime cannot store.
static LogicalResult verifyBits(Operation *op, int64_t bits) {
  if (CacheConfigAttr::isSupportedBits(bits))
    return success();
  return op->emitOpError() << "unsupported bit width " << bits
                           << "; supported bit widths are 2, 3, 4 and 8";
}

/// The shape of per-group parameters (scales, zeros, thresholds) of `input`
/// grouped by `group` along `axis`: the grouped dimension divided by `group`.
static FailureOr<SmallVector<int64_t>>
groupedShape(Operation *op, ShapedType input, QuantAxis axis, int64_t group) {
  SmallVector<int64_t> shape(input.getShape());
  if (axis == QuantAxis::PerChannel && shape.size() < 2)
    return op->emitOpError()
           << "per_channel groups need an input of rank >= 2 (tokens x "
              "channels), got rank "
           << shape.size();
  if (shape.empty())
    return op->emitOpError("expects an input of rank >= 1");
  size_t dim = axis == QuantAxis::PerToken ? shape.size() - 1 : 0;
  if (ShapedType::isDynamic(shape[dim]))
    return shape;
  if (shape[dim] % group != 0)
    return op->emitOpError()
           << "group size " << group << " does not divide dimension " << dim
           << " of size " << shape[dim];
  shape[dim] /= group;
  return shape;
}

/// Checks that `value`'s shape is compatible with `expected`.
static LogicalResult verifyShapeIs(Operation *op, StringRef what, Type actual,
                                   ArrayRef<int64_t> expected) {
  auto shaped = cast<ShapedType>(actual);
  if (succeeded(verifyCompatibleShape(shaped.getShape(), expected)))
    return success();
  return op->emitOpError() << what << " has shape "
                           << shapeStr(shaped.getShape()) << " but "
                           << shapeStr(expected) << " is expected";
}

/// Checks an optional exclusion mask against the input shape.
static LogicalResult verifyExclude(Operation *op, Value exclude,
                                   ShapedType input) {
  if (!exclude)
    return success();
  return verifyShapeIs(op, "exclude mask", exclude.getType(), input.getShape());
}

/// The per-group shape with a trailing level-table dimension of 2^bits.
static SmallVector<int64_t> levelShape(ArrayRef<int64_t> grouped,
                                       int64_t bits) {
  SmallVector<int64_t> shape(grouped);
  shape.push_back(int64_t{1} << bits);
  return shape;
}

//===----------------------------------------------------------------------===//
// Primitive ops
//===----------------------------------------------------------------------===//

/// An attribute the lowering passes as an int32_t runtime parameter must
/// be at most `max` (INT32_MAX unless the runtime's limit is lower): checked
/// here, where a static size cannot do it (a dynamic dimension), so that no
/// value is truncated on its way into the C ABI.
static LogicalResult verifyAbiInt(Operation *op, StringRef what, int64_t value,
                                  int64_t max = INT32_MAX) {
  if (value <= max)
    return success();
  return op->emitOpError() << what << " " << value
                           << " exceeds the runtime's limit of " << max;
}

/// What every grouped op checks first: one kind of operand, a supported bit
/// width (ops that have one), a group size the runtime's int32_t takes, then
/// the per-group shape of `source`.
static FailureOr<SmallVector<int64_t>>
verifyGroupedOp(Operation *op, Value source, QuantAxis axis, int64_t group,
                std::optional<int64_t> bits) {
  if (failed(verifyOneKind(op)) || (bits && failed(verifyBits(op, *bits))) ||
      failed(verifyAbiInt(op, "group size", group)))
    return failure();
  return groupedShape(op, cast<ShapedType>(source.getType()), axis, group);
}

/// The shape of `value` as a ShapedType's shape.
static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<ShapedType>(value.getType()).getShape();
}

LogicalResult GroupQuantOp::verify() {
  auto grouped =
      verifyGroupedOp(*this, getInput(), getAxis(), getGroup(), getBits());
  if (failed(grouped) ||
      failed(verifyShapeIs(*this, "codes", getCodes().getType(),
                           shapeOf(getInput()))) ||
      failed(verifyShapeIs(*this, "scale", getScale().getType(), *grouped)) ||
      failed(verifyShapeIs(*this, "zero point", getZeroPoint().getType(),
                           *grouped)))
    return failure();
  return verifyExclude(*this, getExclude(),
                       cast<ShapedType>(getInput().getType()));
}

LogicalResult GroupDequantOp::verify() {
  auto grouped =
      verifyGroupedOp(*this, getCodes(), getAxis(), getGroup(), getBits());
  if (failed(grouped) ||
      failed(verifyShapeIs(*this, "scale", getScale().getType(), *grouped)) ||
      failed(verifyShapeIs(*this, "zero point", getZeroPoint().getType(),
                           *grouped)))
    return failure();
  return verifyShapeIs(*this, "output", getOutput().getType(),
                       shapeOf(getCodes()));
}

LogicalResult NuqFitOp::verify() {
  auto grouped =
      verifyGroupedOp(*this, getInput(), getAxis(), getGroup(), getBits());
  if (failed(grouped) ||
      failed(verifyAbiInt(*this, "iters", getIters(),
                          ::kvq::limits::kLloydIters)) ||
      failed(verifyShapeIs(*this, "levels", getLevels().getType(),
                           levelShape(*grouped, getBits()))))
    return failure();
  return verifyExclude(*this, getExclude(),
                       cast<ShapedType>(getInput().getType()));
}

LogicalResult NuqQuantOp::verify() {
  auto grouped =
      verifyGroupedOp(*this, getInput(), getAxis(), getGroup(), getBits());
  if (failed(grouped) ||
      failed(verifyShapeIs(*this, "levels", getLevels().getType(),
                           levelShape(*grouped, getBits()))))
    return failure();
  return verifyShapeIs(*this, "codes", getCodes().getType(),
                       shapeOf(getInput()));
}

LogicalResult NuqDequantOp::verify() {
  auto grouped =
      verifyGroupedOp(*this, getCodes(), getAxis(), getGroup(), getBits());
  if (failed(grouped) ||
      failed(verifyShapeIs(*this, "levels", getLevels().getType(),
                           levelShape(*grouped, getBits()))))
    return failure();
  return verifyShapeIs(*this, "output", getOutput().getType(),
                       shapeOf(getCodes()));
}

LogicalResult OutlierSplitOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  double fraction = getFraction().convertToDouble();
  if (!(fraction >= 0.0 && fraction < 1.0))
    return emitOpError() << "outlier fraction " << fraction
                         << " is outside [0, 1)";
  auto grouped = verifyGroupedOp(*this, getInput(), getAxis(), getGroup(),
                                 /*bits=*/std::nullopt);
  if (failed(grouped) ||
      failed(verifyShapeIs(*this, "mask", getMask().getType(),
                           shapeOf(getInput()))) ||
      failed(verifyShapeIs(*this, "threshold", getThreshold().getType(),
                           *grouped)))
    return failure();
  return verifyExclude(*this, getExclude(),
                       cast<ShapedType>(getInput().getType()));
}

LogicalResult OutlierScreenOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  auto input = cast<ShapedType>(getInput().getType());
  if (input.getRank() < 2)
    return emitOpError() << "expects an input of rank >= 2 (tokens x "
                            "channels), got rank "
                         << input.getRank();
  if (failed(verifyShapeIs(*this, "threshold", getThreshold().getType(),
                           input.getShape().drop_front())))
    return failure();
  return verifyShapeIs(*this, "mask", getMask().getType(), input.getShape());
}

LogicalResult KeyNormOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  auto keys = cast<ShapedType>(getKeys().getType());
  if (keys.getRank() != 3)
    return emitOpError() << "expects keys of rank 3 (tokens x kv_heads x "
                            "head_dim), got rank "
                         << keys.getRank();
  return verifyShapeIs(*this, "norms", getNorms().getType(),
                       keys.getShape().take_front());
}

LogicalResult SinkSelectOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  int64_t tokens = cast<ShapedType>(getNorms().getType()).getDimSize(0);
  int64_t count = getCount();
  if (failed(verifyAbiInt(*this, "sink count", count)))
    return failure();
  if (!ShapedType::isDynamic(tokens) && count > tokens)
    return emitOpError() << "sink count " << count << " exceeds the " << tokens
                         << " tokens it selects from";
  return verifyShapeIs(*this, "positions", getPositions().getType(), {count});
}

//===----------------------------------------------------------------------===//
// Cache ops
//===----------------------------------------------------------------------===//

/// Checks a layer index against the cache's layer count.
static LogicalResult verifyLayer(Operation *op, CacheType cache,
                                 int64_t layer) {
  if (layer < cache.getLayers())
    return success();
  return op->emitOpError() << "layer " << layer
                           << " is out of range for a cache of "
                           << cache.getLayers() << " layers";
}

/// Checks that a K/V tensor is [tokens, kv_heads, head_dim] of `elementType`.
static LogicalResult verifyKVTensor(Operation *op, StringRef what, Type type,
                                    CacheType cache, Type elementType) {
  auto tensor = cast<ShapedType>(type);
  SmallVector<int64_t> expected = {ShapedType::kDynamic, cache.getKvHeads(),
                                   cache.getHeadDim()};
  if (tensor.getRank() != 3 ||
      failed(verifyCompatibleShape(tensor.getShape(), expected)))
    return op->emitOpError()
           << what << " have shape " << shapeStr(tensor.getShape())
           << " but the cache holds [tokens, " << cache.getKvHeads() << ", "
           << cache.getHeadDim() << "]";
  if (tensor.getElementType() != elementType)
    return op->emitOpError()
           << what << " element type " << tensor.getElementType()
           << " does not match the cache element type " << elementType;
  return success();
}

LogicalResult CacheUpdateOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  CacheType cache = getCache().getType();
  Type element = cache.getElementType();
  if (failed(verifyLayer(*this, cache, getLayer())) ||
      failed(
          verifyKVTensor(*this, "keys", getKeys().getType(), cache, element)) ||
      failed(verifyKVTensor(*this, "values", getValues().getType(), cache,
                            element)))
    return failure();
  if (failed(verifyCompatibleShape(getKeys().getType(), getValues().getType())))
    return emitOpError() << "keys and values disagree on the token count";
  if (getFetched().empty())
    return success();
  if (getFetched().size() != 2)
    return emitOpError() << "fetches either nothing or both K and V, got "
                         << getFetched().size() << " results";
  return failure(
      failed(verifyKVTensor(*this, "fetched keys", getFetched()[0].getType(),
                            cache, element)) ||
      failed(verifyKVTensor(*this, "fetched values", getFetched()[1].getType(),
                            cache, element)));
}

LogicalResult CacheAttendOp::verify() {
  if (failed(verifyOneKind(*this)))
    return failure();
  CacheType cache = getCache().getType();
  if (failed(verifyLayer(*this, cache, getLayer())))
    return failure();
  auto queries = cast<ShapedType>(getQueries().getType());
  if (queries.getRank() != 3)
    return emitOpError() << "expects queries of rank 3 (steps x q_heads x "
                            "head_dim), got rank "
                         << queries.getRank();
  int64_t headDim = queries.getDimSize(2);
  if (!ShapedType::isDynamic(headDim) && headDim != cache.getHeadDim())
    return emitOpError() << "query head_dim " << headDim
                         << " does not match the cache head_dim "
                         << cache.getHeadDim();
  int64_t qHeads = queries.getDimSize(1);
  if (!ShapedType::isDynamic(qHeads) && qHeads % cache.getKvHeads() != 0)
    return emitOpError() << "query heads " << qHeads
                         << " are not a multiple of the cache's "
                         << cache.getKvHeads() << " KV heads";
  return verifyShapeIs(*this, "output", getOutput().getType(),
                       queries.getShape());
}

LogicalResult CacheTruncateOp::verify() {
  APInt n;
  if (matchPattern(getNTokens(), m_ConstantInt(&n)) && n.isNegative())
    return emitOpError() << "keeps a negative number of tokens ("
                         << n.getSExtValue() << ")";
  return success();
}

LogicalResult CacheStatsOp::verify() {
  if (std::optional<uint64_t> layer = getLayer())
    return verifyLayer(*this, getCache().getType(), *layer);
  return success();
}
