//===- Report.cpp - What kvq-run prints -----------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Report.h"
#include "tools/kvq-run/CacheReport.h"

#include "json_number.h"
#include "table.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

namespace kvq::run {

using cli::Json;

GenerationReport::GenerationReport(const Options &opt, const LoadedModel &model,
                                   size_t promptTokens)
    : opt_(opt), model_(model), promptTokens_(promptTokens) {}

void GenerationReport::say(const std::string &text) {
  if (!opt_.json) {
    llvm::outs() << text;
    llvm::outs().flush();
  }
}

void GenerationReport::begin(const std::string &label) {
  say("[" + label + "] " + opt_.prompt);
}

void GenerationReport::piece(const std::string &text) { say(text); }

void GenerationReport::abort() { say("\n"); }

void GenerationReport::method(const Generated &g) {
  if (!opt_.json) {
    llvm::outs() << "\n  (" << g.tokens << " tokens, "
                 << llvm::format("%.1f", g.tokensPerSecond) << " tokens/s)\n"
                 << "  cache: " << describeCache(g.cache) << "; "
                 << llvm::format("%.2f", g.effectiveBits) << " effective bits, "
                 << g.cacheBytes << " bytes\n";
    return;
  }
  Json row = methodCacheJson(g);
  row["generated_tokens"] = g.tokens;
  row["text"] = g.text;
  row["tokens_per_second"] = cli::fixed(g.tokensPerSecond, 1);
  rows_.push_back(std::move(row));
}

void GenerationReport::finish() {
  if (!opt_.json)
    return;
  Json doc;
  doc["model"] = opt_.modelPath;
  doc["prompt"] = opt_.prompt;
  doc["prompt_tokens"] = promptTokens_;
  doc["steps"] = opt_.steps;
  doc["temperature"] = cli::significant(opt_.sampling.temperature, 6);
  doc["top_k"] = opt_.sampling.topK;
  doc["top_p"] = cli::significant(opt_.sampling.topP, 6);
  doc["seed"] = opt_.seed;
  doc["weight_type"] = import::weightTypeName(model_.spelling.weightType);
  doc["results"] = std::move(rows_);
  llvm::outs() << cli::jsonReport(doc);
}

void reportMethodPerplexity(const Options &opt, const PerplexityResult &r) {
  if (!opt.json)
    llvm::errs() << "  " << r.spec.label << ": perplexity "
                 << llvm::format("%.4f", r.perplexity) << "\n";
}

namespace {

void perplexityJson(const Options &opt, const LoadedModel &model,
                    const Inputs &in, const PerplexityRun &run) {
  const double base = run.results.front().perplexity;
  Json doc;
  doc["model"] = opt.modelPath;
  doc["eval_file"] = in.evalFile;
  doc["documents"] = run.documents;
  doc["prompt_tokens"] = opt.prefill;
  doc["decoded_tokens"] = run.results.front().decoded;
  doc["weight_type"] = import::weightTypeName(model.spelling.weightType);
  doc["weight_bytes"] = run.weightBytes;
  if (opt.klDivergence)
    doc["kl_baseline"] = run.specs[run.baseline].label;
  Json rows = Json::array();
  for (const PerplexityResult &r : run.results) {
    Json row = methodCacheJson(r);
    row["perplexity"] = cli::fixed(r.perplexity, 6);
    row["ppl_stderr"] = cli::significant(r.perplexityStderr, 6);
    row["delta_perplexity"] = cli::fixed(r.perplexity - base, 6);
    if (opt.klDivergence) {
      row["kl_divergence"] = cli::significant(r.kl, 6);
      row["kl_divergence_stderr"] = cli::significant(r.klStderr, 6);
      row["top1_agreement"] = cli::significant(r.top1, 6);
    }
    row["tokens_per_second"] = cli::fixed(r.tokensPerSecond, 1);
    rows.push_back(std::move(row));
  }
  doc["results"] = std::move(rows);
  llvm::outs() << cli::jsonReport(doc);
}

void perplexityTable(const Options &opt, const LoadedModel &model,
                     const Inputs &in, const PerplexityRun &run) {
  const double base = run.results.front().perplexity;
  llvm::outs() << "perplexity of " << opt.modelPath << " on " << in.evalFile
               << ": " << run.documents << " documents, " << opt.prefill
               << "-token prefill, " << run.results.front().decoded
               << " tokens decoded one at a time (teacher forcing); weights "
               << import::weightTypeName(model.spelling.weightType) << ", "
               << run.weightBytes << " bytes\n\n";
  auto fixed = [](double x, const char *fmt) -> std::string {
    if (!std::isfinite(x))
      return "n/a";
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, x);
    return buf;
  };
  const int labelWidth = kvq::cli::labelColumnWidth(
      "method", run.results,
      [](const PerplexityResult &r) { return r.spec.label; });
  llvm::outs() << llvm::format("%-*s %9s %12s %11s %9s %9s", labelWidth,
                               "method", "eff bits", "cache bytes",
                               "perplexity", "± ppl", "delta");
  if (opt.klDivergence)
    llvm::outs() << llvm::format(" %10s %10s %7s", "KL div", "± KL", "top-1 %");
  llvm::outs() << llvm::format(" %9s\n", "tok/s");
  for (const PerplexityResult &r : run.results) {
    llvm::outs() << llvm::format(
        "%-*s %9.2f %12lld %11.4f %8s %+9.4f", labelWidth, r.spec.label.c_str(),
        r.effectiveBits, (long long)r.cacheBytes, r.perplexity,
        fixed(r.perplexityStderr, "%.4f").c_str(), r.perplexity - base);
    if (opt.klDivergence)
      llvm::outs() << llvm::format(" %10s %10s %7s",
                                   fixed(r.kl, "%.6f").c_str(),
                                   fixed(r.klStderr, "%.6f").c_str(),
                                   fixed(100 * r.top1, "%.2f").c_str());
    llvm::outs() << llvm::format(" %9.0f\n", r.tokensPerSecond);
  }
  llvm::outs() << "\n± ppl: perplexity x the standard error of the mean "
                  "per-token NLL\n";
  if (opt.klDivergence)
    llvm::outs() << "KL div: mean KL divergence per token from "
                 << run.specs[run.baseline].label
                 << "'s next-token distribution; top-1 %: tokens whose most "
                    "likely next token is the same\n";
  llvm::outs() << "cache bytes: mean per document at its end (none: the "
                  "graph's f32 tensors for the whole context)\n\ncaches:\n";
  for (const PerplexityResult &r : run.results)
    llvm::outs() << "  " << r.spec.label << ": " << describeCache(r.cache)
                 << "\n";
}

} // namespace

void reportPerplexity(const Options &opt, const LoadedModel &model,
                      const Inputs &in, const PerplexityRun &run) {
  if (opt.json)
    perplexityJson(opt, model, in, run);
  else
    perplexityTable(opt, model, in, run);
}

void reportDumpKv(const Options &opt, const model::Llama2cConfig &config,
                  size_t tokens) {
  llvm::outs() << "wrote the keys (post- and pre-RoPE), values and queries "
                  "of "
               << tokens << " tokens, " << config.layers << " layers to "
               << opt.dumpKv << " (layout lthd)\n";
}

} // namespace kvq::run
