//===- CompiledModel.h - a llama2.c model compiled in process ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq-import -> [--kvq-quantize-kv-cache] -> --kvq-to-llvm -> ORC JIT, then
// the entry points called with the checkpoint's weights mapped in place.
// `method` "none" keeps the graph's own f32 tensor cache (the unquantized
// reference); any other method runs the kvq pass with `passOptions`.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_COMPILEDMODEL_H
#define KVQ_TOOLS_KVQ_RUN_COMPILEDMODEL_H

#include "tools/kvq-import/Llama2cImporter.h"
#include "tools/model/llama2c.h"

#include "kvq/runtime.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvq::run {

struct CacheStats {
  int64_t tokens = 0, totalBytes = 0, fp16Bytes = 0;
};

/// The configuration of a compiled model's cache as the kvq pass resolved
/// it (the pass options given plus every default), read from the
/// !kvq.cache type the pass adopted. For the plain model (method "none"):
/// the graph's own tensors, only `method`, `elementType` and the shape set.
struct CacheSummary {
  std::string method;      // none, fp16, kivi, kivi_sink, kvquant
  std::string elementType; // of the K/V tensors the graph exchanges
  int64_t layers = 0, kvHeads = 0, headDim = 0;
  int64_t keyBits = 0, valueBits = 0;
  int64_t groupSize = 0, residualLength = 0;
  std::string residualMode;
  int64_t sinks = 0;        // kivi_sink: n_sink_tokens
  double outlierFraction = 0;
  int64_t lloydIters = 0, refitInterval = 0;
  int64_t kvquantSinks = 0; // kvquant: leading prefill tokens kept fp16
  bool preRope = false;
  std::string ropeStyle;    // with preRope: interleaved or half
  double ropeTheta = 0;
};

/// How the graph is lowered and run beyond its spelling.
struct CompileOptions {
  /// Dense layers as kvq_matmul calls (--kvq-to-llvm's matmul-kernels);
  /// false: convert-linalg-to-loops' scalar loops.
  bool matmulKernels = true;
};

class CompiledModel {
public:
  /// Compiles `ckpt` with @prefill of `prefillTokens` tokens. `passOptions`
  /// is the option string of --kvq-quantize-kv-cache ("method=kivi bits=2");
  /// empty means no kvq pass. `spelling` chooses how kvq-import writes the
  /// graph (its prefillTokens is replaced; the cache must be stacked for the
  /// plain model, which this class drives with two cache buffers). Null on
  /// failure with a message in *error.
  static std::unique_ptr<CompiledModel>
  compile(const model::Llama2cCheckpoint &ckpt, int64_t prefillTokens,
          const std::string &passOptions, std::string *error,
          const import::ImportOptions &spelling = {},
          const CompileOptions &compileOptions = {});
  ~CompiledModel();

  /// Empties the cache (a new sequence).
  bool reset(std::string *error);
  /// Runs @prefill on exactly prefillTokens() tokens at `pos`, or @decode on
  /// one; returns the last token's logits (valid until the next call), or
  /// null when a runtime call of the graph failed (the graph is lowered
  /// with on-error=report), with the first failure, naming its op, layer
  /// and problem, in error(). The cache is then unspecified: reset() it.
  const float *prefill(const int32_t *tokens, int64_t pos);
  const float *decode(int32_t token, int64_t pos);
  /// Why the last prefill() or decode() returned null (one line).
  const std::string &error() const { return error_; }
  int64_t prefillTokens() const { return prefillTokens_; }
  bool quantized() const { return quantized_; }
  /// The kvq cache (a kvq_cache_t*), null for the plain model.
  void *cacheHandle() const;
  /// A new empty cache of the compiled configuration (@kv_cache_create);
  /// the caller frees it with kvq_cache_destroy. Null, with a message, for
  /// the plain model or on failure.
  void *newCache(std::string *error) const;
  /// Byte accounting of the kvq cache (zeros for the plain model).
  CacheStats stats() const;
  /// The resolved configuration of the cache.
  const CacheSummary &cacheSummary() const { return summary_; }
  /// The weights the graph reads: the checkpoint's own (f32, or f16 / bf16
  /// when it holds them so and the spelling asks for that type), or a copy
  /// rounded to the spelling's f16 / bf16 (to nearest, ties to even).
  const void *weights() const;
  kvq_weight_type weightType() const;
  /// Bytes of that rounded copy (0 when the checkpoint's weights are read).
  int64_t ownWeightBytes() const;
  /// The cache of the plain model: K and V [layers, context, kv_heads,
  /// head_dim] f32; for a kvq model, fetched from the runtime (dequantized).
  bool fetchLayer(int64_t layer, std::vector<float> &k, std::vector<float> &v,
                  int64_t *tokens, std::string *error) const;

private:
  CompiledModel() = default;
  const float *call(const char *entry, const int32_t *tokens, int64_t n,
                    int64_t pos);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t prefillTokens_ = 0;
  bool quantized_ = false;
  bool cacheF16_ = false; // plain model: its cache tensors hold f16
  std::string error_;
  CacheSummary summary_;
};

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_COMPILEDMODEL_H
