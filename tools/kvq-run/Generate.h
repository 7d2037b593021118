//===- Generate.h - kvq-run: generation and --dump-kv's run -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Generation continues --prompt for --steps tokens once per method. With
// --dump-kv the plain model runs once instead (over the prompt and its
// continuation, or the first document) and its keys, values and queries
// are written for kvq-eval (DumpKv.h).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_GENERATE_H
#define KVQ_TOOLS_KVQ_RUN_GENERATE_H

#include "tools/kvq-run/CacheReport.h"
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Options.h"

#include "progress.h"

#include <cstdint>
#include <string>

namespace kvq::run {

/// One method's generation.
struct Generated : MethodCache {
  double tokensPerSecond = 0;
  int64_t tokens = 0; ///< generated (fewer than --steps at BOS or EOS)
  std::string text;
};

/// Generates with each method, reporting as it goes (Report.h); returns
/// the exit status.
int runGeneration(const Options &opt, const LoadedModel &model,
                  const Inputs &in, const cli::Progress &progress);

/// Refuses what --dump-kv does not combine with, and a path it cannot
/// write, before any run; false after the one-line error.
bool checkDumpKv(const Options &opt);

/// --dump-kv: runs the plain model and writes its dump; returns the exit
/// status.
int runDumpKv(const Options &opt, const LoadedModel &model, const Inputs &in);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_GENERATE_H
