//===- Options.cpp - kvq-run's command line -------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// llvm::cl reads the command line (cl_version.h keeps the shared rules for
// a bad one); numbers given as text are range-checked by flags.h's rules.
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Options.h"
#include "tools/kvq-run/Common.h"

#include "cl_version.h"
#include "flags.h"
#include "vocabulary.h"

#include "kvq/runtime.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <limits>
#include <memory>

namespace cl = llvm::cl;

namespace kvq::run {

namespace {

/// The largest --temperature (sampling divides the logits by it); far above
/// any useful setting, it keeps the flag's range finite and stated.
constexpr double kMaxTemperature = 100;

} // namespace

const std::vector<ListFlag> &listFlags() {
  static const std::vector<ListFlag> flags = {
      {"bits",
       "Code widths (2, 3, 4 or 8; a comma list runs each) for the "
       "quantized methods whose spec sets none (default: each "
       "method's default)",
       "N[,N...]",
       {"kivi", "kivi_sink", "kvquant"},
       {"bits", "key-bits", "value-bits"},
       // --bits 0 is not "each method's default": that is --bits left out.
       [](long long b) {
         return b == 2 || b == 3 || b == 4 || b == 8
                    ? std::string()
                    : "--bits " + std::to_string(b) +
                          " is not a code width (2, 3, 4 or 8)";
       }},
      {"group-size",
       "KIVI group size G (a comma list runs each) for the kivi and "
       "kivi_sink specs that set none",
       "G[,G...]",
       {"kivi", "kivi_sink"},
       {"group-size"},
       nullptr},
      {"sinks",
       "kivi_sink: tokens kept fp16 (a comma list runs each) for the "
       "kivi_sink specs that set none",
       "N[,N...]",
       {"kivi_sink"},
       {"sinks"},
       nullptr}};
  return flags;
}

Options parseOptions(int argc, char **argv) {
  kvq::cli::setVersionPrinter("kvq-run");
  // Static: llvm::cl keeps pointers to its options (and argv may point
  // into `renamed`) for the whole run.
  static cl::OptionCategory cat("kvq-run options");
  static cl::opt<std::string> modelPath(
      cl::Positional, cl::Required,
      cl::desc("<llama2.c checkpoint, Hugging Face model folder, GGUF file, or "
               "random:dim,hidden,layers,heads,kv_heads,vocab,seq_len for "
               "random weights of that shape (--bench only)>"),
      cl::cat(cat));
  static cl::opt<std::string> tokenizerPath(
      "tokenizer",
      cl::desc("Tokenizer file: llama2.c's, or a Hugging Face tokenizer.json "
               "(default: a GGUF file's own vocabulary, else tokenizer.json, "
               "tok<vocab>.bin or tokenizer.bin next to the model or in its "
               "folder)"),
      cl::cat(cat));
  static cl::opt<std::string> prompt("prompt", cl::desc("Text to continue"),
                                     cl::init("Once upon a time"),
                                     cl::cat(cat));
  static cl::opt<int64_t> steps("steps",
                                cl::desc("Tokens to generate (default 64)"),
                                cl::init(64), cl::cat(cat));
  // Read as text and range-checked by flags.h's rule for numbers (finite,
  // within the range, the range named in the error).
  static cl::opt<std::string> temperatureText(
      "temperature",
      cl::desc("Sampling temperature in [0, 100] (default 0: greedy)"),
      cl::value_desc("T"), cl::init("0"), cl::cat(cat));
  static cl::opt<std::string> topKText(
      "top-k",
      cl::desc("Sampling: draw from the K most likely tokens only (K >= 1; "
               "default: all; 1 is greedy)"),
      cl::value_desc("K"), cl::cat(cat));
  static cl::opt<std::string> topPText(
      "top-p",
      cl::desc("Sampling: draw from the smallest set of most likely tokens "
               "whose probability reaches P, in (0, 1] (default 1: all)"),
      cl::value_desc("P"), cl::cat(cat));
  static cl::opt<uint64_t> seed("seed", cl::desc("Sampling seed (default 1)"),
                                cl::init(1), cl::cat(cat));
  static cl::opt<std::string> methods(
      "method",
      cl::desc("Comma list of cache methods: none (the graph's own f32 "
               "tensors), fp16, kivi, kivi_sink, kvquant; each may carry "
               "--kvq-quantize-kv-cache options in braces, e.g. "
               "kvquant{refit-interval=0} (default fp16)"),
      cl::init("fp16"), cl::cat(cat));
  // The numeric method flags take comma lists (listFlags()), read by the
  // shared parser (tools/common/vocabulary.h) as kvq-eval reads them.
  static std::vector<std::unique_ptr<cl::opt<std::string>>> listFlagTexts;
  for (const ListFlag &f : listFlags())
    listFlagTexts.push_back(std::make_unique<cl::opt<std::string>>(
        llvm::StringRef(f.name), cl::desc(f.help), cl::value_desc(f.valueDesc),
        cl::cat(cat)));
  static cl::opt<std::string> perplexity(
      "perplexity",
      cl::desc("Report perplexity on FILE (one document per non-empty line; "
               "text, or token ids) instead of generating"),
      cl::value_desc("FILE"), cl::cat(cat));
  static cl::opt<std::string> tokensFile(
      "tokens",
      cl::desc("Report perplexity on FILE of token ids (one document per "
               "non-empty line, ids separated by spaces, BOS not added); no "
               "tokenizer is read"),
      cl::value_desc("FILE"), cl::cat(cat));
  static cl::opt<int64_t> promptTokens(
      "prefill",
      cl::desc("Perplexity: tokens sent as one prefill before teacher-forced "
               "decoding; --bench: the prefill timed (default 128, or seq_len "
               "if shorter)"),
      cl::init(128), cl::cat(cat));
  static cl::opt<bool> klDivergence(
      "kl-divergence",
      cl::desc("Perplexity: also the mean KL divergence of each method's "
               "next-token distributions from the fp16 cache's, and how often "
               "their most likely tokens agree (fp16 runs first as the "
               "baseline; its distributions are held in memory: decoded "
               "tokens x vocabulary x 4 bytes)"),
      cl::cat(cat));
  static cl::opt<bool> json(
      "json",
      cl::desc("Generation, perplexity or benchmark results "
               "as JSON on stdout"),
      cl::cat(cat));
  static cl::opt<bool> quiet(
      "quiet",
      cl::desc("No progress lines (one per compile, prefill, context or "
               "document on stderr, printed only when it is a terminal)"),
      cl::cat(cat));
  static cl::opt<bool> bench(
      "bench",
      cl::desc("Time decode steps per method at each --contexts length, "
               "split into dense layers, attention and the rest, against the "
               "read bandwidth measured in the same run, and one prefill of "
               "--prefill tokens (docs/MODEL.md)"),
      cl::cat(cat));
  static cl::list<int64_t> contexts(
      "contexts",
      cl::desc("--bench: context lengths (default 1024,4096,8192 "
               "or what fits the model)"),
      cl::CommaSeparated, cl::cat(cat));
  static cl::opt<int> benchSteps(
      "bench-steps", cl::desc("--bench: timed steps per point (default 5)"),
      cl::init(5), cl::cat(cat));
  static cl::opt<std::string> weightTypeText(
      "weight-type",
      cl::desc("Weights as f32, f16 or bf16, kept in that type and widened "
               "in the kernels (default: the type the model's file holds "
               "them in when that is f16 or bf16, else f32; another type is "
               "a rounded copy; kvq-import --weight-type)"),
      cl::cat(cat));
  static cl::opt<std::string> dumpKv(
      "dump-kv",
      cl::desc("Run the plain model (method none) on the prompt and its "
               "--steps generated tokens, or on the first document of "
               "--perplexity / --tokens, and write every layer's keys (post- "
               "and pre-RoPE), values and queries to FILE.safetensors in "
               "layout lthd, as kvq-eval reads them (docs/MODEL.md)"),
      cl::value_desc("FILE"), cl::cat(cat));
  static cl::opt<bool> matmulKernels(
      "matmul-kernels",
      cl::desc("Run projections and FFN as kvq_matmul calls (default true); "
               "false lowers them to scalar loops, the slow path, for "
               "comparison"),
      cl::init(true), cl::cat(cat));
  cl::HideUnrelatedOptions(cat);
  static std::vector<std::string> renamed;
  kvq::cli::renameDeprecatedFlags("kvq-run", argc, argv, {"--prompt-tokens"},
                                  renamed);
  // --threads N: host threads the caches' updates and the dense layers
  // (kvq_matmul) may use (kvq_set_default_parallel; default 1). Read here, not
  // by llvm::cl, where LLVM itself registers a hidden --threads.
  const std::string threadsText =
      kvq::cli::takeFlag("kvq-run", argc, argv, "--threads");
  const int64_t threads =
      threadsText.empty() ? 1
                          : kvq::cli::parseInt("kvq-run", "--threads",
                                               threadsText, 1, KVQ_MAX_WORKERS);
  kvq::cli::parseCommandLine(
      "kvq-run", argc, argv,
      "kvq-run: compile a llama2.c model with kvq's quantized KV cache and "
      "generate text or measure perplexity\n"
      "  --threads N  host threads the caches' updates and the dense layers "
      "may use (default 1; the same bytes as one)\n");

  Options o;
  o.modelPath = modelPath;
  o.tokenizerPath = tokenizerPath;
  o.prompt = prompt;
  o.steps = steps;
  o.seed = seed;
  o.methods = methods;
  o.methodsGiven = methods.getNumOccurrences() > 0;
  o.perplexity = perplexity;
  o.tokensFile = tokensFile;
  o.prefill = promptTokens;
  o.prefillGiven = promptTokens.getNumOccurrences() > 0;
  o.klDivergence = klDivergence;
  o.json = json;
  o.quiet = quiet;
  o.bench = bench;
  o.contexts.assign(contexts.begin(), contexts.end());
  o.benchSteps = benchSteps;
  o.weightType = weightTypeText;
  o.dumpKv = dumpKv;
  o.matmulKernels = matmulKernels;
  o.threads = threads;

  o.sampling.temperature = static_cast<float>(kvq::cli::parseDouble(
      "kvq-run", "--temperature", temperatureText, 0, kMaxTemperature, false));
  if (topKText.getNumOccurrences())
    o.sampling.topK = kvq::cli::parseInt("kvq-run", "--top-k", topKText, 1,
                                         std::numeric_limits<int32_t>::max());
  if (topPText.getNumOccurrences())
    o.sampling.topP =
        kvq::cli::parseDouble("kvq-run", "--top-p", topPText, 0, 1,
                              /*hiOpen=*/false, /*loOpen=*/true);
  const bool generating =
      o.perplexity.empty() && o.tokensFile.empty() && !o.bench;
  if (!generating &&
      (topKText.getNumOccurrences() || topPText.getNumOccurrences()))
    llvm::errs() << "kvq-run: warning: --top-k and --top-p apply to "
                    "generation only: ignored\n";
  // Nothing is held yet: exiting is returning from main().
  if (o.klDivergence &&
      (o.bench || (o.perplexity.empty() && o.tokensFile.empty())))
    std::exit(fail("--kl-divergence applies to --perplexity and --tokens"));
  for (size_t i = 0; i < listFlags().size(); ++i) {
    const ListFlag &f = listFlags()[i];
    const cl::opt<std::string> &text = *listFlagTexts[i];
    if (!text.getNumOccurrences())
      continue;
    const kvq::cli::NumericOption &range = kvq::cli::numericOption(f.name);
    o.methodFlags.values[i] = kvq::cli::parseIntList(
        "kvq-run", std::string("--") + f.name, text,
        static_cast<long long>(range.lo), static_cast<long long>(range.hi));
    if (f.refuse)
      for (long long v : o.methodFlags.values[i])
        if (std::string why = f.refuse(v); !why.empty())
          std::exit(fail(why));
  }
  return o;
}

} // namespace kvq::run
