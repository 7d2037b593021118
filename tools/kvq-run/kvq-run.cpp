//===- kvq-run.cpp - compile a llama2.c model with kvq and run it ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//   kvq-run MODEL.bin [--prompt TEXT] [--steps N] [--method LIST] ...
//   kvq-run MODEL.bin --perplexity FILE [--method LIST] [--json]
//   kvq-run MODEL.bin --tokens IDS_FILE [--method LIST] [--json]
//
// Each method compiles the model in process (kvq-import, then
// --kvq-quantize-kv-cache unless the method is `none`, --kvq-to-llvm, JIT).
// The perplexity protocol is in docs/MODEL.md.
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Bench.h"
#include "tools/kvq-run/CompiledModel.h"
#include "tools/kvq-run/DumpKv.h"
#include "tools/model/checkpoint.h"
#include "tools/model/gguf.h"
#include "tools/model/tokenizer.h"

#include "cl_version.h"
#include "flags.h"
#include "json_number.h"
#include "json_report.h"
#include "progress.h"
#include "table.h"
#include "thread_pool.h"
#include "vocabulary.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <tuple>
#include <unistd.h>

namespace cl = llvm::cl;
using namespace kvq;

namespace {

/// The largest --temperature (sampling divides the logits by it); far above
/// any useful setting, it keeps the flag's range finite and stated.
constexpr double kMaxTemperature = 100;

using kvq::cli::MethodSpec;
using kvq::cli::Json;

/// The --method specs (tools/common/vocabulary.h): `none` (the graph's own
/// f32 tensors) and the cache methods, each optionally with pass options.
std::vector<MethodSpec> parseMethods(const std::string &list,
                                     std::string *error) {
  std::vector<MethodSpec> out;
  *error = kvq::cli::parseMethodSpecs(
      "--method", list, {"none", "fp16", "kivi", "kivi_sink", "kvquant"}, out);
  if (!error->empty())
    return {};
  for (const MethodSpec &m : out)
    if (m.method == "none" && !m.options.empty())
      return *error = "--method: 'none' takes no options", std::vector<MethodSpec>{};
  *error = kvq::cli::checkMethodOptions("--method", out);
  if (!error->empty())
    return {};
  return out;
}

/// The numeric method flags that take comma lists: each one's spelling
/// (also its spec key), help, the methods that read it and the spec keys
/// that set it in a spec itself; the ranges are the shared vocabulary's
/// (kvq::cli::numericOption, tools/common/vocabulary.h), read as kvq-eval
/// reads them.
struct ListFlag {
  const char *name; ///< "bits": --bits, and the spec key bits=
  const char *help, *valueDesc;
  std::vector<std::string> methods, ownKeys;
  /// A value the range admits but the flag does not ("" if fine).
  std::string (*refuse)(long long value);
};

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

/// The values of each of listFlags(), in its order (empty: not given).
struct MethodFlags {
  std::vector<std::vector<long long>> values =
      std::vector<std::vector<long long>>(listFlags().size());
};

/// Each spec once per value of every method flag that applies to it: a
/// flag applies to the methods that read it (bits: the quantized ones;
/// group-size: kivi, kivi_sink; sinks: kivi_sink) and only to the specs
/// that do not set it themselves. A spec that becomes several is labelled
/// with the options the flags added ("kivi{bits=2}", "kivi{group-size=8
/// bits=2}"). A flag that no listed method reads is a warning on stderr.
std::vector<MethodSpec> expandSpecs(const std::vector<MethodSpec> &specs,
                                    const MethodFlags &flags) {
  struct Axis {
    std::string flag, key;
    const std::vector<long long> *values;
    std::vector<std::string> methods, ownKeys;
  };
  std::vector<Axis> axes;
  for (size_t i = 0; i < listFlags().size(); ++i) {
    const ListFlag &f = listFlags()[i];
    axes.push_back({std::string("--") + f.name, f.name, &flags.values[i],
                    f.methods, f.ownKeys});
  }
  for (const Axis &a : axes) {
    if (a.values->empty())
      continue;
    std::string ignored;
    for (const MethodSpec &m : specs)
      if (m.method != "none" && m.method != "fp16" &&
          std::find(a.methods.begin(), a.methods.end(), m.method) ==
              a.methods.end())
        ignored += (ignored.empty() ? "" : ", ") + m.label;
    if (ignored.empty())
      continue;
    std::string users;
    for (const std::string &u : a.methods)
      users += (users.empty() ? "" : ", ") + u;
    llvm::errs() << "kvq-run: warning: " << a.flag << " does not apply to "
                 << ignored << " (only to " << users << "): ignored there\n";
  }
  std::vector<MethodSpec> out;
  for (const MethodSpec &m : specs) {
    std::vector<std::vector<std::pair<std::string, std::string>>> variants = {
        {}};
    for (const Axis &a : axes) {
      bool reads = std::find(a.methods.begin(), a.methods.end(), m.method) !=
                   a.methods.end();
      bool own = false;
      for (const auto &[key, value] : m.options)
        own = own || std::find(a.ownKeys.begin(), a.ownKeys.end(), key) !=
                         a.ownKeys.end();
      if (!reads || own || a.values->empty())
        continue;
      std::vector<std::vector<std::pair<std::string, std::string>>> next;
      for (const auto &v : variants)
        for (long long x : *a.values) {
          next.push_back(v);
          next.back().push_back({a.key, std::to_string(x)});
        }
      variants = std::move(next);
    }
    for (const auto &added : variants) {
      MethodSpec e = m;
      e.options.insert(e.options.end(), added.begin(), added.end());
      if (variants.size() > 1) {
        std::string extra;
        for (const auto &[k, v] : added)
          extra += (extra.empty() ? "" : " ") + k + "=" + v;
        e.label = m.label.back() == '}'
                      ? m.label.substr(0, m.label.size() - 1) + " " + extra +
                            "}"
                      : m.label + "{" + extra + "}";
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

/// The --kvq-quantize-kv-cache options of a spec ("" for none).
std::string passOptionsFor(const MethodSpec &m) {
  if (m.method == "none")
    return "";
  std::string s = "method=" + m.method;
  std::string extra = m.passOptions();
  if (!extra.empty())
    s += " " + extra;
  return s;
}

/// How the next token is chosen: greedy at temperature 0, else drawn from
/// softmax(logits / T) restricted to the topK most likely tokens (0: all)
/// and then to the smallest set of them whose probability reaches topP.
struct Sampling {
  float temperature = 0;
  int64_t topK = 0;
  double topP = 1;
};

int32_t sample(const float *logits, int32_t vocab, const Sampling &s,
               uint64_t &rng) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best])
      best = i;
  if (s.temperature <= 0.0f)
    return best;
  // xorshift64*, top 24 bits -> [0, 1); inverse CDF of softmax(l / T).
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  double u = double((rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0;
  const double temperature = s.temperature;
  if (s.topK == 0 && s.topP >= 1) {
    double sum = 0;
    std::vector<double> p(vocab);
    for (int32_t i = 0; i < vocab; ++i)
      sum += p[i] = std::exp(double(logits[i] - logits[best]) / temperature);
    double acc = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      acc += p[i] / sum;
      if (u < acc)
        return i;
    }
    return vocab - 1;
  }
  // The candidates, most likely first (a tie: the lower id first), cut to
  // top-k, then to the shortest prefix whose probability reaches top-p.
  const int64_t k =
      s.topK > 0 ? std::min<int64_t>(s.topK, vocab) : int64_t(vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i)
    ids[size_t(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[a] > logits[b] ||
                             (logits[a] == logits[b] && a < b);
                    });
  ids.resize(size_t(k));
  std::vector<double> p(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    sum += p[i] = std::exp(double(logits[ids[i]] - logits[best]) / temperature);
  size_t keep = ids.size();
  if (s.topP < 1) {
    double acc = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      acc += p[i] / sum;
      if (acc >= s.topP) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i)
    kept += p[i];
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i] / kept;
    if (u < acc)
      return ids[i];
  }
  return ids[keep - 1];
}

/// Logits that are not all finite (finite weights too large for f32
/// arithmetic): an error naming the position, never a NaN printed as a
/// result.
std::optional<std::string> nonFiniteLogits(const float *logits, int32_t vocab,
                                           int64_t pos) {
  for (int32_t i = 0; i < vocab; ++i)
    if (!std::isfinite(logits[i]))
      return "the logits at position " + std::to_string(pos) +
             " are not finite (logit " + std::to_string(i) +
             "): the weights overflow f32 arithmetic";
  return std::nullopt;
}

double nll(const float *logits, int32_t vocab, int32_t target) {
  double mx = logits[0];
  for (int32_t i = 1; i < vocab; ++i)
    mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - mx);
  return std::log(sum) + mx - double(logits[target]);
}

/// log softmax(logits) in double, into `out` (vocab entries); returns
/// the index of the largest logit (the first one on a tie).
int32_t logSoftmax(const float *logits, int32_t vocab, std::vector<double> &out) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best])
      best = i;
  const double mx = logits[best];
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  out.resize(size_t(vocab));
  for (int32_t i = 0; i < vocab; ++i)
    out[size_t(i)] = double(logits[i]) - lse;
  return best;
}

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

