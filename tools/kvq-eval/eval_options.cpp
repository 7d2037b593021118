//===- eval_options.cpp - kvq-eval's command line -------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The flags, their ranges and the rules between them. The method flags'
// ranges and the former spellings come from the shared vocabulary
// (tools/common/vocabulary.h).
//
//===----------------------------------------------------------------------===//
#include "eval_options.h"

#include "eval_common.h"
#include "flags.h"
#include "output_path.h"
#include "version.h"
#include "vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace kvq::eval {

using kvq::cli::printable;

namespace {

const char *kUsage =
    "usage: kvq-eval --keys FILE[:NAME] [--values FILE[:NAME]]\n"
    "                [--queries FILE[:NAME]] [--layout "
    "thd|htd|bhtd|lbhtd|...]\n"
    "                --method kivi,kivi_sink,kvquant,fp16 [--bits N[,N...]]\n"
    "                [--group-size G] [--residual-length R]\n"
    "                [--residual-mode sliding|block] [--sinks N]\n"
    "                [--outlier-fraction F] [--lloyd-iters N]\n"
    "                [--kvquant-sinks N] [--refit-interval N]\n"
    "                (every numeric method flag takes a list, e.g.\n"
    "                --group-size 32,64: all combinations are evaluated)\n"
    "                [--prefill N | --fit-all]\n"
    "                [--pre-rope [--rope-theta T] [--rope-style "
    "interleaved|half]\n"
    "                 [--rope-compare]]\n"
    "                [--query-positions all|last:N|sample:N] [--seed S]\n"
    "                [--threads N] [--budget BITS] [--plot FILE.png]\n"
    "                [--json] [--save FILE] [--version]\n"
    "Files: .npy, .npz (np.savez, np.savez_compressed) or .safetensors, "
    "float16/bfloat16/float32/\n"
    "float64. FILE:NAME picks a tensor of an archive; without NAME the\n"
    "tensors named keys/values/queries (or k/v/q) are used, and --values\n"
    "defaults to the --keys archive.\n"
    "--layout names the axes: t tokens, h heads, d head_dim, b batch, l\n"
    "layers (default thd for 3-D; required for 4-D and 5-D, e.g. bhtd for a\n"
    "Hugging Face per-layer cache); every (layer, batch) is evaluated on its\n"
    "own and summarised. Q has the same layout with q_heads a multiple of\n"
    "kv_heads.\n"
    "Protocol: the first N tokens (--prefill, default 128, at most tokens - "
    "1)\n"
    "are one update (the prompt), every later token is its own update "
    "(decode);\n"
    "errors are reported for all tokens, the prefill part and the decoded "
    "part.\n"
    "--fit-all sends every token as one update (no decode steps).\n"
    "--pre-rope: --keys holds keys before RoPE (queries stay post-RoPE).\n"
    "Every cache is configured with the RoPE (--rope-theta, default 10000;\n"
    "--rope-style interleaved (pairs 2i, 2i+1; default) or half (i, i+d/2))\n"
    "and stores the keys as given; errors are measured against the keys\n"
    "rotated at positions 0, 1, 2, ... by kvq-eval itself. --rope-compare\n"
    "also runs every configuration on the rotated keys stored post-RoPE\n"
    "(rows marked pre-RoPE / post-RoPE).\n"
    "--save FILE writes the cache of the first configuration and (layer,\n"
    "batch) with kvq_cache_save and prints its size.\n"
    "Flags take --flag value or --flag=value.\n";

} // namespace

