//===- eval_report.cpp - What kvq-eval prints -----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The warnings about what the numbers mean, the --budget recommendation,
// the --plot, and the report: JSON (--json) or the table. Every line and
// key is part of the interface (scripts read them).
//
//===----------------------------------------------------------------------===//
#include "eval_report.h"
#include "version.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace kvq::eval {

using json = nlohmann::ordered_json;
using kvq::cli::printable;

namespace {

json num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

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

/// What --budget picks: the lowest error within the budget.
struct Recommendation {
  json j = nullptr;
  std::string text; ///< empty: no line
};

/// The error a recommendation minimizes (the attention's with --queries,
/// else the mean of K's and V's).
const char *criterionName(const Inputs &in) {
  return in.haveQ ? "attn_rel_err" : "kv_rel_err";
}

double errorOf(const Inputs &in, const Results &res, size_t ci) {
  const Summary &s = res.summary[ci];
  return in.haveQ ? s.attn.all.rel()
                  : 0.5 * (s.key.all.rel() + s.value.all.rel());
}

/// Configurations whose numbers mislead: nothing quantized, more bits than
/// fp16, decode error far above the prefill's.
void warnAboutNumbers(const Inputs &in, const std::vector<Config> &configs,
                      const Results &res, Warnings &warn) {
  const int64_t T = in.T;
  const std::vector<Summary> &summary = res.summary;
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
}

/// --budget BITS: the best configuration within it, and plain KIVI's best.
Recommendation recommend(const Options &opt, const Inputs &in,
                         const std::vector<Config> &configs, const Results &res,
                         Warnings &warn) {
  Recommendation rec;
  if (opt.budget <= 0)
    return rec;
  const std::vector<Summary> &summary = res.summary;
  const char *criterion = criterionName(in);
  auto score = [&](size_t ci) { return errorOf(in, res, ci); };
  json &recommendation = rec.j;
  std::string &recommendationText = rec.text;
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
      recommendation["kivi_effective_bits"] = num(summary[kv].effectiveBits());
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
  return rec;
}

/// --plot FILE.png: error against effective bits, one line per method
/// (and RoPE storage), drawn by gnuplot.
void plot(const Options &opt, const Inputs &in,
          const std::vector<Config> &configs, const Results &res,
          Warnings &warn) {
  if (opt.plot.empty())
    return;
  const bool haveQ = in.haveQ;
  const std::vector<Summary> &summary = res.summary;
  auto score = [&](size_t ci) { return errorOf(in, res, ci); };
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
    script += "set arrow from " + std::to_string(opt.budget) + ", graph 0 to " +
              std::to_string(opt.budget) + ", graph 1 nohead dashtype 2\n";
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
      script +=
          "set label " +
          gnuplotString(std::to_string(omitted) + " configuration(s) above 16 "
                                                  "bits not shown") +
          " at graph 0.02, graph 0.04\n";
    script += plot + "\n";
    FILE *g = popen("gnuplot", "w");
    if (!g)
      die("--plot: cannot run gnuplot (apt-get install gnuplot-nox)");
    std::fwrite(script.data(), 1, script.size(), g);
    const int st = pclose(g);
    if (st != 0)
      die("--plot: gnuplot exited with status " + std::to_string(st) +
          " writing '" + printable(opt.plot) + "' (its message is above)");
  }
}

/// --json: the inputs, the protocol, every row and summary, the
/// recommendation.
void printJson(const Options &opt, const Inputs &in,
               const std::vector<Config> &configs, const Results &res,
               const Warnings &warn, const Recommendation &rec) {
  const Input &K = in.K, &V = in.V, &Q = in.Q;
  const bool haveQ = in.haveQ;
  const int64_t T = in.T, H = in.H, D = in.D, L = in.L, B = in.B, Hq = in.Hq,
                prefill = in.prefill, units = in.units();
  const std::string &layout = in.layout, &qpMode = in.qpMode;
  const float ropeTheta = in.ropeTheta;
  const std::vector<int64_t> &positions = in.positions;
  const std::vector<std::string> &warnings = warn.list;
  const std::vector<Row> &rows = res.rows;
  const std::vector<Summary> &summary = res.summary;
  const int threads = res.threads;
  const json &recommendation = rec.j;
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
  json out;
  out["tool"] = "kvq-eval";
  out["kvq_version"] = kvq::cli::versionString();
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
}

/// The table: per unit, one row per configuration over all tokens, then
/// its prefill part and its decoded part; a summary when there are several
/// units.
void printTable(const Options &opt, const Inputs &in,
                const std::vector<Config> &configs, const Results &res,
                const Recommendation &rec) {
  const Input &K = in.K;
  const bool haveQ = in.haveQ;
  const int64_t T = in.T, H = in.H, D = in.D, L = in.L, B = in.B,
                prefill = in.prefill, units = in.units();
  const std::string &layout = in.layout, &qpMode = in.qpMode;
  const float ropeTheta = in.ropeTheta;
  const std::vector<int64_t> &positions = in.positions;
  const std::vector<Row> &rows = res.rows;
  const std::vector<Summary> &summary = res.summary;
  const std::string &recommendationText = rec.text;
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
}

} // namespace

void report(const Options &opt, const Inputs &in,
            const std::vector<Config> &configs, const Results &res,
            Warnings &warn) {
  warnAboutNumbers(in, configs, res, warn);
  const Recommendation rec = recommend(opt, in, configs, res, warn);
  plot(opt, in, configs, res, warn);
  for (const std::string &w : warn.list)
    std::fprintf(stderr, "kvq-eval: warning: %s\n", w.c_str());
  if (opt.json)
    printJson(opt, in, configs, res, warn, rec);
  else
    printTable(opt, in, configs, res, rec);
}

} // namespace kvq::eval
