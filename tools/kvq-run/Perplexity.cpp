//===- Perplexity.cpp - kvq-run --perplexity and --tokens -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Perplexity.h"
#include "tools/kvq-run/CacheReport.h"
#include "tools/kvq-run/Common.h"
#include "tools/kvq-run/Logits.h"
#include "tools/kvq-run/Report.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

namespace kvq::run {

namespace {

/// Mean and standard error of the mean from a sum and a sum of squares of
/// n samples, as llama.cpp's perplexity computes them: sqrt((E[x^2] -
/// E[x]^2) / (n - 1)); NaN for fewer than two samples.
std::pair<double, double> meanAndStderr(double sum, double sumSq, int64_t n) {
  if (n < 1)
    return {NAN, NAN};
  const double mean = sum / double(n);
  if (n < 2)
    return {mean, NAN};
  const double var = std::max(sumSq / double(n) - mean * mean, 0.0);
  return {mean, std::sqrt(var / double(n - 1))};
}

} // namespace

std::optional<PerplexityRun> runPerplexity(const Options &opt,
                                           const LoadedModel &model,
                                           const Inputs &in,
                                           const cli::Progress &progress) {
  using clock = std::chrono::steady_clock;
  auto failed = [](const std::string &message) {
    fail(message);
    return std::nullopt;
  };
  const model::Llama2cConfig &config = model.config();
  const int64_t promptTokens = opt.prefill;
  std::string error;
  auto docs = readDocuments(in.evalFile, in.tokenizer(), config.vocab,
                            in.idsOnly, &error);
  if (docs.empty())
    return failed(error);
  if (promptTokens < 1 || promptTokens >= config.seqLen)
    return failed("--prefill must be in [1, " +
                  std::to_string(config.seqLen - 1) + "]");
  PerplexityRun run;
  size_t &usable = run.documents;
  for (auto &d : docs) {
    if (int64_t(d.size()) > config.seqLen)
      d.resize(config.seqLen);
    usable += int64_t(d.size()) > promptTokens;
  }
  if (usable == 0)
    return failed("no document is longer than --prefill " +
                  std::to_string(promptTokens));
  std::vector<MethodSpec> &specs = run.specs;
  specs = in.specs;
  bool hasNone = false;
  for (auto &m : specs)
    hasNone = hasNone || m.method == "none";
  if (!hasNone)
    specs.insert(specs.begin(), MethodSpec{"none", "none", {}});
  // --kl-divergence: the baseline is the first plain fp16 spec (added after
  // none when there is none); it runs first, and its log-probabilities and
  // most likely tokens at every decoded position are kept.
  size_t &baseline = run.baseline;
  baseline = specs.size();
  if (opt.klDivergence) {
    for (size_t i = 0; i < specs.size() && baseline == specs.size(); ++i)
      if (specs[i].method == "fp16" && specs[i].options.empty())
        baseline = i;
    if (baseline == specs.size()) {
      size_t at = specs.front().method == "none" ? 1 : 0;
      specs.insert(specs.begin() + at, MethodSpec{"fp16", "fp16", {}});
      baseline = at;
    }
  }
  std::vector<size_t> order;
  if (baseline < specs.size())
    order.push_back(baseline);
  for (size_t i = 0; i < specs.size(); ++i)
    if (i != baseline)
      order.push_back(i);
  std::vector<float> baseLogProbs; // [decoded][vocab]
  std::vector<int32_t> baseTop;    // [decoded]
  std::vector<double> logProbs;
  run.results.resize(specs.size());
  bool first = true;
  for (size_t index : order) {
    const MethodSpec &m = specs[index];
    PerplexityResult &r = run.results[index];
    r.spec = m;
    r.options = passOptionsFor(m);
    auto compiled =
        CompiledModel::compile(*model.ckpt, promptTokens, r.options, &error,
                               model.spelling, model.compileOptions);
    if (!compiled)
      return failed(m.label + ": " + error);
    progress("%s: compiled", m.label.c_str());
    if (first)
      run.weightBytes =
          model.ckpt->heldWeightBytes() + compiled->ownWeightBytes();
    first = false;
    const bool isBaseline = index == baseline;
    double total = 0, totalSq = 0, seconds = 0;
    double klSum = 0, klSq = 0, klSeconds = 0;
    int64_t agree = 0;
    int64_t bytes = 0, fp16 = 0;
    size_t document = 0;
    for (auto &d : docs) {
      if (int64_t(d.size()) <= promptTokens)
        continue;
      ++document;
      if (!compiled->reset(&error))
        return failed(error);
      const float *logits = compiled->prefill(d.data(), 0);
      if (!logits)
        return failed(m.label + ": " + compiled->error());
      auto start = clock::now();
      for (int64_t i = promptTokens; i < int64_t(d.size()); ++i) {
        if (auto bad = nonFiniteLogits(logits, config.vocab, i - 1))
          return failed(m.label + ": " + *bad);
        const double x = nll(logits, config.vocab, d[i]);
        total += x;
        totalSq += x * x;
        if (opt.klDivergence) {
          auto klStart = clock::now();
          const int32_t top = logSoftmax(logits, config.vocab, logProbs);
          const size_t t = size_t(r.decoded);
          if (isBaseline) {
            baseTop.push_back(top);
            for (double lp : logProbs)
              baseLogProbs.push_back(float(lp));
          }
          // KL(P || Q) = sum p (log p - log q), P the baseline's; log q
          // rounded to f32 as the baseline's are kept, so that identical
          // distributions give exactly 0.
          const float *lp = baseLogProbs.data() + t * size_t(config.vocab);
          double kl = 0;
          for (int32_t v = 0; v < config.vocab; ++v)
            kl += std::exp(double(lp[v])) *
                  (double(lp[v]) - double(float(logProbs[size_t(v)])));
          klSum += kl;
          klSq += kl * kl;
          agree += top == baseTop[t];
          klSeconds +=
              std::chrono::duration<double>(clock::now() - klStart).count();
        }
        ++r.decoded;
        if (i + 1 < int64_t(d.size()) && !(logits = compiled->decode(d[i], i)))
          return failed(m.label + ": " + compiled->error());
      }
      seconds += std::chrono::duration<double>(clock::now() - start).count();
      progress("%s: document %zu/%zu, %lld tokens decoded", m.label.c_str(),
               document, usable,
               static_cast<long long>(int64_t(d.size()) - promptTokens));
      CacheStats s = compiled->stats();
      bytes += s.totalBytes;
      fp16 += s.fp16Bytes;
    }
    const auto [meanNll, nllStderr] = meanAndStderr(total, totalSq, r.decoded);
    r.perplexity = std::exp(meanNll);
    r.perplexityStderr = r.perplexity * nllStderr;
    if (opt.klDivergence) {
      std::tie(r.kl, r.klStderr) = meanAndStderr(klSum, klSq, r.decoded);
      r.top1 = double(agree) / double(r.decoded);
    }
    seconds = std::max(seconds - klSeconds, 0.0);
    r.tokensPerSecond = double(r.decoded) / std::max(seconds, 1e-9);
    r.cache = compiled->cacheSummary();
    cacheSize(*compiled, config, bytes, fp16, int64_t(usable), &r.effectiveBits,
              &r.cacheBytes);
    reportMethodPerplexity(opt, r);
  }
  return run;
}

} // namespace kvq::run