const std::vector<Sweep> &sweeps() {
  static const std::vector<Sweep> table = {
      {"--group-size",
       true,
       kvq::cli::numericOption("group-size").lo,
       kvq::cli::numericOption("group-size").hi,
       {"kivi", "kivi_sink"},
       [](kvq_config &c, double x) { c.group_size = static_cast<int32_t>(x); },
       "G"},
      {"--residual-length",
       true,
       kvq::cli::numericOption("residual-length").lo,
       kvq::cli::numericOption("residual-length").hi,
       {"kivi", "kivi_sink"},
       [](kvq_config &c, double x) {
         c.residual_length = static_cast<int32_t>(x);
       },
       "R"},
      {"--sinks",
       true,
       kvq::cli::numericOption("sinks").lo,
       kvq::cli::numericOption("sinks").hi,
       {"kivi_sink"},
       [](kvq_config &c, double x) {
         c.n_sink_tokens = static_cast<int32_t>(x);
       },
       "sinks"},
      {"--outlier-fraction",
       false,
       kvq::cli::numericOption("outlier-fraction").lo,
       kvq::cli::numericOption("outlier-fraction").hi,
       {"kvquant"},
       [](kvq_config &c, double x) {
         c.outlier_fraction = static_cast<float>(x);
       },
       "outliers"},
      {"--lloyd-iters",
       true,
       kvq::cli::numericOption("lloyd-iters").lo,
       kvq::cli::numericOption("lloyd-iters").hi,
       {"kvquant"},
       [](kvq_config &c, double x) { c.lloyd_iters = static_cast<int32_t>(x); },
       "lloyd"},
      {"--kvquant-sinks",
       true,
       kvq::cli::numericOption("kvquant-sinks").lo,
       kvq::cli::numericOption("kvquant-sinks").hi,
       {"kvquant"},
       [](kvq_config &c, double x) {
         c.kvquant_n_sink = static_cast<int32_t>(x);
       },
       "ksinks"},
      {"--refit-interval",
       true,
       kvq::cli::numericOption("refit-interval").lo,
       kvq::cli::numericOption("refit-interval").hi,
       {"kvquant"},
       [](kvq_config &c, double x) {
         c.refit_interval = static_cast<int32_t>(x);
       },
       "refit"}};
  return table;
}

namespace {

const Sweep *sweepFor(const std::string &flag) {
  for (const Sweep &sw : sweeps())
    if (flag == sw.flag)
      return &sw;
  return nullptr;
}

/// The value of a flag that names one of `names` ("FLAG expects a or b,
/// got 'x'" otherwise).
int32_t choice(kvq::cli::Parser &p,
               std::initializer_list<std::pair<const char *, int32_t>> names) {
  const std::string flag = p.name(), v = p.value();
  std::string list;
  size_t i = 0;
  for (const auto &[name, value] : names) {
    if (v == name)
      return value;
    list += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    list += name;
    ++i;
  }
  die(flag + " expects " + list + ", got '" + printable(v, 40) + "'");
}

} // namespace

