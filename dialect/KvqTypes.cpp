//===- KvqTypes.cpp - !kvq.cache verification -----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Shape rules that tie the configuration to the cache's shape: the
// runtime's (kvq/config_rules.h), with their messages.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFields.h"

using namespace mlir;
using namespace mlir::kvq;

LogicalResult CacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t layers, int64_t kvHeads,
                                int64_t headDim, Type elementType,
                                CacheConfigAttr config) {
  if (!config)
    return emitError() << "missing config";
  // The shape's bounds keep every size inside the i32 the lowering passes.
  ::kvq::ConfigVerdict verdict = ::kvq::checkConfig(
      runtimeFields(config), ::kvq::CacheShape{layers, kvHeads, headDim});
  if (verdict.failed())
    return emitError() << verdict.message;
  if (!elementType.isF16() && !elementType.isF32())
    return emitError() << "element_type must be f16 or f32, got "
                       << elementType;
  return success();
}
