//===- Bench.h - kvq-run --bench: decode speed per cache method -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#ifndef KVQ_TOOLS_KVQ_RUN_BENCH_H
#define KVQ_TOOLS_KVQ_RUN_BENCH_H

#include "tools/kvq-run/CompiledModel.h"
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Options.h"

#include "progress.h"

#include <string>
#include <utility>
#include <vector>

namespace kvq::run {

/// Times decode steps of `ckpt` compiled per method (label, pass options;
/// options must name a kvq method) at each context length (each in [0,
/// seq_len - repetitions], as runBench checks), splitting each
/// step into dense layers, attention and the rest, against the read
/// bandwidth measured in the same run; and one prefill of `prefillTokens`.
/// `threads` is what the host lent the runtime (for the report). Prints a
/// table or JSON (and a progress line per compile, prefill and context);
/// returns the exit status.
int runDecodeBench(
    const model::Llama2cCheckpoint &ckpt,
    const std::vector<std::pair<std::string, std::string>> &methods,
    const std::vector<int64_t> &contexts, int repetitions, bool json,
    const import::ImportOptions &spelling,
    const CompileOptions &compileOptions, int64_t prefillTokens, int threads,
    const cli::Progress &progress);

/// --bench: the methods (kvq caches only), context lengths (default: those
/// of 1024, 4096 and 8192 that fit the model with the steps, else half its
/// context or less), prefill (default 128 or seq_len if shorter) and
/// repetitions of the command line, checked, then runDecodeBench; returns
/// the exit status.
int runBench(const Options &opt, const LoadedModel &model,
             const cli::Progress &progress);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_BENCH_H
