//===- MemrefState.h - state held in memref arguments, seen as tensors -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A model that keeps its KV cache in memref arguments updated in place (a
// bufferized decode step, or one written on buffers by hand) is read by the
// cache pass in the tensor form its matcher knows: on a copy of the
// function, every memref argument becomes a tensor argument, each write
// (memref.copy, memref.store, a linalg op's init, materialize_in_destination)
// produces the buffer's next value, each read sees its current value, and
// the final value of every written argument is returned. After the rewrite
// the arguments that remain are memrefs again, written in place.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_MEMREFSTATE_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_MEMREFSTATE_H

#include "passes/transforms/kvcache/AttentionMatcher.h"

#include "llvm/ADT/BitVector.h"

namespace mlir::kvq {

/// Whether the memref `buf` (or a view of it) is both written (a copy's
/// target, a store, a linalg init) and read (a copy's source, a load, a
/// linalg input, to_tensor): state kept in place, as a bufferized model
/// keeps its cache. An output buffer is only written; weights are only read.
bool isStateBuffer(Value buf);

/// Whether some memref argument of `f` is state (isStateBuffer).
bool holdsBufferState(func::FuncOp f);

/// Where each result of the tensor form comes from.
struct BufferResult {
  int originalResult = -1; // index among the original results, or -1
  int stateOf = -1;        // original argument whose final value it is, or -1
};

/// The tensor form of `f` (a detached copy the caller owns), or a refusal
/// naming the use of a state buffer that cannot be read as a tensor
/// (aliasing kvq cannot follow, a buffer passed on, uses inside a region).
/// Its former memref arguments carry the attributes that
/// restoreBufferBoundary reads.
FailureOr<func::FuncOp> tensorizeBufferState(func::FuncOp f,
                                             SmallVector<BufferResult> &results,
                                             std::optional<Refusal> &refusal);

/// The result of the tensor form that result `i` of `f`, a canonical copy
/// of it, holds: the caches' reshapes may split one result in two (a K|V
/// pair), and only the first half keeps the tag (-1 for the second).
int tensorFormResult(func::FuncOp f, unsigned i);

/// Removes the tags tensorFormResult reads, before the rewrite drops results.
void dropTensorFormResultTags(func::FuncOp f);

/// Makes the tensor arguments that were memrefs memrefs again in the
/// rewritten `f`: read through bufferization.to_tensor, their final value
/// written back with materialize_in_destination. `results` describes the
/// tensor form's results, of which `dropped` were removed by the rewrite.
void restoreBufferBoundary(func::FuncOp f, ArrayRef<BufferResult> results,
                           const llvm::BitVector &dropped,
                           FunctionType original);

} // namespace mlir::kvq

#endif
