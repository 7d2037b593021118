//===- RopeMatcher.h - prove that a cached key is RoPE(x) -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// --kvq-quantize-kv-cache="pre-rope=true" stores keys before their RoPE.
// It must not take any rotation-looking code for a RoPE, so matchRope does
// not pattern-match syntax: it finds a candidate pre-rotation tensor x in
// front of the key written to the cache, evaluates the ops between the two
// on chosen inputs (an interpreter of reshapes, slices of constant tables
// and elementwise linalg.generic bodies), infers theta and the pairing, and
// accepts only when the key equals RoPE(x) at positions pos + t for every
// probe.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TRANSFORMS_KVCACHE_ROPEMATCHER_H
#define KVQ_PASSES_TRANSFORMS_KVCACHE_ROPEMATCHER_H

#include "kvq/dialect/KvqDialect.h"

#include <string>

namespace mlir::kvq {

/// A RoPE proven in front of a cached key.
struct RopeMatch {
  Value preRope; ///< x: [tokens, kv_heads, head_dim], key = RoPE(x)
  double theta = 0;
  RopeStyle style = RopeStyle::Interleaved;
};

/// `key` ([tokens, kv_heads, head_dim], static tokens) is written to the
/// cache at position `pos` (0 <= pos <= context - tokens). Returns the RoPE, or
/// failure with `why` set to a one-line reason (what could not be evaluated, or
/// which probe disagreed) and `where` to the op to point at (left as the caller
/// set it when no op is more precise).
FailureOr<RopeMatch> matchRope(Value key, Value pos, int64_t context,
                               std::string &why, Location &where);

} // namespace mlir::kvq

#endif // KVQ_PASSES_TRANSFORMS_KVCACHE_ROPEMATCHER_H
