//===- AttentionRewriter.h - matched caches as a !kvq.cache -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Consumes what the matcher found: the function's cache arguments and
// results become one !kvq.cache argument, each layer's write a
// kvq.cache_update and its attention a kvq.cache_attend.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_ATTENTIONREWRITER_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_ATTENTIONREWRITER_H

#include "kvq/dialect/KvqDialect.h"
#include "passes/transforms/kvcache/AttentionMatcher.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::kvq {

/// Runs the rewrite on `m.func` (already matched by `m`). preRopeKeys, when
/// not empty, holds each attention's key before its RoPE, written instead.
void rewriteFunction(FunctionMatcher &m, CacheType cacheType,
                     ArrayRef<Value> preRopeKeys);

/// @kv_cache_create / @kv_cache_destroy / @kv_cache_stats for the host.
void addHostHelpers(ModuleOp module, CacheType cacheType);

} // namespace mlir::kvq

#endif
