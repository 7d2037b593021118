//===- Perplexity.h - kvq-run --perplexity and --tokens ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Each method's perplexity over the documents (the protocol is in
// docs/MODEL.md): a prefill of --prefill tokens, then teacher-forced decode
// steps; with --kl-divergence, also how far each method's next-token
// distributions are from fp16's.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_PERPLEXITY_H
#define KVQ_TOOLS_KVQ_RUN_PERPLEXITY_H

#include "tools/kvq-run/CacheReport.h"
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Options.h"

#include "progress.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvq::run {

/// One method's measurements.
struct PerplexityResult : MethodCache {
  double perplexity = 0, tokensPerSecond = 0;
  /// ppl * standard error of the mean per-token NLL (NaN: one token).
  double perplexityStderr = NAN;
  /// --kl-divergence: mean KL(fp16 || this) per token, its standard error,
  /// and the fraction of tokens whose most likely next token is fp16's.
  double kl = NAN, klStderr = NAN, top1 = NAN;
  int64_t decoded = 0;
};

/// The whole run: the methods measured (none first, fp16 added for
/// --kl-divergence when not listed) and their results, in that order.
struct PerplexityRun {
  std::vector<MethodSpec> specs;
  std::vector<PerplexityResult> results;
  /// --kl-divergence: the index of the baseline in specs (else specs.size()).
  size_t baseline = 0;
  size_t documents = 0;    ///< those longer than --prefill
  int64_t weightBytes = 0; ///< the checkpoint's and the first model's
};

/// Measures each method (a line per method on stderr without --json);
/// nullopt after the one-line error.
std::optional<PerplexityRun> runPerplexity(const Options &opt,
                                           const LoadedModel &model,
                                           const Inputs &in,
                                           const cli::Progress &progress);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_PERPLEXITY_H