/// Documents of a perplexity file: each non-empty line. A file of integers
/// only is read as token ids (one document per line, BOS not added); with
/// `idsOnly` (--tokens) it must be one, and no tokenizer is needed.
std::vector<std::vector<int32_t>> readDocuments(const std::string &path,
                                                const model::Tokenizer *tok,
                                                int32_t vocab, bool idsOnly,
                                                std::string *error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open";
    return {};
  }
  std::vector<std::string> lines;
  std::vector<size_t> lineNumbers;
  size_t number = 0;
  for (std::string line; std::getline(in, line);)
    if (++number, line.find_first_not_of(" \t\r") != std::string::npos) {
      lines.push_back(line);
      lineNumbers.push_back(number);
    }
  bool ids = !lines.empty();
  for (size_t i = 0; i < lines.size(); ++i) {
    bool digits =
        lines[i].find_first_not_of("0123456789 \t\r") == std::string::npos;
    if (idsOnly && !digits) {
      *error = path + ": line " + std::to_string(lineNumbers[i]) +
               " is not token ids (non-negative integers separated by spaces)";
      return {};
    }
    ids = ids && digits;
  }
  std::vector<std::vector<int32_t>> docs;
  for (const std::string &l : lines) {
    if (!ids) {
      docs.push_back(tok->encode(l, /*bos=*/true));
      continue;
    }
    std::istringstream s(l);
    std::vector<int32_t> d;
    for (std::string word; s >> word;) {
      // At most 10 digits: beyond any vocabulary, never an overflow.
      long long v = word.size() > 10 ? -1 : std::stoll(word);
      if (v < 0 || v >= vocab) {
        *error = path + ": token id " + kvq::cli::printable(word, 24) +
                 " is outside the vocabulary [0, " + std::to_string(vocab) +
                 ")";
        return {};
      }
      d.push_back(int32_t(v));
    }
    docs.push_back(d);
  }
  if (docs.empty())
    *error = path + ": no documents (one per non-empty line)";
  return docs;
}

