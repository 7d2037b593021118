//===- Llama2cImporter.h - a llama2.c model as an MLIR module ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The frontend half of kvq's model path: a llama2.c checkpoint becomes a
// module in upstream dialects only (func, arith, math, tensor, linalg), as
// a model compiler's frontend would emit it, with the KV cache held in
// plain tensors. --kvq-quantize-kv-cache then finds that cache and replaces
// it with a !kvq.cache. The calling convention is in docs/MODEL.md.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_IMPORT_LLAMA2CIMPORTER_H
#define KVQ_TOOLS_KVQ_IMPORT_LLAMA2CIMPORTER_H

#include "tools/model/llama2c.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>

namespace kvq::import {

/// How the emitted graph spells the parts a frontend may spell differently.
/// Every combination computes the same model.
struct ImportOptions {
  /// One [layers, context, kv_heads, head_dim] tensor per K and V (stacked)
  /// or one [context, kv_heads, head_dim] tensor per layer.
  enum class CacheLayout {
    Stacked,
    PerLayer
  } cacheLayout = CacheLayout::Stacked;
  /// Element type of the cache tensors: f32, or f16 (K/V truncated when
  /// written, extended when read).
  bool cacheF16 = false;
  /// Query heads onto KV heads: expand the query to [kv_heads, group]
  /// (reshape) or repeat each KV head `group` times (broadcast, as Hugging
  /// Face's repeat_kv).
  enum class Gqa { Reshape, Broadcast } gqa = Gqa::Reshape;
  /// linalg.softmax, or its max / exp / sum / divide expansion.
  bool expandSoftmax = false;
  /// Tokens of the @prefill entry point (0: emit only @decode).
  int64_t prefillTokens = 0;
  /// Cache capacity in tokens (0: the checkpoint's seq_len).
  int64_t contextLength = 0;
  /// Element type of %weights: f32, or f16 / bf16 kept in that type and
  /// widened (arith.extf) where a weight is read.
  enum class WeightType { F32, F16, BF16 } weightType = WeightType::F32;
};

/// The MLIR element type of a weight type ("f32", "f16", "bf16"): also
/// its name for --weight-type.
const char *weightTypeName(ImportOptions::WeightType type);

/// The weight type a checkpoint holds its weights in (f16 / bf16 when its
/// file stores them so, else f32): the default of --weight-type.
ImportOptions::WeightType storedWeightType(const model::Llama2cCheckpoint &c);

/// The weight type named `name` (weightTypeName's spelling), if any.
std::optional<ImportOptions::WeightType> parseWeightType(
    const std::string &name);

/// Checks options against the config; returns a one-line message or "".
/// The capacity must be given (contextLength in [1, seq_len]): a user's 0
/// is an error, not the default.
std::string validateImportOptions(const model::Llama2cConfig &config,
                                  const ImportOptions &options);

/// The module as MLIR text (upstream dialects only).
std::string emitLlama2cModule(const model::Llama2cConfig &config,
                              const ImportOptions &options);

/// Emits, parses and verifies the module in `context` (which must have the
/// upstream dialects loaded or registered). Null on failure, with diagnostics
/// through the context's handler.
mlir::OwningOpRef<mlir::ModuleOp>
importLlama2c(mlir::MLIRContext &context, const model::Llama2cConfig &config,
              const ImportOptions &options);

/// Registers the dialects the emitted module uses.
void registerImportDialects(mlir::DialectRegistry &registry);

} // namespace kvq::import

#endif // KVQ_TOOLS_KVQ_IMPORT_LLAMA2CIMPORTER_H
