//===- RuntimeFields.h - #kvq.config as the runtime receives it -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The dialect's verifiers apply the runtime's rules (kvq/config_rules.h) to
// the values the lowering passes, and the lowering passes exactly these.
// Private to dialect/ and convert-kvq-to-runtime: kvq/config_rules.h
// declares ::kvq, which public MLIR headers must not see next to
// mlir::kvq.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_DIALECT_RUNTIMEFIELDS_H
#define KVQ_DIALECT_RUNTIMEFIELDS_H

#include "kvq/dialect/KvqDialect.h"

#include "kvq/config_rules.h"

namespace mlir::kvq {

/// The kvq_config fields `config` lowers to (convert-kvq-to-runtime):
/// n_sink_tokens as getSinkTokens(), the floats rounded to f32, no RoPE as
/// KVQ_ROPE_NONE.
::kvq::ConfigFields runtimeFields(CacheConfigAttr config);

} // namespace mlir::kvq

#endif // KVQ_DIALECT_RUNTIMEFIELDS_H