/// `x` as "%.*g" prints it (the spelling of pass options).
std::string gNumber(double x, int digits = 6) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, x);
  return buf;
}

/// The resolved cache configuration in the spelling of the pass options
/// (docs/CLI.md), only the parameters the method reads.
std::string describeCache(const run::CacheSummary &c) {
  std::string s = "method=" + c.method;
  auto add = [&](const char *key, const std::string &value) {
    s += std::string(" ") + key + "=" + value;
  };
  if (c.method == "none") {
    add("element-type", c.elementType);
    return s;
  }
  add("key-bits", std::to_string(c.keyBits));
  add("value-bits", std::to_string(c.valueBits));
  if (c.method == "kivi" || c.method == "kivi_sink") {
    add("group-size", std::to_string(c.groupSize));
    add("residual-length", std::to_string(c.residualLength));
    add("residual-mode", c.residualMode);
  }
  if (c.method == "kivi_sink")
    add("sinks", std::to_string(c.sinks));
  if (c.method == "kvquant") {
    add("outlier-fraction", gNumber(c.outlierFraction));
    add("lloyd-iters", std::to_string(c.lloydIters));
    add("refit-interval", std::to_string(c.refitInterval));
    add("kvquant-sinks", std::to_string(c.kvquantSinks));
  }
  add("pre-rope", c.preRope ? "true" : "false");
  if (c.preRope)
    add("rope-style", c.ropeStyle);
  return s;
}

/// The same as a JSON object (keys in docs/CLI.md, "kvq-run output").
Json cacheJson(const run::CacheSummary &c) {
  Json j;
  j["method"] = c.method;
  j["element_type"] = c.elementType;
  if (c.method != "none") {
    j["key_bits"] = c.keyBits;
    j["value_bits"] = c.valueBits;
    if (c.method == "kivi" || c.method == "kivi_sink") {
      j["group_size"] = c.groupSize;
      j["residual_length"] = c.residualLength;
      j["residual_mode"] = c.residualMode;
    }
    if (c.method == "kivi_sink")
      j["sinks"] = c.sinks;
    if (c.method == "kvquant") {
      j["outlier_fraction"] = cli::significant(c.outlierFraction, 6);
      j["lloyd_iters"] = c.lloydIters;
      j["refit_interval"] = c.refitInterval;
      j["kvquant_sinks"] = c.kvquantSinks;
    }
    j["pre_rope"] = c.preRope;
    if (c.preRope) {
      j["rope_style"] = c.ropeStyle;
      j["rope_theta"] = cli::significant(c.ropeTheta, 6);
    }
  }
  return j;
}

/// Effective bits per cached K/V element and the cache's bytes: the kvq
/// cache's own accounting, or for the plain model (none) the graph's
/// tensors for the whole context.
void cacheSize(const run::CompiledModel &model,
               const model::Llama2cConfig &config, int64_t bytes,
               int64_t fp16, int64_t sequences, double *effectiveBits,
               int64_t *cacheBytes) {
  if (model.quantized()) {
    *effectiveBits = fp16 > 0 ? 16.0 * double(bytes) / double(fp16) : 16.0;
    *cacheBytes = bytes / std::max<int64_t>(sequences, 1);
    return;
  }
  const int64_t element = model.cacheSummary().elementType == "f16" ? 2 : 4;
  *effectiveBits = 8.0 * double(element);
  *cacheBytes = int64_t(config.layers) * config.seqLen * config.kvDim() * 2 *
                element;
}

