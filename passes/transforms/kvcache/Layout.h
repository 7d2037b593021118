//===- Layout.h - what each dimension of an attention tensor means -*- C++ -*-//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Frontends spell one attention in many layouts: [S, H, D], [B, S, H, D],
// Hugging Face's [B, H, S, D], heads merged with batch for a batch_matmul,
// keys transposed, heads repeated for GQA. The cache pass does not match
// those spellings; it gives every dimension a role and follows the roles
// through the data movement between a cache read and the contraction that
// consumes it. The rewrite then gathers whatever it needs from those roles.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_LAYOUT_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_LAYOUT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <string>

namespace mlir::kvq {

/// What one dimension of a cache, a cache read or an attention operand is.
enum class Role : uint8_t {
  Unit,    // size 1, means nothing (a batch of one, a squeezed dim)
  Slot,    // a constant index into stacked caches (the layer)
  Token,   // the cached position t
  Head,    // the KV head
  Group,   // a query head within its KV head's group (GQA)
  QHead,   // a query head as KV head * group + member (repeat_kv collapsed)
  Channel, // the head_dim channel
  Query,   // the new token n of this step (queries, scores, output)
};

const char *roleName(Role r);

/// Roles of a traced value, one per dimension, and the GQA group size when
/// a Group or QHead role is present.
struct Roles {
  llvm::SmallVector<Role> dims;
  int64_t group = 1;
  /// Product of the constant factors met on the way (keys scaled before the
  /// scores contraction).
  double scale = 1.0;

  int find(Role r) const;
};

/// The roles of `op`'s result given its (first) operand's `roles`, for the
/// data movement traceRoles follows and for identity elementwise generics
/// (a mask, a conversion). `why` says what breaks the roles on failure.
FailureOr<Roles> stepRoles(Operation *op, Roles roles, std::string &why);

/// Whether traceRoles walks through `op`.
bool isRoleMovement(Operation *op);

/// A value reached by following data movement back from `operand`: the op
/// that ends the walk (a cache read, or whatever else) and the roles the
/// operand's dimensions have in terms of the end's roles.
struct Trace {
  Operation *end = nullptr;
  Roles roles;
};

/// Walks from `operand` back through data movement (single-input
/// elementwise or broadcasting/transposing generics whose body yields its
/// input, possibly converted or scaled by a constant; expand/collapse
/// shapes; casts) to the first op that is none of these. `rolesOfEnd` gives
/// the roles of that op's result (or fails: the walk is not a cache
/// operand); the roles are then carried forward to `operand`. On a
/// structural failure after the end was recognised, `why`/`where` say what
/// blocks.
FailureOr<Trace>
traceRoles(Value operand,
           const std::function<FailureOr<Roles>(Value end)> &rolesOfEnd,
           std::string &why, Operation *&where);

} // namespace mlir::kvq

#endif