Options parseOptions(int argc, char **argv) {
  Options o;
  // The shared vocabulary (tools/common/vocabulary.h): former spellings
  // keep working with a warning.
  std::vector<std::string> renamed;
  kvq::cli::renameDeprecatedFlags(kTool, argc, argv, {"--residual"}, renamed);
  kvq::cli::Parser p(kTool, argc, argv);
  while (p.next()) {
    o.given.push_back(p.name());
    if (p.is("--keys"))
      o.keys = p.value();
    else if (p.is("--values"))
      o.values = p.value();
    else if (p.is("--queries"))
      o.queries = p.value();
    else if (p.is("--layout"))
      o.layout = p.value();
    else if (p.is("--method")) {
      for (const std::string &m : p.listValue()) {
        if (m != "fp16" && m != "kivi" && m != "kivi_sink" && m != "kvquant")
          die("unknown method '" + printable(m, 40) +
              "' (fp16, kivi, kivi_sink, kvquant)");
        if (std::find(o.methods.begin(), o.methods.end(), m) == o.methods.end())
          o.methods.push_back(m);
      }
    } else if (p.is("--bits")) {
      for (long long v : kvq::cli::parseBits(kTool, p.value()))
        if (std::find(o.bits.begin(), o.bits.end(), int(v)) == o.bits.end())
          o.bits.push_back(static_cast<int>(v));
    } else if (const Sweep *sw = sweepFor(p.name())) {
      // Range-checked per item as 64-bit values before any narrowing.
      std::vector<double> &vals = o.lists[sw->flag];
      std::vector<double> given;
      if (sw->integer)
        for (long long x : kvq::cli::parseIntList(
                 kTool, sw->flag, p.value(), static_cast<long long>(sw->lo),
                 static_cast<long long>(sw->hi)))
          given.push_back(static_cast<double>(x));
      else
        for (const std::string &x : p.listValue()) {
          given.push_back(
              kvq::cli::parseDouble(kTool, sw->flag, x, sw->lo, sw->hi, true));
          if (kvq::cli::f32Underflows(given.back()))
            die(std::string(sw->flag) + " " + printable(x, 40) +
                " is held as 0 in the runtime's f32 (give 0, or at least "
                "1.4e-45)");
        }
      for (double val : given)
        if (std::find(vals.begin(), vals.end(), val) == vals.end())
          vals.push_back(val);
    } else if (p.is("--residual-mode"))
      o.residualMode = choice(p, {{"sliding", KVQ_RESIDUAL_SLIDING},
                                  {"block", KVQ_RESIDUAL_BLOCK}});
    else if (p.is("--prefill"))
      o.prefill = p.intValue(0, 1ll << 40);
    else if (p.is("--fit-all"))
      o.fitAll = p.flag();
    else if (p.is("--pre-rope"))
      o.preRope = p.flag();
    else if (p.is("--rope-compare"))
      o.ropeCompare = p.flag();
    else if (p.is("--rope-theta"))
      o.ropeTheta =
          p.doubleValue(kvq::kRopeThetaAbove, kvq::kRopeThetaMax, false, true);
    else if (p.is("--rope-style"))
      o.ropeStyle = choice(
          p, {{"interleaved", KVQ_ROPE_INTERLEAVED}, {"half", KVQ_ROPE_HALF}});
    else if (p.is("--query-positions"))
      o.queryPositions = p.value();
    else if (p.is("--seed"))
      o.seed =
          static_cast<unsigned long long>(p.intValue(0, 9223372036854775807ll));
    else if (p.is("--threads"))
      o.threads = p.intValue(1, KVQ_MAX_WORKERS);
    else if (p.is("--budget"))
      o.budget = p.doubleValue(0.5, 64, false);
    else if (p.is("--plot"))
      o.plot = p.value();
    else if (p.is("--json"))
      o.json = p.flag();
    else if (p.is("--save"))
      o.save = p.value();
    else if (p.is("--version")) {
      std::printf("kvq-eval %s\n", kvq::cli::versionString());
      std::exit(0);
    } else if (p.is("--help")) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else
      p.unknown();
  }
  if (o.keys.empty())
    die("--keys is required (see --help)");
  if (o.methods.empty())
    die("--method is required");
  if (o.fitAll && o.prefill >= 0)
    die("--fit-all and --prefill exclude each other");
  if (o.prefill == 0)
    die("--prefill must be at least 1");
  // A RoPE flag without --pre-rope would describe keys the tool treats as
  // post-RoPE: refused rather than ignored.
  if (!o.preRope)
    for (const char *f : {"--rope-theta", "--rope-style", "--rope-compare"})
      if (std::find(o.given.begin(), o.given.end(), f) != o.given.end())
        die(std::string(f) +
            " needs --pre-rope (the --keys dump holds keys before RoPE)");
  if (!o.plot.empty() &&
      (o.plot.size() < 5 || o.plot.compare(o.plot.size() - 4, 4, ".png") != 0))
    die("--plot expects a FILE.png, got '" + printable(o.plot, 80) + "'");
  // Output files are written after the evaluation: a directory that cannot
  // take them is refused before it runs, not after.
  for (const auto &[flag, path] : {std::pair<const char *, const std::string &>{
                                       "--plot", o.plot},
                                   {"--save", o.save}})
    if (!path.empty())
      if (const std::string why = kvq::cli::whyNotWritable(path); !why.empty())
        die(std::string(flag) + ": cannot write '" + printable(path, 80) +
            "': " + why);
  return o;
}

bool given(const Options &o, const char *flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

} // namespace kvq::eval
