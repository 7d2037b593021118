//===- CacheReport.h - kvq-run: a compiled model's cache --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What generation and perplexity say about each method's cache: its
// resolved configuration (as text in the pass options' spelling, or as a
// JSON object) and its size.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_CACHEREPORT_H
#define KVQ_TOOLS_KVQ_RUN_CACHEREPORT_H

#include "tools/kvq-run/CompiledModel.h"
#include "tools/kvq-run/Methods.h"

#include "json_report.h"

#include <cstdint>
#include <string>

namespace kvq::run {

/// What every per-method result row says first: which method, its pass
/// options, its resolved cache and that cache's size (generation and
/// perplexity rows extend it).
struct MethodCache {
  MethodSpec spec;
  std::string options; ///< its --kvq-quantize-kv-cache options
  CacheSummary cache;
  double effectiveBits = 16;
  int64_t cacheBytes = 0;
};

/// The JSON fields of a MethodCache (keys in docs/CLI.md, "kvq-run output").
cli::Json methodCacheJson(const MethodCache &m);

/// The resolved cache configuration in the spelling of the pass options
/// (docs/CLI.md), only the parameters the method reads.
std::string describeCache(const CacheSummary &c);

/// The same as a JSON object (keys in docs/CLI.md, "kvq-run output").
cli::Json cacheJson(const CacheSummary &c);

/// Effective bits per cached K/V element and the cache's bytes: the kvq
/// cache's own accounting (`bytes` and `fp16` summed over `sequences`), or
/// for the plain model (none) the graph's tensors for the whole context.
void cacheSize(const CompiledModel &model, const model::Llama2cConfig &config,
               int64_t bytes, int64_t fp16, int64_t sequences,
               double *effectiveBits, int64_t *cacheBytes);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_CACHEREPORT_H
