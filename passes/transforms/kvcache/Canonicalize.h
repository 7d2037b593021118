//===- Canonicalize.h - the matcher's copy in one spelling -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache pass matches a copy of each function. These rewrites bring the
// spellings frontends use for one thing to the one the matcher follows
// (named ops generalized, repeat_kv materialized, scatter writes as
// insert_slice, ...). Each is exact: the copy computes what the original
// does. A function that is not adopted keeps its own IR; an adopted one is
// replaced by its rewritten copy.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_CANONICALIZE_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_CANONICALIZE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::kvq {

/// Rewrites the function's named linalg ops that the cache pass reasons
/// about (contractions, transposes, broadcasts, copies, elementwise maps)
/// into linalg.generic, so that roles come from indexing maps and iterator
/// types, never from op names. linalg.softmax is left as it is.
void generalizeForMatching(func::FuncOp f);

/// Gives every generic input indexed by `d floordiv G` (grouped-query
/// attention reading KV head h / G directly) the repeat_kv a frontend would
/// otherwise write: the operand expanded by a unit dim, broadcast G times
/// and collapsed back (the form the matcher follows), indexed by `d`. Only
/// where another operand fixes d's extent to G times the operand's.
void expandGroupedHeadMaps(func::FuncOp f);

/// Destination-passing writes: `insert_slice (generic ins(NEW) outs(S))`
/// where S is the very slot being written, read out of the cache by an
/// extract_slice, and the generic never reads its output. The slot's old
/// contents do not reach the result, so the generic gets a tensor.empty
/// instead and the cache is written, not read, before the attention.
void detachSlotWrites(func::FuncOp f);

/// Keys and values stacked in one tensor argument: a dimension that every
/// write and read of the argument takes one half of at a constant offset,
/// both halves written (size 2, one entry each: ONNX Runtime's `present`,
/// vLLM's `kv_cache`; or 2 * head_dim, K's channels then V's). The argument
/// and its result become two, one per half. The matcher then follows a K
/// and a V cache. Returns whether any argument was split.
bool splitStackedPairs(func::FuncOp f);

/// Caches with the heads flattened into the channels, [.., H * D], whose
/// every read is split into [.., H, D] by an expand_shape and every write
/// covers the whole last dimension, become [.., H, D] caches (argument and
/// result), their writes expanded the same way. Returns whether any was.
bool unflattenHeads(func::FuncOp f);

/// Whether `op` only relabels a row-major tensor (same elements, same
/// order): reshapes and casts with static types.
bool isRelabel(Operation *op);

/// A cache argument reshaped before it is used ([1, H, S, D] seen as
/// [H, S, D], TOSA's 3-D scatter) and reshaped back where it is returned
/// becomes an argument and result of the inner shape: reshapes of static
/// tensors only relabel the same row-major elements, so the caller's buffer
/// is the same. Returns whether any was.
bool stripCacheReshapes(func::FuncOp f);

/// An elementwise generic yielding `exp(x * c)` or `exp(x / c)` (a softmax
/// without the max, its scale fused into the exp) becomes a generic for the
/// scale followed by one for the exp, the form the softmax check reads.
void splitScaledExps(func::FuncOp f);

/// Calls of functions of `symbols` that have one block (attention or a
/// whole layer in a callee) get the callee's body in their place, nested
/// calls too, up to a depth of 8; a recursive call is left alone. The
/// callee itself is not changed.
void inlineCalls(func::FuncOp f, SymbolTable &symbols);

/// Loops over layers (`scf.for` with constant bounds, at most 256
/// iterations, carrying a tensor that the body writes with insert_slice)
/// unrolled, and the layer indices folded to constants: the layer-by-layer
/// graph the matcher follows.
void unrollLayerLoops(func::FuncOp f);

/// tosa.scatter's loops (after tosa-to-scf) that write every row's slot at
/// one runtime index become one insert_slice; the others get the attribute
/// below, whose string says why they stay (see the definition).
void foldScatterLoops(func::FuncOp f);
inline constexpr llvm::StringLiteral kScatterLoopAttr = "kvq.scatter_loop";

/// Writes of one token at a runtime position spelled as a scatter become
/// the insert_slice the matcher follows (see the definition for the forms).
void scatterWritesToInsertSlices(func::FuncOp f);

/// Caches grown by `tensor.concat` become caches of `capacity` positions
/// written at a new trailing index argument (their length before the
/// step), which it returns; null when no cache grows.
BlockArgument growConcatCaches(func::FuncOp f, int64_t capacity);

} // namespace mlir::kvq

#endif
