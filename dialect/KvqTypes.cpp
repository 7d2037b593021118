//===- KvqTypes.cpp - !kvq.cache verification -----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Shape rules that tie the configuration to the cache's shape.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"

#include "kvq/config_limits.h"

using namespace mlir;
using namespace mlir::kvq;

LogicalResult CacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t layers, int64_t kvHeads,
                                int64_t headDim, Type elementType,
                                CacheConfigAttr config) {
  if (layers <= 0)
    return emitError() << "layers must be positive, got " << layers;
  if (kvHeads <= 0)
    return emitError() << "kv_heads must be positive, got " << kvHeads;
  if (headDim <= 0)
    return emitError() << "head_dim must be positive, got " << headDim;
  // The runtime's bounds (kvq/config_limits.h): the lowering passes these
  // as i32, so anything larger would be truncated, not rejected.
  namespace limits = ::kvq::limits;
  if (layers > limits::kLayers)
    return emitError() << "layers " << layers
                       << " exceeds the runtime's limit of " << limits::kLayers;
  if (kvHeads > limits::kKvHeads)
    return emitError() << "kv_heads " << kvHeads
                       << " exceeds the runtime's limit of "
                       << limits::kKvHeads;
  if (headDim > limits::kHeadDim)
    return emitError() << "head_dim " << headDim
                       << " exceeds the runtime's limit of "
                       << limits::kHeadDim;
  if (kvHeads * headDim > ::kvq::kMaxChannels)
    return emitError() << "kv_heads x head_dim = " << kvHeads * headDim
                       << " exceeds the runtime's limit of "
                       << ::kvq::kMaxChannels << " channels per layer";
  if (!elementType.isF16() && !elementType.isF32())
    return emitError() << "element_type must be f16 or f32, got "
                       << elementType;
  if (!config)
    return emitError() << "missing config";
  Method method = config.getMethod();
  bool uniform = method == Method::Kivi || method == Method::KiviSink;
  if (uniform && headDim % config.getGroupSize() != 0)
    return emitError() << "group_size " << config.getGroupSize()
                       << " does not divide head_dim " << headDim;
  if (RopeAttr rope = config.getRope())
    if (const char *why = ::kvq::ropeRule(rope.getThetaValue(), headDim))
      return emitError() << why << ", got head_dim " << headDim;
  return success();
}
