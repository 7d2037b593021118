//===- kvq_eval.cpp - Judge kvq's methods on your own K/V dumps -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Loads K, V (and optionally Q) from .npy, .npz or .safetensors files in a
// named layout (thd, htd, bhtd, lbhtd, ...), runs each requested method and
// width through the runtime exactly as a model would (a prompt-sized
// prefill, then one token per update), layer by layer, and reports
// reconstruction error (MSE, relative error, SNR), attention error -- over
// all tokens and separately for the prefill and the decoded part -- and the
// byte accounting, as a table or as JSON that records the inputs, the
// configuration of every row and the kvq version; a sweep of widths can be
// plotted and a budget in bits turned into a recommendation. With
// --pre-rope the keys are a pre-RoPE dump: every cache stores them before
// the rotation, and the reference rotates them itself (--rope-compare adds
// the same configurations storing the rotated keys).
//
//===----------------------------------------------------------------------===//
#include "flags.h"
#include "vocabulary.h"
#include "kvq/config_limits.h"
#include "kvq/runtime.h"
#include "reference_attention.h"
#include "tensor_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

// No a * b + c fused into one rounding anywhere in this file (clang fuses
// by default where the target has FMA, e.g. on arm64): the errors are the
// same bits on every architecture and in every ISA clone.
#pragma STDC FP_CONTRACT OFF

namespace {

using json = nlohmann::ordered_json;
using kvq::cli::printable;

const char *kTool = "kvq-eval";

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

constexpr long long kDefaultPrefill = 128;

[[noreturn]] void die(const std::string &msg) { kvq::cli::fail(kTool, msg); }

/// --save: the cache as kvq_cache_save writes it (docs/RUNTIME.md, "Saved
/// cache format"), and its size next to the payload's.
void saveCache(const kvq_cache_t *cache, const std::string &path,
               const std::string &label) {
  int64_t size = 0;
  kvq_stats st;
  if (kvq_cache_save(cache, nullptr, 0, &size) != KVQ_OK ||
      kvq_cache_stats(cache, -1, &st) != KVQ_OK)
    die(std::string("--save: ") + kvq_last_error());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (kvq_cache_save(cache, bytes.data(), size, &size) != KVQ_OK)
    die(std::string("--save: ") + kvq_last_error());
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0)
    die("--save: cannot write '" + path + "'");
  std::fprintf(stderr,
               "kvq-eval: saved the %s cache to %s: %lld bytes (payload "
               "%lld + %lld of header and bookkeeping)\n",
               label.c_str(), path.c_str(), static_cast<long long>(size),
               static_cast<long long>(st.total_bytes),
               static_cast<long long>(size - st.total_bytes));
}

/// A numeric method flag that takes a list: its range, the methods that
/// use it and where it goes in kvq_config.
struct Sweep {
  const char *flag;
  bool integer;
  double lo, hi; ///< integers [lo, hi]; fractions [lo, hi)
  std::vector<std::string> methods;
  void (*set)(kvq_config &, double);
  const char *shortName; ///< in configuration labels
};

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

const Sweep *sweepFor(const std::string &flag) {
  for (const Sweep &sw : sweeps())
    if (flag == sw.flag)
      return &sw;
  return nullptr;
}

struct Options {
  std::string keys, values, queries, layout, plot, queryPositions = "all";
  std::string save; ///< --save FILE
  std::vector<std::string> methods;
  std::vector<int> bits; ///< empty: each method's default
  /// Values of each numeric method flag (--group-size 32,64 ...; one
  /// value is a list of one); absent: the runtime's default.
  std::map<std::string, std::vector<double>> lists;
  long long prefill = -1;
  int residualMode = -1;
  double budget = -1;
  long long threads = 0;
  unsigned long long seed = 0;
  bool fitAll = false, json = false;
  /// --pre-rope: the keys are pre-RoPE; --rope-compare: post-RoPE twins.
  bool preRope = false, ropeCompare = false;
  double ropeTheta = kvq::kDefaultRopeTheta;
  int32_t ropeStyle = KVQ_ROPE_INTERLEAVED;
  std::vector<std::string> given; ///< flags the user set (for warnings)
};

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

