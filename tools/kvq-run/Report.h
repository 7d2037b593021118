//===- Report.h - What kvq-run prints ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Text for a person, or with --json one document on stdout laid out by
// tools/common/json_report.h (keys in docs/CLI.md, "kvq-run output").
// --bench prints its own (Bench.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_REPORT_H
#define KVQ_TOOLS_KVQ_RUN_REPORT_H

#include "tools/kvq-run/Generate.h"
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Options.h"
#include "tools/kvq-run/Perplexity.h"

#include "json_report.h"

#include <cstddef>
#include <string>

namespace kvq::run {

/// Generation's report. The text streams as it is made (a person watches
/// it come); --json collects a row per method and prints them at the end.
class GenerationReport {
public:
  GenerationReport(const Options &opt, const LoadedModel &model,
                   size_t promptTokens);
  /// A method starts: "[label] prompt".
  void begin(const std::string &label);
  /// One more piece of the text.
  void piece(const std::string &text);
  /// Ends the line of a method that fails (its error follows on stderr).
  void abort();
  /// A method finished: its speed and cache, or its row.
  void method(const Generated &g);
  /// After the last method: the JSON document.
  void finish();

private:
  void say(const std::string &text);
  const Options &opt_;
  const LoadedModel &model_;
  size_t promptTokens_;
  cli::Json rows_ = cli::Json::array();
};

/// One method's perplexity on stderr as it is measured (not with --json).
void reportMethodPerplexity(const Options &opt, const PerplexityResult &r);

/// The perplexity table (and the caches' configurations) or its JSON.
void reportPerplexity(const Options &opt, const LoadedModel &model,
                      const Inputs &in, const PerplexityRun &run);

/// What --dump-kv wrote.
void reportDumpKv(const Options &opt, const model::Llama2cConfig &config,
                  size_t tokens);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_REPORT_H
