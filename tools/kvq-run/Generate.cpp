//===- Generate.cpp - kvq-run: generation and --dump-kv's run -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Generate.h"
#include "tools/kvq-run/CacheReport.h"
#include "tools/kvq-run/Common.h"
#include "tools/kvq-run/DumpKv.h"
#include "tools/kvq-run/Logits.h"
#include "tools/kvq-run/Report.h"
#include "tools/kvq-run/Sampling.h"

#include "output_path.h"

#include <algorithm>
#include <chrono>

namespace kvq::run {

namespace {

/// "prompt plus --steps exceed ...": the refusal of a run too long for the
/// model's context.
int failTooLong(const model::Llama2cConfig &config) {
  return fail("prompt plus --steps exceed the model's context of " +
              std::to_string(config.seqLen) + " tokens");
}

} // namespace

int runGeneration(const Options &opt, const LoadedModel &model,
                  const Inputs &in, const cli::Progress &progress) {
  using clock = std::chrono::steady_clock;
  const model::Llama2cConfig &config = model.config();
  const model::Tokenizer &tok = *in.tok;
  std::vector<int32_t> ids = tok.encode(opt.prompt, /*bos=*/true);
  if (int64_t(ids.size()) + opt.steps > config.seqLen)
    return failTooLong(config);
  GenerationReport report(opt, model, ids.size());
  std::string error;
  for (const MethodSpec &m : in.specs) {
    Generated g;
    g.spec = m;
    g.options = passOptionsFor(m);
    auto compiled =
        CompiledModel::compile(*model.ckpt, int64_t(ids.size()), g.options,
                               &error, model.spelling, model.compileOptions);
    if (!compiled)
      return fail(m.label + ": " + error);
    progress("%s: compiled", m.label.c_str());
    uint64_t rng = samplingState(opt.seed);
    report.begin(m.label);
    const float *logits = compiled->prefill(ids.data(), 0);
    if (!logits) {
      report.abort();
      return fail(m.label + ": " + compiled->error());
    }
    int32_t prev = ids.back();
    auto start = clock::now();
    for (int64_t pos = int64_t(ids.size()); g.tokens < opt.steps; ++pos) {
      if (auto bad = nonFiniteLogits(logits, config.vocab, pos - 1)) {
        report.abort();
        return fail(m.label + ": " + *bad);
      }
      int32_t next = sample(logits, config.vocab, opt.sampling, rng);
      if (next == tok.bos() || next == tok.eos())
        break;
      std::string piece = tok.decode(prev, next);
      g.text += piece;
      report.piece(piece);
      prev = next;
      ++g.tokens;
      if (g.tokens < opt.steps && !(logits = compiled->decode(next, pos))) {
        report.abort();
        return fail(m.label + ": " + compiled->error());
      }
    }
    double secs = std::chrono::duration<double>(clock::now() - start).count();
    g.tokensPerSecond = g.tokens / std::max(secs, 1e-9);
    CacheStats st = compiled->stats();
    cacheSize(*compiled, config, st.totalBytes, st.fp16Bytes, 1,
              &g.effectiveBits, &g.cacheBytes);
    g.cache = compiled->cacheSummary();
    report.method(g);
  }
  report.finish();
  return 0;
}

bool checkDumpKv(const Options &opt) {
  if (opt.dumpKv.empty())
    return true;
  if (opt.bench) {
    fail("--dump-kv and --bench do not combine");
    return false;
  }
  if (opt.methodsGiven && opt.methods != "none") {
    fail("--dump-kv runs the plain model; --method must be none or left out");
    return false;
  }
  // Refuse an unwritable path before the run, leaving the file alone.
  if (const std::string why = cli::whyNotWritable(opt.dumpKv); !why.empty()) {
    fail("--dump-kv: cannot write '" + opt.dumpKv + "': " + why);
    return false;
  }
  return true;
}

int runDumpKv(const Options &opt, const LoadedModel &model, const Inputs &in) {
  const model::Llama2cConfig &config = model.config();
  std::string error;
  std::vector<int32_t> seq;
  if (!in.evalFile.empty()) {
    auto docs = readDocuments(in.evalFile, in.tokenizer(), config.vocab,
                              in.idsOnly, &error);
    if (docs.empty())
      return fail(error);
    seq = docs.front();
    if (int64_t(seq.size()) > config.seqLen)
      seq.resize(config.seqLen);
  } else {
    seq = in.tok->encode(opt.prompt, /*bos=*/true);
    if (int64_t(seq.size()) + opt.steps > config.seqLen)
      return failTooLong(config);
  }
  const int64_t prefillLen = int64_t(seq.size());
  auto compiled = CompiledModel::compile(*model.ckpt, prefillLen, "", &error,
                                         model.spelling, model.compileOptions);
  if (!compiled)
    return fail("none: " + error);
  const float *logits = compiled->prefill(seq.data(), 0);
  if (!logits)
    return fail("none: " + compiled->error());
  if (in.evalFile.empty()) {
    uint64_t rng = samplingState(opt.seed);
    for (int64_t made = 0; made < opt.steps; ++made) {
      int64_t pos = int64_t(seq.size());
      if (auto bad = nonFiniteLogits(logits, config.vocab, pos - 1))
        return fail("none: " + *bad);
      int32_t next = sample(logits, config.vocab, opt.sampling, rng);
      if (next == in.tok->bos() || next == in.tok->eos())
        break;
      seq.push_back(next);
      if (!(logits = compiled->decode(next, pos)))
        return fail("none: " + compiled->error());
    }
  }
  if (!dumpKv(*compiled, *model.ckpt, seq, opt.dumpKv, opt.modelPath, &error))
    return fail(error);
  reportDumpKv(opt, config, seq.size());
  return 0;
}

} // namespace kvq::run