Options parseArgs(int argc, char **argv) {
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
          given.push_back(kvq::cli::parseDouble(kTool, sw->flag, x, sw->lo,
                                                sw->hi, true));
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
      o.threads = p.intValue(1, 256);
    else if (p.is("--budget"))
      o.budget = p.doubleValue(0.5, 64, false);
    else if (p.is("--plot"))
      o.plot = p.value();
    else if (p.is("--json"))
      o.json = p.flag();
    else if (p.is("--save"))
      o.save = p.value();
    else if (p.is("--version")) {
      std::printf("kvq-eval %s\n", KVQ_VERSION_STRING);
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
  return o;
}

bool given(const Options &o, const char *flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

//===----------------------------------------------------------------------===//
// Progress on stderr for long runs
//===----------------------------------------------------------------------===//

class Progress {
public:
  /// Print `what` if the run is over 3 s old and the last line is 2 s old.
  void report(const std::string &what) {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = seconds();
    if (now < 3 || now - last_ < 2)
      return;
    last_ = now;
    std::fprintf(stderr, "kvq-eval: [%.0f s] %s\n", now, what.c_str());
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start_)
        .count();
  }

private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
  double last_ = -1e9;
};

Progress gProgress;

//===----------------------------------------------------------------------===//
// Inputs: tensors, layout, units
//===----------------------------------------------------------------------===//

struct Input {
  kvq::tio::Tensor t;
  std::string spec;
};

Input load(const std::string &spec, const std::vector<std::string> &names,
           const char *role) {
  Input in;
  in.spec = spec;
  std::string err;
  if (!kvq::tio::load(spec, names, in.t, err))
    die(std::string(role) + ": " + err);
  for (size_t i = 0; i < in.t.data.size(); ++i)
    if (!std::isfinite(in.t.data[i]))
      die(std::string(role) + " contains NaN or Inf (first at flat index " +
          std::to_string(i) + ")");
  return in;
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

/// Sizes of the named axes of a tensor under `layout` (absent: 1).
struct Axes {
  int64_t l = 1, b = 1, t = 0, h = 0, d = 0;
  int64_t sl = 0, sb = 0, st = 0, sh = 0, sd = 0; ///< element strides
};

Axes axes(const std::vector<int64_t> &shape, const std::string &layout,
          const char *role) {
  if (shape.size() != layout.size())
    die(std::string(role) + " is " + std::to_string(shape.size()) + "-D " +
        shapeStr(shape) + " but --layout " + layout + " names " +
        std::to_string(layout.size()) + " axes");
  Axes a;
  int64_t stride = 1;
  for (size_t i = layout.size(); i-- > 0;) {
    const int64_t n = shape[i];
    switch (layout[i]) {
    case 'l':
      a.l = n, a.sl = stride;
      break;
    case 'b':
      a.b = n, a.sb = stride;
      break;
    case 't':
      a.t = n, a.st = stride;
      break;
    case 'h':
      a.h = n, a.sh = stride;
      break;
    default:
      a.d = n, a.sd = stride;
      break;
    }
    stride *= n; // bounded: the data is in memory
  }
  return a;
}

/// [T, H, D] slice of layer l, batch b.
std::vector<float> slice(const kvq::tio::Tensor &t, const Axes &a, int64_t l,
                         int64_t b) {
  std::vector<float> out(static_cast<size_t>(a.t * a.h * a.d));
  size_t o = 0;
  for (int64_t ti = 0; ti < a.t; ++ti)
    for (int64_t hi = 0; hi < a.h; ++hi) {
      const float *src = &t.data[static_cast<size_t>(l * a.sl + b * a.sb +
                                                     ti * a.st + hi * a.sh)];
      for (int64_t di = 0; di < a.d; ++di)
        out[o++] = src[di * a.sd];
    }
  return out;
}

const char *ropeStyleName(int32_t style) {
  return style == KVQ_ROPE_HALF ? "half" : "interleaved";
}

/// The attention kvq-eval measures: q holds the queries at `pos`
/// ([pos.size(), qHeads, D]), k and v are [T, kvHeads, D]; scores summed
/// in float lanes (kvq::reference::ScoreSum::FloatLanes8).
std::vector<double> attention(const std::vector<float> &q, int64_t qHeads,
                              const std::vector<float> &k,
                              const std::vector<float> &v, int64_t kvHeads,
                              int64_t D, const std::vector<int64_t> &pos,
                              int threads, const std::string &label) {
  return kvq::reference::causalAttention(
      q.data(), qHeads, k.data(), v.data(), kvHeads, D, pos,
      kvq::reference::ScoreSum::FloatLanes8, threads,
      [&](int64_t done, int64_t total) {
        gProgress.report(label + ": attention " +
                         std::to_string(100 * done / total) + "%");
      });
}

//===----------------------------------------------------------------------===//
// Metrics
//===----------------------------------------------------------------------===//

/// Sum of squared error and of squared reference, and the element count.
struct Sums {
  double err2 = 0, ref2 = 0;
  int64_t n = 0;
  void add(const Sums &o) {
    err2 += o.err2;
    ref2 += o.ref2;
    n += o.n;
  }
  double mse() const { return n ? err2 / static_cast<double>(n) : NAN; }
  double rel() const {
    return n == 0 ? NAN : ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0;
  }
  double snrDb() const {
    return n == 0 ? NAN : err2 > 0 ? 10 * std::log10(ref2 / err2) : INFINITY;
  }
};

Sums sums(const std::vector<float> &got, const std::vector<float> &want,
          int64_t from, int64_t to, int64_t C) {
  Sums s;
  for (int64_t i = from * C; i < to * C; ++i) {
    const double r = want[static_cast<size_t>(i)];
    const double d = static_cast<double>(got[static_cast<size_t>(i)]) - r;
    s.err2 += d * d;
    s.ref2 += r * r;
  }
  s.n = std::max<int64_t>(0, to - from) * C;
  return s;
}

/// Attention sums over the selected positions whose index is in [from, to).
Sums attnSums(const std::vector<double> &approx,
              const std::vector<double> &reference,
              const std::vector<int64_t> &pos, int64_t from, int64_t to,
              int64_t row) {
  Sums s;
  for (size_t p = 0; p < pos.size(); ++p) {
    if (pos[p] < from || pos[p] >= to)
      continue;
    for (int64_t j = 0; j < row; ++j) {
      const size_t i = p * static_cast<size_t>(row) + static_cast<size_t>(j);
      const double d = approx[i] - reference[i];
      s.err2 += d * d;
      s.ref2 += reference[i] * reference[i];
    }
    s.n += row;
  }
  return s;
}

/// Three parts: all tokens, the prefill's and the decoded ones.
struct Parts {
  Sums all, prefill, decode;
  void add(const Parts &o) {
    all.add(o.all);
    prefill.add(o.prefill);
    decode.add(o.decode);
  }
};

/// One evaluated configuration.
struct Config {
  std::string method;
  kvq_config cfg;
  int keyBits = 16, valueBits = 16;
  std::string swept; ///< values of the listed flags, e.g. " G=32 R=128"
  /// With --pre-rope: " pre-RoPE" (the cache stores the keys before RoPE)
  /// or " post-RoPE" (--rope-compare: it stores them rotated).
  std::string rope;
  bool preRope() const { return cfg.rope_style != KVQ_ROPE_NONE; }
  std::string label() const {
    return (method == "fp16"
                ? method
                : method + " " + std::to_string(keyBits) + "-bit") +
           swept + rope;
  }
};

struct Row {
  size_t config = 0;
  int64_t layer = 0, batch = 0;
  Parts key, value, attn;
  kvq_stats stats{};
  std::vector<int64_t> sinkPositions;
};

/// Summed over units.
struct Summary {
  Parts key, value, attn;
  int64_t totalBytes = 0, fp16Bytes = 0, compressed = 0;
  double effectiveBits() const {
    return fp16Bytes ? 16.0 * static_cast<double>(totalBytes) /
                           static_cast<double>(fp16Bytes)
                     : NAN;
  }
};

json num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string fmt(const char *f, double x) {
  if (std::isnan(x))
    return "-";
  if (std::isinf(x))
    return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

json configJson(const Config &c) {
  const kvq_config &k = c.cfg;
  json j;
  j["method"] = c.method;
  j["key_bits"] = c.keyBits;
  j["value_bits"] = c.valueBits;
  if (c.method == "kivi" || c.method == "kivi_sink") {
    j["group_size"] = k.group_size;
    j["residual_length"] = k.residual_length;
    j["residual_mode"] =
        k.residual_mode == KVQ_RESIDUAL_BLOCK ? "block" : "sliding";
  }
  if (c.method == "kivi_sink")
    j["n_sink_tokens"] = k.n_sink_tokens;
  if (c.method == "kvquant") {
    j["outlier_fraction"] = k.outlier_fraction;
    j["lloyd_iters"] = k.lloyd_iters;
    j["refit_interval"] = k.refit_interval;
    j["kvquant_n_sink"] = k.kvquant_n_sink;
  }
  j["num_kv_heads"] = k.num_kv_heads;
  j["head_dim"] = k.head_dim;
  j["rope"] = c.preRope() ? json{{"theta", k.rope_theta},
                                 {"style", ropeStyleName(k.rope_style)}}
                          : json(nullptr);
  return j;
}

void partsJson(json &j, const char *what, const Parts &p, bool mse) {
  const std::string w = what;
  if (mse) {
    j[w + "_mse"] = num(p.all.mse());
    j[w + "_rel_err"] = num(p.all.rel());
    j[w + "_snr_db"] = num(p.all.snrDb());
    j[w + "_mse_prefill"] = num(p.prefill.mse());
    j[w + "_mse_decode"] = num(p.decode.mse());
    j[w + "_rel_err_prefill"] = num(p.prefill.rel());
    j[w + "_rel_err_decode"] = num(p.decode.rel());
  } else {
    j[w + "_rel_err"] = num(p.all.rel());
    j[w + "_rel_err_prefill"] = num(p.prefill.rel());
    j[w + "_rel_err_decode"] = num(p.decode.rel());
  }
}

std::string gnuplotString(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseArgs(argc, argv);
  std::vector<std::string> warnings;
  auto warn = [&](const std::string &w) {
    if (std::find(warnings.begin(), warnings.end(), w) == warnings.end())
      warnings.push_back(w);
  };

  // --- Inputs ------------------------------------------------------------
  Input K = load(opt.keys, {"keys", "k"}, "keys");
  if (opt.values.empty()) {
    if (K.t.format == kvq::tio::Format::Npy)
      die("--values is required (with a .npy --keys)");
    opt.values = K.t.file; // the same archive's values/v
  }
  Input V = load(opt.values, {"values", "v"}, "values");
  const bool haveQ = !opt.queries.empty();
  Input Q;
  if (haveQ)
    Q = load(opt.queries, {"queries", "q"}, "queries");

  std::string layout = opt.layout;
  const bool explicitLayout = !layout.empty();
  if (explicitLayout) {
    bool ok = layout.size() >= 3 && layout.size() <= 5;
    for (size_t i = 0; ok && i < layout.size(); ++i)
      ok = std::strchr("lbthd", layout[i]) &&
           layout.find(layout[i], i + 1) == std::string::npos;
    ok = ok && layout.find('t') != std::string::npos &&
         layout.find('h') != std::string::npos &&
         layout.find('d') != std::string::npos;
    if (!ok)
      die("--layout expects distinct axis letters naming t (tokens), h "
          "(heads), d (head_dim) and optionally b (batch), l (layers), e.g. "
          "thd, htd, bhtd, lbhtd; got '" +
          printable(layout, 20) + "'");
  } else if (K.t.shape.size() == 3) {
    layout = "thd";
  } else {
    die("keys are " + std::to_string(K.t.shape.size()) + "-D " +
        shapeStr(K.t.shape) +
        ": name the axes with --layout (e.g. bhtd for a Hugging Face "
        "per-layer cache [batch, heads, tokens, head_dim], lbhtd with "
        "layers, thd for [tokens, heads, head_dim])");
  }
  const Axes ka = axes(K.t.shape, layout, "keys");
  if (K.t.shape != V.t.shape)
    die("keys and values shapes differ: " + shapeStr(K.t.shape) + " vs " +
        shapeStr(V.t.shape));
  const int64_t T = ka.t, H = ka.h, D = ka.d, L = ka.l, B = ka.b;
  if (T == 0 || H == 0 || D == 0 || L == 0 || B == 0)
    die("keys are empty: shape " + shapeStr(K.t.shape));
  if (T < H) {
    const std::string m =
        "keys " + shapeStr(K.t.shape) + " read as layout " + layout + " give " +
        std::to_string(T) + " tokens and " + std::to_string(H) +
        " heads: fewer tokens than heads usually means the axes are swapped";
    if (!explicitLayout)
      die(m + "; pass --layout htd for [heads, tokens, head_dim] (or "
              "--layout thd to confirm)");
    warn(m);
  }
  Axes qa;
  int64_t Hq = 0;
  if (haveQ) {
    qa = axes(Q.t.shape, layout, "queries");
    Hq = qa.h;
    if (qa.t != T || qa.d != D || qa.l != L || qa.b != B)
      die("queries " + shapeStr(Q.t.shape) + " must match the keys " +
          shapeStr(K.t.shape) + " in every axis of layout " + layout +
          " but heads");
    if (Hq == 0 || Hq % H != 0)
      die("q_heads " + std::to_string(Hq) + " is not a multiple of kv_heads " +
          std::to_string(H));
  }
  if (H > INT32_MAX || D > INT32_MAX)
    die("heads or head_dim too large");
  // The theta the caches use (kvq_config.rope_theta is a float), also the
  // oracle's, so both rotate by the same angles.
  const float ropeTheta = static_cast<float>(opt.ropeTheta);
  if (opt.preRope)
    if (const char *why = kvq::ropeRule(ropeTheta, D))
      die(std::string("--pre-rope: ") + why + " (rope_theta " +
          fmt("%.9g", ropeTheta) + " as a float, head_dim " +
          std::to_string(D) + ")");
  if (opt.prefill > T)
    die("--prefill " + std::to_string(opt.prefill) + " exceeds the " +
        std::to_string(T) + " tokens");
  const int64_t prefill =
      opt.fitAll ? T
      : opt.prefill > 0
          ? opt.prefill
          : std::max<int64_t>(1, std::min<int64_t>(kDefaultPrefill, T - 1));
  const int64_t C = H * D;

  // --- Query positions ---------------------------------------------------
  std::vector<int64_t> positions;
  std::string qpMode = "all";
  if (haveQ) {
    const std::string &qp = opt.queryPositions;
    if (qp == "all") {
      for (int64_t t = 0; t < T; ++t)
        positions.push_back(t);
    } else if (qp.rfind("last:", 0) == 0 || qp.rfind("sample:", 0) == 0) {
      const bool last = qp[0] == 'l';
      qpMode = last ? "last" : "sample";
      const int64_t n =
          kvq::cli::parseInt(kTool, "--query-positions " + qpMode + ":N",
                             qp.substr(last ? 5 : 7), 1, 1ll << 40);
      const int64_t m = std::min(n, T);
      if (last) {
        for (int64_t t = T - m; t < T; ++t)
          positions.push_back(t);
      } else {
        std::vector<int64_t> all(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t)
          all[static_cast<size_t>(t)] = t;
        std::mt19937_64 gen(opt.seed);
        for (int64_t i = 0; i < m; ++i) {
          std::uniform_int_distribution<int64_t> u(i, T - 1);
          std::swap(all[static_cast<size_t>(i)],
                    all[static_cast<size_t>(u(gen))]);
        }
        positions.assign(all.begin(), all.begin() + m);
        std::sort(positions.begin(), positions.end());
      }
    } else {
      die("--query-positions expects all, last:N or sample:N, got '" +
          printable(qp, 40) + "'");
    }
  } else if (given(opt, "--query-positions")) {
    warn("--query-positions does not apply without --queries: ignored");
  }
  if (!haveQ && given(opt, "--seed"))
    warn("--seed does not apply without --queries: ignored");
  const int threads = static_cast<int>(
      opt.threads > 0
          ? opt.threads
          : std::max(1u, std::min(64u, std::thread::hardware_concurrency())));

  // --- Configurations -----------------------------------------------------
  // Which flags each method uses; a flag given for a method that ignores
  // it is a warning (fp16 is exempt when it is only the baseline).
  std::map<std::string, std::vector<std::string>> applies = {
      {"--bits", {"kivi", "kivi_sink", "kvquant"}},
      {"--residual-mode", {"kivi", "kivi_sink"}}};
  for (const Sweep &sw : sweeps())
    applies[sw.flag] = sw.methods;
  const bool onlyFp16 = opt.methods.size() == 1 && opt.methods[0] == "fp16";
  for (const auto &[flag, users] : applies) {
    if (!given(opt, flag.c_str()))
      continue;
    std::string ignored;
    for (const std::string &m : opt.methods)
      if (std::find(users.begin(), users.end(), m) == users.end() &&
          (m != "fp16" || onlyFp16))
        ignored += (ignored.empty() ? "" : ", ") + m;
    if (ignored.empty())
      continue;
    std::string users_;
    for (const std::string &u : users)
      users_ += (users_.empty() ? "" : ", ") + u;
    std::string hint;
    if (flag == "--sinks")
      hint = "; kvquant's sinks are --kvquant-sinks";
    warn(flag + " does not apply to " + ignored + " (only to " + users_ +
         "): ignored there" + hint);
  }

  std::vector<Config> configs;
  for (const std::string &m : opt.methods) {
    const kvq_method method = m == "fp16"        ? KVQ_METHOD_FP16
                              : m == "kivi"      ? KVQ_METHOD_KIVI
                              : m == "kivi_sink" ? KVQ_METHOD_KIVI_SINK
                                                 : KVQ_METHOD_KVQUANT;
    std::vector<int> widths = opt.bits;
    if (widths.empty() || method == KVQ_METHOD_FP16)
      widths = {-1};
    // The flags with values for this method; a flag the method does not
    // use does not multiply its configurations.
    std::vector<std::pair<const Sweep *, const std::vector<double> *>> axes;
    for (const Sweep &sw : sweeps()) {
      auto it = opt.lists.find(sw.flag);
      if (it != opt.lists.end() &&
          std::find(sw.methods.begin(), sw.methods.end(), m) !=
              sw.methods.end())
        axes.push_back({&sw, &it->second});
    }
    for (int bits : widths) {
      // Every combination of the axes' values (an odometer, last axis
      // fastest).
      std::vector<size_t> at(axes.size(), 0);
      while (true) {
        Config c;
        c.method = m;
        kvq_config &cfg = c.cfg;
        kvq_config_init(&cfg, method);
        cfg.num_layers = 1;
        cfg.num_kv_heads = static_cast<int32_t>(H);
        cfg.head_dim = static_cast<int32_t>(D);
        if (bits > 0)
          cfg.key_bits = cfg.value_bits = bits;
        if (cfg.head_dim % cfg.group_size != 0)
          cfg.group_size = cfg.head_dim < 32 ? cfg.head_dim : cfg.group_size;
        if (opt.residualMode >= 0)
          cfg.residual_mode = opt.residualMode;
        for (size_t i = 0; i < axes.size(); ++i) {
          const double x = (*axes[i].second)[at[i]];
          axes[i].first->set(cfg, x);
          if (axes[i].second->size() > 1) {
            char buf[64];
            std::snprintf(buf, sizeof(buf), " %s=%g", axes[i].first->shortName,
                          x);
            c.swept += buf;
          }
        }
        if (method != KVQ_METHOD_FP16) {
          c.keyBits = cfg.key_bits;
          c.valueBits = cfg.value_bits;
        }
        if (opt.preRope) {
          cfg.rope_style = opt.ropeStyle;
          cfg.rope_theta = ropeTheta;
          c.rope = " pre-RoPE";
        }
        configs.push_back(c);
        if (opt.ropeCompare) { // its twin on the rotated keys, next to it
          c.cfg.rope_style = KVQ_ROPE_NONE;
          c.rope = " post-RoPE";
          configs.push_back(c);
        }
        size_t i = axes.size();
        while (i > 0 && ++at[i - 1] == axes[i - 1].second->size())
          at[--i] = 0;
        if (i == 0)
          break;
      }
    }
  }

  // --- Evaluation, unit by unit --------------------------------------------
  std::vector<Row> rows;
  std::vector<Summary> summary(configs.size());
  const int64_t units = L * B;
  int64_t unitIndex = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t b = 0; b < B; ++b, ++unitIndex) {
      const std::string where =
          units > 1 ? "layer " + std::to_string(l) +
                          (B > 1 ? " batch " + std::to_string(b) : "") + " (" +
                          std::to_string(unitIndex + 1) + "/" +
                          std::to_string(units) + ")"
                    : std::string("input");
      const std::vector<float> k = slice(K.t, ka, l, b),
                               v = slice(V.t, ka, l, b);
      // kRef: the keys as attention uses them (rotated by the oracle when
      // they are pre-RoPE): the reference's and every key error's. A
      // pre-RoPE cache gets k, a post-RoPE one kRef.
      std::vector<float> rotated;
      if (opt.preRope)
        rotated = kvq::reference::rotateRope(
            k, T, H, D, ropeTheta, opt.ropeStyle == KVQ_ROPE_INTERLEAVED);
      const std::vector<float> &kRef = opt.preRope ? rotated : k;
      std::vector<float> q;
      if (haveQ) {
        // The queries at the selected positions, [positions][Hq][D].
        q = slice(Q.t, qa, l, b);
        if (positions.size() != static_cast<size_t>(T)) {
          std::vector<float> at;
          at.reserve(positions.size() * static_cast<size_t>(Hq * D));
          for (int64_t p : positions)
            at.insert(at.end(), q.begin() + p * Hq * D,
                      q.begin() + (p + 1) * Hq * D);
          q = std::move(at);
        }
      }
      // Tasks: the reference attention and one per configuration (its
      // cache run, fetch and attention). They are independent, so they run
      // side by side over --threads (a task's attention gets the threads
      // left over); each result is computed by one task in a fixed order,
      // so nothing depends on --threads or on the schedule. kvquant's
      // refits are the longest cache runs: they start first.
      std::vector<double> reference;
      std::vector<Row> unitRows(configs.size());
      std::vector<std::vector<double>> approx(configs.size());
      std::vector<long> order; // -1: the reference
      for (int heavy = 1; heavy >= 0; --heavy) {
        if (!heavy && haveQ)
          order.push_back(-1);
        for (size_t ci = 0; ci < configs.size(); ++ci)
          if ((configs[ci].method == "kvquant") == (heavy == 1))
            order.push_back(static_cast<long>(ci));
      }
      const int outer =
          std::max(1, std::min(threads, static_cast<int>(order.size())));
      const int inner = std::max(1, threads / outer);
      std::mutex failMu;
      std::string failure;
      auto runConfig = [&](size_t ci) {
        const Config &c = configs[ci];
        const std::string label = where + " " + c.label();
        gProgress.report(label + ": running the cache");
        auto failed = [&](kvq_status s) {
          std::lock_guard<std::mutex> lock(failMu);
          if (failure.empty())
            failure = c.label() + ": " + kvq_status_string(s) + ": " +
                      kvq_last_error();
        };
        kvq_cache_t *cache = nullptr;
        if (kvq_status s = kvq_cache_create(&c.cfg, &cache))
          return failed(s);
        const std::vector<float> &kIn = c.preRope() ? k : kRef;
        kvq_status s = kvq_cache_update(cache, 0, kIn.data(), v.data(), prefill,
                                        KVQ_DTYPE_F32);
        for (int64_t t = prefill; s == KVQ_OK && t < T; ++t) {
          s = kvq_cache_update(cache, 0, &kIn[t * C], &v[t * C], 1,
                               KVQ_DTYPE_F32);
          if ((t & 255) == 0)
            gProgress.report(label + ": decode step " +
                             std::to_string(t - prefill) + "/" +
                             std::to_string(T - prefill));
        }
        std::vector<float> kf(static_cast<size_t>(T * C)), vf(kf.size());
        if (s == KVQ_OK)
          s = kvq_cache_fetch(cache, 0, kf.data(), vf.data(), T, KVQ_DTYPE_F32);
        if (s != KVQ_OK) {
          kvq_cache_destroy(cache);
          return failed(s);
        }
        Row &r = unitRows[ci];
        r.config = ci;
        r.layer = l;
        r.batch = b;
        // kvq_cache_fetch returns a pre-RoPE cache's keys rotated.
        r.key = {sums(kf, kRef, 0, T, C), sums(kf, kRef, 0, prefill, C),
                 sums(kf, kRef, prefill, T, C)};
        r.value = {sums(vf, v, 0, T, C), sums(vf, v, 0, prefill, C),
                   sums(vf, v, prefill, T, C)};
        kvq_cache_stats(cache, 0, &r.stats);
        if (!opt.save.empty() && ci == 0 && unitIndex == 0)
          saveCache(cache, opt.save, c.label());
        if (c.method == "kivi_sink") {
          int64_t count = 0;
          kvq_cache_sink_positions(cache, 0, nullptr, 0, &count);
          r.sinkPositions.resize(static_cast<size_t>(count));
          if (count)
            kvq_cache_sink_positions(cache, 0, r.sinkPositions.data(), count,
                                     &count);
        }
        kvq_cache_destroy(cache);
        if (haveQ)
          approx[ci] = attention(q, Hq, kf, vf, H, D, positions, inner, label);
      };
      std::atomic<size_t> nextTask{0};
      auto worker = [&]() {
        for (size_t i; (i = nextTask.fetch_add(1)) < order.size();) {
          if (order[i] < 0)
            reference = attention(q, Hq, kRef, v, H, D, positions, inner,
                                  where + " reference");
          else
            runConfig(static_cast<size_t>(order[i]));
        }
      };
      std::vector<std::thread> pool;
      for (int i = 1; i < outer; ++i)
        pool.emplace_back(worker);
      worker();
      for (std::thread &t : pool)
        t.join();
      if (!failure.empty())
        die(failure);
      for (size_t ci = 0; ci < configs.size(); ++ci) {
        Row &r = unitRows[ci];
        if (haveQ) {
          const int64_t row = Hq * D;
          r.attn = {
              attnSums(approx[ci], reference, positions, 0, T, row),
              attnSums(approx[ci], reference, positions, 0, prefill, row),
              attnSums(approx[ci], reference, positions, prefill, T, row)};
        }
        Summary &s = summary[ci];
        s.key.add(r.key);
        s.value.add(r.value);
        s.attn.add(r.attn);
        s.totalBytes += r.stats.total_bytes;
        s.fp16Bytes += r.stats.fp16_bytes;
        s.compressed += r.stats.compressed_tokens;
        rows.push_back(std::move(r));
      }
    }

  // --- Warnings about what the numbers mean -------------------------------
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const Config &c = configs[ci];
    const Summary &s = summary[ci];
    if (c.method != "fp16" && s.compressed == 0)
      warn(c.label() + ": no token was quantized (all " + std::to_string(T) +
           " tokens stayed fp16 in the residual window or as sinks): its "
           "numbers describe fp16, not " +
           c.method +
           (c.method == "kvquant"
                ? ""
                : "; use more tokens or a smaller --residual-length"));
    if (s.effectiveBits() > 16) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.2f", s.effectiveBits());
      warn(c.label() + ": effective bits " + buf +
           " exceed fp16's 16: its scales, level tables and outliers cost "
           "more than the codes save at this width");
    }
    if (s.key.decode.n > 0 && s.key.decode.mse() > 2 * s.key.prefill.mse()) {
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "%s: key MSE of the decoded tokens is %.1fx that of the "
                    "prefill",
                    (c.method + c.rope).c_str(),
                    s.key.prefill.mse() > 0
                        ? s.key.decode.mse() / s.key.prefill.mse()
                        : INFINITY);
      std::string note = buf;
      if (c.method == "kvquant" && c.cfg.refit_interval == 0)
        note += " (kvquant refit_interval 0: key levels frozen at the "
                "prefill; try --refit-interval N)";
      warn(note);
    }
  }

  // --- Recommendation ------------------------------------------------------
  const char *criterion = haveQ ? "attn_rel_err" : "kv_rel_err";
  auto score = [&](size_t ci) {
    const Summary &s = summary[ci];
    return haveQ ? s.attn.all.rel()
                 : 0.5 * (s.key.all.rel() + s.value.all.rel());
  };
  json recommendation = nullptr;
  std::string recommendationText;
  if (opt.budget > 0) {
    auto best = [&](const char *method) {
      long best = -1;
      for (size_t ci = 0; ci < configs.size(); ++ci)
        if ((!method || configs[ci].method == method) &&
            summary[ci].effectiveBits() <= opt.budget &&
            (best < 0 || score(ci) < score(static_cast<size_t>(best))))
          best = static_cast<long>(ci);
      return best;
    };
    const long pick = best(nullptr), kivi = best("kivi");
    char budget[32];
    std::snprintf(budget, sizeof(budget), "%g", opt.budget);
    if (pick < 0) {
      warn(std::string("--budget ") + budget +
           ": no evaluated configuration fits (try more --bits widths or a "
           "larger budget)");
    } else {
      const size_t p = static_cast<size_t>(pick);
      recommendation = json::object();
      recommendation["budget_bits"] = opt.budget;
      recommendation["criterion"] = criterion;
      recommendation["config"] = configJson(configs[p]);
      recommendation["effective_bits"] = num(summary[p].effectiveBits());
      recommendation["error"] = num(score(p));
      char buf[256];
      std::snprintf(buf, sizeof(buf), "%s at %.3f effective bits (%s %.6g)",
                    configs[p].label().c_str(), summary[p].effectiveBits(),
                    criterion, score(p));
      recommendationText =
          std::string("recommendation for ") + budget + " bits: " + buf;
      if (kivi >= 0) {
        const size_t kv = static_cast<size_t>(kivi);
        recommendation["kivi"] = configJson(configs[kv]);
        recommendation["kivi_effective_bits"] =
            num(summary[kv].effectiveBits());
        recommendation["kivi_error"] = num(score(kv));
        const double ratio = score(p) > 0 ? score(kv) / score(p) : INFINITY;
        recommendation["kivi_error_ratio"] = num(ratio);
        std::snprintf(buf, sizeof(buf),
                      "; plain KIVI in budget: %s at %.3f bits, %s %.6g "
                      "(%.2fx the recommendation's)",
                      configs[kv].label().c_str(), summary[kv].effectiveBits(),
                      criterion, score(kv), ratio);
        recommendationText += buf;
      } else {
        recommendation["kivi"] = nullptr;
        recommendationText +=
            "; no plain KIVI configuration evaluated fits the budget (add "
            "kivi to --method to compare)";
      }
    }
  }

  // --- Plot ----------------------------------------------------------------
  if (!opt.plot.empty()) {
    std::string script = "set terminal pngcairo size 900,600 noenhanced\n"
                         "set output " +
                         gnuplotString(opt.plot) + "\n";
    script += std::string("set title 'kvq-eval: ") +
              (haveQ ? "attention" : "K/V") +
              " error against effective bits (labels: bits)'\n"
              "set xlabel 'effective bits per element'\nset ylabel '" +
              (haveQ ? "attention relative error"
                     : "K/V relative error (mean of K and V)") +
              "'\nset logscale y\nset grid\nset key bottom right\n";
    if (opt.budget > 0)
      script += "set arrow from " + std::to_string(opt.budget) +
                ", graph 0 to " + std::to_string(opt.budget) +
                ", graph 1 nohead dashtype 2\n";
    std::string plot = "plot ";
    int series = 0, omitted = 0;
    std::vector<std::pair<std::string, std::string>> lines; // method, rope
    for (const std::string &m : opt.methods)
      for (const char *r : {"", " pre-RoPE", " post-RoPE"})
        lines.push_back({m, r});
    for (const auto &[m, rope] : lines) {
      std::vector<std::tuple<double, double, int>> pts;
      for (size_t ci = 0; ci < configs.size(); ++ci)
        if (configs[ci].method == m && configs[ci].rope == rope &&
            score(ci) > 0 && std::isfinite(summary[ci].effectiveBits())) {
          // Above fp16's 16 bits a configuration is never worth it (a
          // warning says so); it would squash the interesting range.
          if (summary[ci].effectiveBits() > 16) {
            ++omitted;
            continue;
          }
          pts.push_back(
              {summary[ci].effectiveBits(), score(ci), configs[ci].keyBits});
        }
      if (pts.empty())
        continue;
      std::sort(pts.begin(), pts.end());
      script += "$d" + std::to_string(series) + " << EOD\n";
      for (auto &pt : pts) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), "%.9g %.9g %d\n", std::get<0>(pt),
                      std::get<1>(pt), std::get<2>(pt));
        script += buf;
      }
      script += "EOD\n";
      plot += std::string(series ? ", " : "") + "$d" + std::to_string(series) +
              " using 1:2 with linespoints pointtype 7 title '" + m + rope +
              "', $d" + std::to_string(series) +
              " using 1:2:3 with labels offset 0,0.8 notitle";
      ++series;
    }
    if (series == 0) {
      warn("--plot: no configuration has a positive error to plot");
    } else {
      if (omitted)
        script += "set label " +
                  gnuplotString(std::to_string(omitted) +
                                " configuration(s) above 16 "
                                "bits not shown") +
                  " at graph 0.02, graph 0.04\n";
      script += plot + "\n";
      FILE *g = popen("gnuplot", "w");
      if (!g)
        die("--plot: cannot run gnuplot (apt-get install gnuplot-nox)");
      std::fwrite(script.data(), 1, script.size(), g);
      const int st = pclose(g);
      if (st != 0)
        die("--plot: gnuplot failed (status " + std::to_string(st) +
            "; is gnuplot-nox installed?) writing '" + printable(opt.plot) +
            "'");
    }
  }

  for (const std::string &w : warnings)
    std::fprintf(stderr, "kvq-eval: warning: %s\n", w.c_str());

  // --- Output ----------------------------------------------------------------
  auto statsJson = [&](json &j, const kvq_stats &s) {
    j["effective_bits"] = num(s.effective_bits);
    j["tokens"] = {{"total", s.tokens},
                   {"compressed", s.compressed_tokens},
                   {"sink", s.sink_tokens},
                   {"residual", s.residual_tokens}};
    j["bytes"] = {{"codes", s.code_bytes},
                  {"scale_zero", s.scale_zero_bytes},
                  {"level_tables", s.level_table_bytes},
                  {"outliers", s.outlier_bytes},
                  {"sinks", s.sink_bytes},
                  {"residual", s.residual_bytes},
                  {"total", s.total_bytes}};
    j["outlier_count"] = s.outlier_count;
    j["fp16_bytes"] = s.fp16_bytes;
  };
  if (opt.json) {
    json out;
    out["tool"] = "kvq-eval";
    out["kvq_version"] = KVQ_VERSION_STRING;
    auto inputJson = [&](const Input &in) {
      return json{{"file", in.t.file},
                  {"tensor", in.t.name},
                  {"format", kvq::tio::formatName(in.t.format)},
                  {"dtype", kvq::tio::dtypeName(in.t.dtype)},
                  {"shape", in.t.shape}};
    };
    out["inputs"] = {{"keys", inputJson(K)},
                     {"values", inputJson(V)},
                     {"queries", haveQ ? inputJson(Q) : json(nullptr)}};
    out["layout"] = layout;
    out["layers"] = L;
    out["batch"] = B;
    out["tokens"] = T;
    out["kv_heads"] = H;
    out["q_heads"] = haveQ ? json(Hq) : json(nullptr);
    out["head_dim"] = D;
    out["protocol"] = {{"prefill_tokens", prefill},
                       {"decoded_tokens", T - prefill},
                       {"fit_all", opt.fitAll}};
    out["rope"] = opt.preRope ? json{{"theta", ropeTheta},
                                     {"style", ropeStyleName(opt.ropeStyle)},
                                     {"compare", opt.ropeCompare}}
                              : json(nullptr);
    if (haveQ)
      out["query_positions"] = {
          {"mode", qpMode},
          {"count", positions.size()},
          {"seed", qpMode == "sample" ? json(opt.seed) : json(nullptr)}};
    else
      out["query_positions"] = nullptr;
    out["threads"] = threads;
    out["warnings"] = warnings;
    json jr = json::array();
    for (const Row &r : rows) {
      const Config &c = configs[r.config];
      json j;
      j["method"] = c.method;
      j["key_bits"] = c.keyBits;
      j["value_bits"] = c.valueBits;
      j["layer"] = r.layer;
      j["batch"] = r.batch;
      j["pre_rope"] = c.preRope();
      partsJson(j, "key", r.key, true);
      partsJson(j, "value", r.value, true);
      if (haveQ)
        partsJson(j, "attn", r.attn, false);
      j["prefill_tokens"] = prefill;
      j["decoded_tokens"] = T - prefill;
      if (c.method == "kvquant")
        j["refit_interval"] = c.cfg.refit_interval;
      statsJson(j, r.stats);
      if (c.method == "kivi_sink")
        j["sink_positions"] = r.sinkPositions;
      j["config"] = configJson(c);
      jr.push_back(j);
    }
    out["rows"] = jr;
    json js = json::array();
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Summary &s = summary[ci];
      json j;
      j["method"] = configs[ci].method;
      j["key_bits"] = configs[ci].keyBits;
      j["value_bits"] = configs[ci].valueBits;
      j["pre_rope"] = configs[ci].preRope();
      j["units"] = units;
      partsJson(j, "key", s.key, true);
      partsJson(j, "value", s.value, true);
      if (haveQ)
        partsJson(j, "attn", s.attn, false);
      j["effective_bits"] = num(s.effectiveBits());
      j["total_bytes"] = s.totalBytes;
      j["fp16_bytes"] = s.fp16Bytes;
      j["config"] = configJson(configs[ci]);
      js.push_back(j);
    }
    out["summary"] = js;
    out["recommendation"] = recommendation;
    out["plot"] = opt.plot.empty() ? json(nullptr) : json(opt.plot);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  // The table: per unit, one row per configuration over all tokens, then
  // its prefill part and its decoded part; a summary when there are several
  // units.
  std::printf("%s %s: %lld tokens x %lld kv heads x %lld dims (layout %s",
              printable(K.t.file).c_str(), shapeStr(K.t.shape).c_str(),
              (long long)T, (long long)H, (long long)D, layout.c_str());
  if (units > 1)
    std::printf(", %lld layers x %lld batch", (long long)L, (long long)B);
  std::printf(")\n");
  std::printf("%lld tokens: ", (long long)T);
  if (prefill == T)
    std::printf("one update of all of them (--fit-all): every fit saw every "
                "token it encodes; no decode steps\n");
  else
    std::printf("a %lld-token prefill, then %lld decode steps of one token "
                "(--prefill N, --fit-all)\n",
                (long long)prefill, (long long)(T - prefill));
  if (haveQ && qpMode != "all")
    std::printf("attention error at %zu query positions (%s)\n",
                positions.size(), opt.queryPositions.c_str());
  if (opt.preRope)
    std::printf("pre-RoPE keys (%s, theta %g): errors against the keys "
                "rotated at positions 0..%lld; pre-RoPE rows store them "
                "unrotated%s\n",
                ropeStyleName(opt.ropeStyle), static_cast<double>(ropeTheta),
                (long long)(T - 1),
                opt.ropeCompare ? ", post-RoPE rows rotated" : "");
  // The first column: the method and the values of listed flags.
  int width = 10;
  for (const Config &c : configs)
    width =
        std::max(width, static_cast<int>((c.method + c.swept + c.rope).size()));
  auto header = [&]() {
    std::printf("%-*s %5s %5s %-8s %12s %12s %8s %8s %12s %8s %12s %12s  %s\n",
                width, "method", "kbits", "vbits", "part", "key_mse",
                "value_mse", "key_rel", "val_rel", "attn_rel_err", "eff_bits",
                "total_bytes", "fp16_bytes", "sinks");
  };
  auto cell = [&](double x) {
    return haveQ ? fmt("%.9g", x) : std::string("-");
  };
  auto printParts = [&](const Config &c, const Parts &k, const Parts &v,
                        const Parts &a, double eff, long long total,
                        long long fp16, const std::string &sinks) {
    std::printf("%-*s %5d %5d %-8s %12.6g %12.6g %8.4f %8.4f %12s %8.3f "
                "%12lld %12lld  %s\n",
                width, (c.method + c.swept + c.rope).c_str(), c.keyBits,
                c.valueBits, "all", k.all.mse(), v.all.mse(), k.all.rel(),
                v.all.rel(), cell(a.all.rel()).c_str(), eff, total, fp16,
                sinks.c_str());
    if (prefill == T)
      return;
    std::printf("%-*s %5s %5s %-8s %12.6g %12.6g %8.4f %8.4f %12s\n", width, "",
                "", "", "prefill", k.prefill.mse(), v.prefill.mse(),
                k.prefill.rel(), v.prefill.rel(),
                cell(a.prefill.rel()).c_str());
    std::printf("%-*s %5s %5s %-8s %12.6g %12.6g %8.4f %8.4f %12s\n", width, "",
                "", "", "decode", k.decode.mse(), v.decode.mse(),
                k.decode.rel(), v.decode.rel(), cell(a.decode.rel()).c_str());
  };
  int64_t lastUnit = -1;
  for (const Row &r : rows) {
    const int64_t u = r.layer * B + r.batch;
    if (u != lastUnit) {
      if (units > 1)
        std::printf("%slayer %lld%s:\n", lastUnit >= 0 ? "\n" : "",
                    (long long)r.layer,
                    B > 1 ? (" batch " + std::to_string(r.batch)).c_str() : "");
      header();
      lastUnit = u;
    }
    std::string sinks;
    for (size_t j = 0; j < r.sinkPositions.size(); ++j)
      sinks += (j ? "," : "") + std::to_string(r.sinkPositions[j]);
    printParts(configs[r.config], r.key, r.value, r.attn,
               r.stats.effective_bits, (long long)r.stats.total_bytes,
               (long long)r.stats.fp16_bytes, sinks);
  }
  if (units > 1) {
    std::printf("\nsummary over %lld layer/batch units:\n", (long long)units);
    header();
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Summary &s = summary[ci];
      printParts(configs[ci], s.key, s.value, s.attn, s.effectiveBits(),
                 (long long)s.totalBytes, (long long)s.fp16Bytes, "");
    }
  }
  if (!recommendationText.empty())
    std::printf("%s\n", recommendationText.c_str());
  if (!opt.plot.empty())
    std::printf("plot: %s\n", printable(opt.plot).c_str());
  return 0;
}
