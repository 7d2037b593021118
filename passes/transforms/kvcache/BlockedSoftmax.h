//===- BlockedSoftmax.h - flash-decoding loops as one softmax -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Blocked (online-softmax, flash-decoding) attention reads the cache in
// blocks b of B positions inside an scf.for that carries a running max m, a
// running sum l and an unnormalized output acc, from -inf (or the lowest
// finite value), 0 and 0:
//
//   m' = max(m, rowmax s_b)        p = exp(s_b - m')      a = exp(m - m')
//   l' = a * l + rowsum p          acc' = a * acc + p . v_b
//
// and divides acc by l after the loop. That is softmax(s) . v over the
// blocks' union [0, n * B), up to rounding. On the matcher's copy such a
// loop becomes that attention read in one piece: each block read becomes a
// read of [0, n * B), the block's own ops are cloned over it, the softmax is
// max / exp / sum / divide, and the division after the loop is its weighted
// sum. Each step is proven by evaluating the loop's own ops, not by their
// spelling: the recurrence (exp(s - m'), the rescales by exp(m - m'), the
// final acc / l) and that block b's scores, scaled and masked, are the
// whole read's at b * B + t (a mask written against the block's offset).
// The matcher then proves the scale and the causal mask on the whole read
// as for any other attention.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_BLOCKEDSOFTMAX_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_BLOCKEDSOFTMAX_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::kvq {

/// Left on a loop of the matcher's copy that reads a cache in blocks and is
/// not raised: why not (a string), for the matcher's remark.
inline constexpr llvm::StringLiteral kBlockedWhyAttr = "kvq.blocked_why";

/// Raises every blocked-softmax loop of `f` (see above). Loops that read a
/// tensor defined outside them in blocks and are not raised get
/// kBlockedWhyAttr.
void raiseBlockedSoftmax(func::FuncOp f);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_KVCACHE_BLOCKEDSOFTMAX_H