struct Result {
  MethodSpec spec;
  std::string options;
  run::CacheSummary cache;
  double perplexity = 0, effectiveBits = 16, tokensPerSecond = 0;
  /// ppl * standard error of the mean per-token NLL (NaN: one token).
  double perplexityStderr = NAN;
  /// --kl-divergence: mean KL(fp16 || this) per token, its standard error,
  /// and the fraction of tokens whose most likely next token is fp16's.
  double kl = NAN, klStderr = NAN, top1 = NAN;
  int64_t cacheBytes = 0, decoded = 0;
};

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
#if defined(__GLIBC__)
  // The compiled graph allocates every intermediate buffer per call (a
  // 512-token prefill: tens of MB each). glibc would map and unmap those,
  // so every call faulted its pages in again (a third of a prefill's time
  // on the CI box); keep freed memory for reuse instead.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  kvq::cli::setVersionPrinter("kvq-run");
  cl::OptionCategory cat("kvq-run options");
  cl::opt<std::string> modelPath(
      cl::Positional, cl::Required,
      cl::desc("<llama2.c checkpoint, Hugging Face model folder, GGUF file, or "
               "random:dim,hidden,layers,heads,kv_heads,vocab,seq_len for "
               "random weights of that shape (--bench only)>"),
      cl::cat(cat));
  cl::opt<std::string> tokenizerPath(
      "tokenizer",
      cl::desc("Tokenizer file: llama2.c's, or a Hugging Face tokenizer.json "
               "(default: a GGUF file's own vocabulary, else tokenizer.json, "
               "tok<vocab>.bin or tokenizer.bin next to the model or in its "
               "folder)"),
      cl::cat(cat));
  cl::opt<std::string> prompt("prompt", cl::desc("Text to continue"),
                              cl::init("Once upon a time"), cl::cat(cat));
  cl::opt<int64_t> steps("steps", cl::desc("Tokens to generate (default 64)"),
                         cl::init(64), cl::cat(cat));
  // Read as text and range-checked by flags.h's rule for numbers (finite,
  // within the range, the range named in the error).
  cl::opt<std::string> temperatureText(
      "temperature",
      cl::desc("Sampling temperature in [0, 100] (default 0: greedy)"),
      cl::value_desc("T"), cl::init("0"), cl::cat(cat));
  cl::opt<std::string> topKText(
      "top-k",
      cl::desc("Sampling: draw from the K most likely tokens only (K >= 1; "
               "default: all; 1 is greedy)"),
      cl::value_desc("K"), cl::cat(cat));
  cl::opt<std::string> topPText(
      "top-p",
      cl::desc("Sampling: draw from the smallest set of most likely tokens "
               "whose probability reaches P, in (0, 1] (default 1: all)"),
      cl::value_desc("P"), cl::cat(cat));
  cl::opt<uint64_t> seed("seed", cl::desc("Sampling seed (default 1)"),
                         cl::init(1), cl::cat(cat));
  cl::opt<std::string> methods(
      "method",
      cl::desc("Comma list of cache methods: none (the graph's own f32 "
               "tensors), fp16, kivi, kivi_sink, kvquant; each may carry "
               "--kvq-quantize-kv-cache options in braces, e.g. "
               "kvquant{refit-interval=0} (default fp16)"),
      cl::init("fp16"), cl::cat(cat));
  // The numeric method flags take comma lists (listFlags()), read by the
  // shared parser (tools/common/vocabulary.h) as kvq-eval reads them.
  std::vector<std::unique_ptr<cl::opt<std::string>>> listFlagTexts;
  for (const ListFlag &f : listFlags())
    listFlagTexts.push_back(std::make_unique<cl::opt<std::string>>(
        llvm::StringRef(f.name), cl::desc(f.help), cl::value_desc(f.valueDesc),
        cl::cat(cat)));
  cl::opt<std::string> perplexity(
      "perplexity",
      cl::desc("Report perplexity on FILE (one document per non-empty line; "
               "text, or token ids) instead of generating"),
      cl::value_desc("FILE"), cl::cat(cat));
  cl::opt<std::string> tokensFile(
      "tokens",
      cl::desc("Report perplexity on FILE of token ids (one document per "
               "non-empty line, ids separated by spaces, BOS not added); no "
               "tokenizer is read"),
      cl::value_desc("FILE"), cl::cat(cat));
  cl::opt<int64_t> promptTokens(
      "prefill",
      cl::desc("Perplexity: tokens sent as one prefill before teacher-forced "
               "decoding; --bench: the prefill timed (default 128)"),
      cl::init(128), cl::cat(cat));
  cl::opt<bool> klDivergence(
      "kl-divergence",
      cl::desc("Perplexity: also the mean KL divergence of each method's "
               "next-token distributions from the fp16 cache's, and how often "
               "their most likely tokens agree (fp16 runs first as the "
               "baseline; its distributions are held in memory: decoded "
               "tokens x vocabulary x 4 bytes)"),
      cl::cat(cat));
  cl::opt<bool> json("json",
                     cl::desc("Generation, perplexity or benchmark results "
                              "as JSON on stdout"),
                     cl::cat(cat));
  cl::opt<bool> quiet(
      "quiet",
      cl::desc("No progress lines (one per compile, prefill, context or "
               "document on stderr, printed only when it is a terminal)"),
      cl::cat(cat));
  cl::opt<bool> bench(
      "bench",
      cl::desc("Time decode steps per method at each --contexts length, "
               "split into dense layers, attention and the rest, against the "
               "read bandwidth measured in the same run, and one prefill of "
               "--prefill tokens (docs/MODEL.md)"),
      cl::cat(cat));
  cl::list<int64_t> contexts(
      "contexts",
      cl::desc("--bench: context lengths (default 1024,4096,8192 "
               "or what fits the model)"),
      cl::CommaSeparated, cl::cat(cat));
  cl::opt<int> benchSteps(
      "bench-steps", cl::desc("--bench: timed steps per point (default 5)"),
      cl::init(5), cl::cat(cat));
  cl::opt<std::string> weightTypeText(
      "weight-type",
      cl::desc("Weights as f32, f16 or bf16, kept in that type and widened "
               "in the kernels (default: the type the model's file holds "
               "them in when that is f16 or bf16, else f32; another type is "
               "a rounded copy; kvq-import --weight-type)"),
      cl::cat(cat));
  cl::opt<std::string> dumpKv(
      "dump-kv",
      cl::desc("Run the plain model (method none) on the prompt and its "
               "--steps generated tokens, or on the first document of "
               "--perplexity / --tokens, and write every layer's keys (post- "
               "and pre-RoPE), values and queries to FILE.safetensors in "
               "layout lthd, as kvq-eval reads them (docs/MODEL.md)"),
      cl::value_desc("FILE"), cl::cat(cat));
  cl::opt<bool> matmulKernels(
      "matmul-kernels",
      cl::desc("Run projections and FFN as kvq_matmul calls (default true); "
               "false lowers them to scalar loops, the slow path, for "
               "comparison"),
      cl::init(true), cl::cat(cat));
  cl::HideUnrelatedOptions(cat);
  std::vector<std::string> renamed;
  kvq::cli::renameDeprecatedFlags("kvq-run", argc, argv, {"--prompt-tokens"},
                                  renamed);
  // --threads N: host threads the caches' updates and the dense layers
  // (kvq_matmul) may use (kvq_set_default_parallel; default 1). Read here, not by llvm::cl,
  // where LLVM itself registers a hidden --threads.
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

  const kvq::cli::Progress progress("kvq-run", quiet);
  // One line, as every kvq tool's errors (tools/common/flags.h).
  auto fail = [](const std::string &message) {
    std::string line = message;
    while (!line.empty() && (line.back() == '\n' || line.back() == ' '))
      line.pop_back();
    for (char &c : line)
      if (c == '\n' || c == '\r')
        c = ' ';
    llvm::errs() << "kvq-run: error: " << line << "\n";
    return 2;
  };
  const float temperature = static_cast<float>(kvq::cli::parseDouble(
      "kvq-run", "--temperature", temperatureText, 0, kMaxTemperature, false));
  Sampling sampling;
  sampling.temperature = temperature;
  if (topKText.getNumOccurrences())
    sampling.topK = kvq::cli::parseInt("kvq-run", "--top-k", topKText, 1,
                                       std::numeric_limits<int32_t>::max());
  if (topPText.getNumOccurrences())
    sampling.topP = kvq::cli::parseDouble("kvq-run", "--top-p", topPText, 0, 1,
                                          /*hiOpen=*/false, /*loOpen=*/true);
  const bool generating = perplexity.empty() && tokensFile.empty() && !bench;
  if (!generating && (topKText.getNumOccurrences() ||
                      topPText.getNumOccurrences()))
    llvm::errs() << "kvq-run: warning: --top-k and --top-p apply to "
                    "generation only: ignored\n";
  if (klDivergence && (bench || (perplexity.empty() && tokensFile.empty())))
    return fail("--kl-divergence applies to --perplexity and --tokens");
  // Every cache the compiled models create, and every kvq_matmul call,
  // uses the pool (same bytes as one thread); none is set up for one
  // thread.
  std::unique_ptr<kvqbench::ThreadPool> pool;
  if (threads > 1) {
    pool = std::make_unique<kvqbench::ThreadPool>(static_cast<int>(threads));
    kvq_parallel handle = pool->handle();
    if (kvq_set_default_parallel(&handle) != KVQ_OK)
      return fail(std::string("--threads: ") + kvq_last_error());
  }
  MethodFlags methodFlags;
  for (size_t i = 0; i < listFlags().size(); ++i) {
    const ListFlag &f = listFlags()[i];
    const cl::opt<std::string> &text = *listFlagTexts[i];
    if (!text.getNumOccurrences())
      continue;
    const kvq::cli::NumericOption &range = kvq::cli::numericOption(f.name);
    methodFlags.values[i] = kvq::cli::parseIntList(
        "kvq-run", std::string("--") + f.name, text,
        static_cast<long long>(range.lo), static_cast<long long>(range.hi));
    if (f.refuse)
      for (long long v : methodFlags.values[i])
        if (std::string why = f.refuse(v); !why.empty())
          return fail(why);
  }
  std::string error;
  std::string path = modelPath;
  std::string scratch; // a generated random checkpoint, removed at exit
  if (path.rfind("random:", 0) == 0) {
    int32_t h[7];
    if (std::sscanf(path.c_str() + 7, "%d,%d,%d,%d,%d,%d,%d", &h[0], &h[1],
                    &h[2], &h[3], &h[4], &h[5], &h[6]) != 7)
      return fail("random: expects dim,hidden,layers,heads,kv_heads,vocab,"
                  "seq_len");
    auto shape = model::parseLlama2cHeader(h, &error);
    if (!shape)
      return fail(error);
    if (!bench)
      return fail("random weights are for --bench only");
    char tmpl[] = "/tmp/kvq-run-random-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0)
      return fail("cannot create a temporary checkpoint");
    close(fd);
    scratch = path = tmpl;
    // Uniform weights of variance 1/dim keep activations at unit scale.
    float scale = std::sqrt(3.0f / float(shape->dim));
    if (!model::writeRandomLlama2c(path, *shape, 7, scale, &error)) {
      std::remove(path.c_str());
      return fail(error);
    }
  }
  struct Remove {
    std::string path;
    ~Remove() {
      if (!path.empty())
        std::remove(path.c_str());
    }
  } removeScratch{scratch};
  auto ckpt = model::openCheckpoint(path, &error);
  if (!ckpt)
    return fail(error);
  const auto &config = ckpt->config();
  run::CompileOptions compileOptions;
  compileOptions.matmulKernels = matmulKernels;
  import::ImportOptions spelling;
  if (weightTypeText.empty())
    spelling.weightType = import::storedWeightType(*ckpt);
  else if (auto w = import::parseWeightType(weightTypeText))
    spelling.weightType = *w;
  else
    return fail("--weight-type must be f32, f16 or bf16, got '" +
                std::string(weightTypeText) + "'");
  if (!dumpKv.empty()) {
    if (bench)
      return fail("--dump-kv and --bench do not combine");
    if (methods.getNumOccurrences() && methods != "none")
      return fail("--dump-kv runs the plain model; --method must be none "
                  "or left out");
    // Refuse an unwritable path before the run.
    if (!std::ofstream(dumpKv, std::ios::binary | std::ios::trunc))
      return fail("--dump-kv: cannot write '" + std::string(dumpKv) + "'");
  }
  if (bench) {
    std::vector<std::pair<std::string, std::string>> benchMethods;
    std::vector<MethodSpec> specs = parseMethods(methods, &error);
    if (specs.empty())
      return fail(error.empty() ? "--method is empty" : error);
    specs = expandSpecs(specs, methodFlags);
    for (const MethodSpec &m : specs) {
      if (m.method == "none")
        return fail("--bench times kvq caches; 'none' has no runtime cache");
      benchMethods.push_back({m.label, passOptionsFor(m)});
    }
    std::vector<int64_t> points(contexts.begin(), contexts.end());
    if (points.empty())
      for (int64_t p : {1024, 4096, 8192})
        if (p + benchSteps <= config.seqLen)
          points.push_back(p);
    if (points.empty())
      points.push_back(config.seqLen / 2);
    if (benchSteps < 1 || benchSteps > 1000)
      return fail("--bench-steps must be in [1, 1000]");
    if (promptTokens < 1 || promptTokens > config.seqLen)
      return fail("--prefill must be in [1, " + std::to_string(config.seqLen) +
                  "]");
    return run::runDecodeBench(*ckpt, benchMethods, points, benchSteps, json,
                               spelling, compileOptions, promptTokens,
                               int(threads), progress);
  }
  if (!tokensFile.empty() && !perplexity.empty())
    return fail("--tokens and --perplexity both name the documents; give one");
  const bool idsOnly = !tokensFile.empty();
  const std::string evalFile =
      idsOnly ? std::string(tokensFile) : std::string(perplexity);
  std::string tokPath = tokenizerPath;
  std::optional<model::Tokenizer> tok;
  if (tokPath.empty() && !idsOnly && model::isGguf(path)) {
    // A GGUF's own vocabulary, when it has one.
    bool present = false;
    tok = model::openGgufTokenizer(path, config.vocab, &present, &error);
    if (present && !tok)
      return fail(error);
  }
  if (tokPath.empty() && !idsOnly && !tok) {
    // Next to a file; inside a folder.
    std::string dir = path.substr(0, path.find_last_of('/') + 1);
    if (model::isDirectory(path))
      dir = path + "/";
    for (std::string name : {std::string("tokenizer.json"),
                             "tok" + std::to_string(config.vocab) + ".bin",
                             std::string("tokenizer.bin")}) {
      if (std::ifstream(dir + name)) {
        tokPath = dir + name;
        break;
      }
    }
    if (tokPath.empty())
      return fail("no tokenizer next to " + modelPath +
                  " (tokenizer.json, tok" + std::to_string(config.vocab) +
                  ".bin or tokenizer.bin); pass --tokenizer");
  }
  const bool tokJson = tokPath.size() > 5 &&
                       tokPath.compare(tokPath.size() - 5, 5, ".json") == 0;
  if (!tokPath.empty() &&
      !(tok = tokJson
                  ? model::Tokenizer::loadJson(tokPath, config.vocab, &error)
                  : model::Tokenizer::load(tokPath, config.vocab, &error)))
    return fail(error);
  std::vector<MethodSpec> specs = parseMethods(methods, &error);
  if (specs.empty())
    return fail(error.empty() ? "--method is empty" : error);
  specs = expandSpecs(specs, methodFlags);
  if (steps < 0)
    return fail("--steps must not be negative");
  using clock = std::chrono::steady_clock;

  if (!dumpKv.empty()) {
    std::vector<int32_t> seq;
    if (!evalFile.empty()) {
      auto docs = readDocuments(evalFile, tok ? &*tok : nullptr, config.vocab,
                                idsOnly, &error);
      if (docs.empty())
        return fail(error);
      seq = docs.front();
      if (int64_t(seq.size()) > config.seqLen)
        seq.resize(config.seqLen);
    } else {
      seq = tok->encode(prompt, /*bos=*/true);
      if (int64_t(seq.size()) + steps > config.seqLen)
        return fail("prompt plus --steps exceed the model's context of " +
                    std::to_string(config.seqLen) + " tokens");
    }
    const int64_t prefillLen = int64_t(seq.size());
    auto model = run::CompiledModel::compile(*ckpt, prefillLen, "", &error,
                                             spelling, compileOptions);
    if (!model)
      return fail("none: " + error);
    const float *logits = model->prefill(seq.data(), 0);
    if (!logits)
      return fail("none: " + model->error());
    if (evalFile.empty()) {
      uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
      for (int64_t made = 0; made < steps; ++made) {
        int64_t pos = int64_t(seq.size());
        if (auto bad = nonFiniteLogits(logits, config.vocab, pos - 1))
          return fail("none: " + *bad);
        int32_t next = sample(logits, config.vocab, sampling, rng);
        if (next == tok->bos() || next == tok->eos())
          break;
        seq.push_back(next);
        if (!(logits = model->decode(next, pos)))
          return fail("none: " + model->error());
      }
    }
    if (!run::dumpKv(*model, *ckpt, seq, dumpKv, modelPath, &error))
      return fail(error);
    llvm::outs() << "wrote the keys (post- and pre-RoPE), values and queries "
                    "of "
                 << seq.size() << " tokens, " << config.layers
                 << " layers to " << dumpKv << " (layout lthd)\n";
    return 0;
  }

  if (evalFile.empty()) {
    // Generation, once per method. Human output streams the text as it is
    // made; --json collects it.
    std::vector<int32_t> ids = tok->encode(prompt, /*bos=*/true);
    if (int64_t(ids.size()) + steps > config.seqLen)
      return fail("prompt plus --steps exceed the model's context of " +
                  std::to_string(config.seqLen) + " tokens");
    auto say = [&](const std::string &text) {
      if (!json) {
        llvm::outs() << text;
        llvm::outs().flush();
      }
    };
    Json rows = Json::array();
    for (const MethodSpec &m : specs) {
      const std::string options = passOptionsFor(m);
      auto model = run::CompiledModel::compile(
          *ckpt, int64_t(ids.size()), options, &error, spelling,
          compileOptions);
      if (!model)
        return fail(m.label + ": " + error);
      progress("%s: compiled", m.label.c_str());
      uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
      say("[" + m.label + "] " + std::string(prompt));
      std::string text;
      const float *logits = model->prefill(ids.data(), 0);
      if (!logits) {
        say("\n");
        return fail(m.label + ": " + model->error());
      }
      int32_t prev = ids.back();
      auto start = clock::now();
      int64_t made = 0;
      for (int64_t pos = int64_t(ids.size()); made < steps; ++pos) {
        if (auto bad = nonFiniteLogits(logits, config.vocab, pos - 1)) {
          say("\n");
          return fail(m.label + ": " + *bad);
        }
        int32_t next = sample(logits, config.vocab, sampling, rng);
        if (next == tok->bos() || next == tok->eos())
          break;
        std::string piece = tok->decode(prev, next);
        text += piece;
        say(piece);
        prev = next;
        ++made;
        if (made < steps && !(logits = model->decode(next, pos))) {
          say("\n");
          return fail(m.label + ": " + model->error());
        }
      }
      double secs = std::chrono::duration<double>(clock::now() - start).count();
      const double rate = made / std::max(secs, 1e-9);
      run::CacheStats st = model->stats();
      double effectiveBits = 0;
      int64_t cacheBytes = 0;
      cacheSize(*model, config, st.totalBytes, st.fp16Bytes, 1, &effectiveBits,
                &cacheBytes);
      const run::CacheSummary &cache = model->cacheSummary();
      if (!json) {
        llvm::outs() << "\n  (" << made << " tokens, "
                     << llvm::format("%.1f", rate) << " tokens/s)\n"
                     << "  cache: " << describeCache(cache) << "; "
                     << llvm::format("%.2f", effectiveBits)
                     << " effective bits, " << cacheBytes << " bytes\n";
        continue;
      }
      Json row;
      row["method"] = m.label;
      row["pass_options"] = options;
      row["cache"] = cacheJson(cache);
      row["effective_bits"] = cli::fixed(effectiveBits, 4);
      row["cache_bytes"] = cacheBytes;
      row["generated_tokens"] = made;
      row["text"] = text;
      row["tokens_per_second"] = cli::fixed(rate, 1);
      rows.push_back(std::move(row));
    }
    if (json) {
      Json doc;
      doc["model"] = modelPath;
      doc["prompt"] = prompt;
      doc["prompt_tokens"] = ids.size();
      doc["steps"] = int64_t(steps);
      doc["temperature"] = cli::significant(temperature, 6);
      doc["top_k"] = sampling.topK;
      doc["top_p"] = cli::significant(sampling.topP, 6);
      doc["seed"] = uint64_t(seed);
      doc["weight_type"] = import::weightTypeName(spelling.weightType);
      doc["results"] = std::move(rows);
      llvm::outs() << cli::jsonReport(doc);
    }
    return 0;
  }

  // Perplexity.
  auto docs = readDocuments(evalFile, tok ? &*tok : nullptr, config.vocab,
                            idsOnly, &error);
  if (docs.empty())
    return fail(error);
  if (promptTokens < 1 || promptTokens >= config.seqLen)
    return fail("--prefill must be in [1, " +
                std::to_string(config.seqLen - 1) + "]");
  size_t usable = 0;
  for (auto &d : docs) {
    if (int64_t(d.size()) > config.seqLen)
      d.resize(config.seqLen);
    usable += int64_t(d.size()) > promptTokens;
  }
  if (usable == 0)
    return fail("no document is longer than --prefill " +
                std::to_string(promptTokens));
  bool hasNone = false;
  for (auto &m : specs)
    hasNone = hasNone || m.method == "none";
  if (!hasNone)
    specs.insert(specs.begin(), MethodSpec{"none", "none", {}});
  // --kl-divergence: the baseline is the first plain fp16 spec (added after
  // none when there is none); it runs first, and its log-probabilities and
  // most likely tokens at every decoded position are kept.
  size_t baseline = specs.size();
  if (klDivergence) {
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
  std::vector<Result> results(specs.size());
  int64_t weightBytes = 0; // the checkpoint's and the first model's
  bool first = true;
  for (size_t index : order) {
    const MethodSpec &m = specs[index];
    Result &r = results[index];
    r.spec = m;
    r.options = passOptionsFor(m);
    auto model =
        run::CompiledModel::compile(*ckpt, promptTokens, r.options, &error,
                                    spelling, compileOptions);
    if (!model)
      return fail(m.label + ": " + error);
    progress("%s: compiled", m.label.c_str());
    if (first)
      weightBytes = ckpt->heldWeightBytes() + model->ownWeightBytes();
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
      if (!model->reset(&error))
        return fail(error);
      const float *logits = model->prefill(d.data(), 0);
      if (!logits)
        return fail(m.label + ": " + model->error());
      auto start = clock::now();
      for (int64_t i = promptTokens; i < int64_t(d.size()); ++i) {
        if (auto bad = nonFiniteLogits(logits, config.vocab, i - 1))
          return fail(m.label + ": " + *bad);
        const double x = nll(logits, config.vocab, d[i]);
        total += x;
        totalSq += x * x;
        if (klDivergence) {
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
        if (i + 1 < int64_t(d.size()) && !(logits = model->decode(d[i], i)))
          return fail(m.label + ": " + model->error());
      }
      seconds += std::chrono::duration<double>(clock::now() - start).count();
      progress("%s: document %zu/%zu, %lld tokens decoded", m.label.c_str(),
               document, usable,
               static_cast<long long>(int64_t(d.size()) - promptTokens));
      run::CacheStats s = model->stats();
      bytes += s.totalBytes;
      fp16 += s.fp16Bytes;
    }
    const auto [meanNll, nllStderr] = meanAndStderr(total, totalSq, r.decoded);
    r.perplexity = std::exp(meanNll);
    r.perplexityStderr = r.perplexity * nllStderr;
    if (klDivergence) {
      std::tie(r.kl, r.klStderr) = meanAndStderr(klSum, klSq, r.decoded);
      r.top1 = double(agree) / double(r.decoded);
    }
    seconds = std::max(seconds - klSeconds, 0.0);
    r.tokensPerSecond = double(r.decoded) / std::max(seconds, 1e-9);
    r.cache = model->cacheSummary();
    cacheSize(*model, config, bytes, fp16, int64_t(usable), &r.effectiveBits,
              &r.cacheBytes);
    if (!json)
      llvm::errs() << "  " << m.label << ": perplexity "
                   << llvm::format("%.4f", r.perplexity) << "\n";
  }
  double base = results.front().perplexity;
  if (json) {
    Json doc;
    doc["model"] = modelPath;
    doc["eval_file"] = evalFile;
    doc["documents"] = usable;
    doc["prompt_tokens"] = int64_t(promptTokens);
    doc["decoded_tokens"] = results.front().decoded;
    doc["weight_type"] = import::weightTypeName(spelling.weightType);
    doc["weight_bytes"] = weightBytes;
    if (klDivergence)
      doc["kl_baseline"] = specs[baseline].label;
    Json rows = Json::array();
    for (const Result &r : results) {
      Json row;
      row["method"] = r.spec.label;
      row["pass_options"] = r.options;
      row["cache"] = cacheJson(r.cache);
      row["effective_bits"] = cli::fixed(r.effectiveBits, 4);
      row["cache_bytes"] = r.cacheBytes;
      row["perplexity"] = cli::fixed(r.perplexity, 6);
      row["ppl_stderr"] = cli::significant(r.perplexityStderr, 6);
      row["delta_perplexity"] = cli::fixed(r.perplexity - base, 6);
      if (klDivergence) {
        row["kl_divergence"] = cli::significant(r.kl, 6);
        row["kl_divergence_stderr"] = cli::significant(r.klStderr, 6);
        row["top1_agreement"] = cli::significant(r.top1, 6);
      }
      row["tokens_per_second"] = cli::fixed(r.tokensPerSecond, 1);
      rows.push_back(std::move(row));
    }
    doc["results"] = std::move(rows);
    llvm::outs() << cli::jsonReport(doc);
    return 0;
  }
  llvm::outs() << "perplexity of " << modelPath << " on " << evalFile << ": "
               << usable << " documents, " << promptTokens << "-token prefill, "
               << results.front().decoded
               << " tokens decoded one at a time (teacher forcing); weights "
               << import::weightTypeName(spelling.weightType) << ", "
               << weightBytes << " bytes\n\n";
  auto fixed = [](double x, const char *fmt) -> std::string {
    if (!std::isfinite(x))
      return "n/a";
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, x);
    return buf;
  };
  const int labelWidth = kvq::cli::labelColumnWidth(
      "method", results, [](const Result &r) { return r.spec.label; });
  llvm::outs() << llvm::format("%-*s %9s %12s %11s %9s %9s", labelWidth,
                               "method",
                               "eff bits", "cache bytes", "perplexity",
                               "± ppl", "delta");
  if (klDivergence)
    llvm::outs() << llvm::format(" %10s %10s %7s", "KL div", "± KL",
                                 "top-1 %");
  llvm::outs() << llvm::format(" %9s\n", "tok/s");
  for (const Result &r : results) {
    llvm::outs() << llvm::format(
        "%-*s %9.2f %12lld %11.4f %8s %+9.4f", labelWidth, r.spec.label.c_str(),
        r.effectiveBits, (long long)r.cacheBytes, r.perplexity,
        fixed(r.perplexityStderr, "%.4f").c_str(), r.perplexity - base);
    if (klDivergence)
      llvm::outs() << llvm::format(" %10s %10s %7s",
                                   fixed(r.kl, "%.6f").c_str(),
                                   fixed(r.klStderr, "%.6f").c_str(),
                                   fixed(100 * r.top1, "%.2f").c_str());
    llvm::outs() << llvm::format(" %9.0f\n", r.tokensPerSecond);
  }
  llvm::outs() << "\n± ppl: perplexity x the standard error of the mean "
                  "per-token NLL\n";
  if (klDivergence)
    llvm::outs() << "KL div: mean KL divergence per token from "
                 << specs[baseline].label
                 << "'s next-token distribution; top-1 %: tokens whose most "
                    "likely next token is the same\n";
  llvm::outs() << "cache bytes: mean per document at its end (none: the "
                  "graph's f32 tensors for the whole context)\n\ncaches:\n";
  for (const Result &r : results)
    llvm::outs() << "  " << r.spec.label << ": " << describeCache(r.cache)
                 << "\n";
  return 0;
}
