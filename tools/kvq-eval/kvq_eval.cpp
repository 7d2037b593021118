//===- kvq_eval.cpp - Judge kvq's methods on your own K/V dumps -----------===//
//
// Loads K, V (and optionally Q) from .npy files, runs each requested method
// through the runtime exactly as a model would (a prompt-sized prefill, then
// one token per update), and reports reconstruction error and attention
// error -- over all tokens, and separately for the prefill part and the
// decoded part -- and the byte accounting, as a table or as JSON.
//
//===----------------------------------------------------------------------===//
#include "kvq/runtime.h"
#include "npy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: kvq-eval --keys K.npy --values V.npy [--queries Q.npy]\n"
    "                --method kivi,kivi_sink,kvquant,fp16 [--bits N]\n"
    "                [--group-size G] [--residual R]\n"
    "                [--residual-mode sliding|block] [--sinks N]\n"
    "                [--outlier-fraction F] [--lloyd-iters N]\n"
    "                [--kvquant-sinks N] [--refit-interval N]\n"
    "                [--prefill N | --fit-all] [--json]\n"
    "K and V are [tokens, kv_heads, head_dim] float16/float32 (C order); Q is\n"
    "[tokens, q_heads, head_dim] with q_heads a multiple of kv_heads.\n"
    "Protocol: the first N tokens (--prefill, default 128, at most tokens - 1)\n"
    "are one update (the prompt), every later token is its own update (decode);\n"
    "errors are reported for all tokens, the prefill part and the decoded part.\n"
    "--fit-all sends every token as one update (no decode steps).\n";

/// The default prompt size: a typical chat/completion prompt, and enough
/// tokens for the per-channel fits to see a realistic prefill.
constexpr long long kDefaultPrefill = 128;

/// Input problems: one line on stderr, exit status 2.
[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "kvq-eval: %s\n", msg.c_str());
  std::exit(2);
}

struct Options {
  std::string keys, values, queries;
  std::vector<std::string> methods;
  int bits = -1, groupSize = -1, residual = -1, sinks = -1, lloydIters = -1,
      kvquantSinks = -1, refitInterval = -1;
  int residualMode = -1;
  double outlierFraction = -1;
  long long prefill = -1;
  bool fitAll = false;
  bool json = false;
};

long long parseInt(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || x < 0 || x > (1ll << 40))
    die(flag + " expects a non-negative integer, got '" + v + "'");
  return x;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--keys")
      o.keys = value();
    else if (a == "--values")
      o.values = value();
    else if (a == "--queries")
      o.queries = value();
    else if (a == "--method") {
      std::string list = value();
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string m = list.substr(start, comma == std::string::npos
                                               ? std::string::npos
                                               : comma - start);
        if (m != "fp16" && m != "kivi" && m != "kivi_sink" && m != "kvquant")
          die("unknown method '" + m + "' (fp16, kivi, kivi_sink, kvquant)");
        o.methods.push_back(m);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
    } else if (a == "--bits")
      o.bits = static_cast<int>(parseInt(a, value()));
    else if (a == "--group-size")
      o.groupSize = static_cast<int>(parseInt(a, value()));
    else if (a == "--residual")
      o.residual = static_cast<int>(parseInt(a, value()));
    else if (a == "--residual-mode") {
      std::string m = value();
      if (m == "sliding")
        o.residualMode = KVQ_RESIDUAL_SLIDING;
      else if (m == "block")
        o.residualMode = KVQ_RESIDUAL_BLOCK;
      else
        die("--residual-mode expects sliding or block, got '" + m + "'");
    } else if (a == "--sinks")
      o.sinks = static_cast<int>(parseInt(a, value()));
    else if (a == "--outlier-fraction") {
      std::string v = value();
      char *end = nullptr;
      o.outlierFraction = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(o.outlierFraction >= 0 && o.outlierFraction < 1))
        die("--outlier-fraction expects a number in [0, 1), got '" + v + "'");
    } else if (a == "--lloyd-iters")
      o.lloydIters = static_cast<int>(parseInt(a, value()));
    else if (a == "--kvquant-sinks")
      o.kvquantSinks = static_cast<int>(parseInt(a, value()));
    else if (a == "--refit-interval")
      o.refitInterval = static_cast<int>(parseInt(a, value()));
    else if (a == "--prefill")
      o.prefill = parseInt(a, value());
    else if (a == "--fit-all")
      o.fitAll = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else
      die("unknown option '" + a + "' (see --help)");
  }
  if (o.keys.empty() || o.values.empty())
    die("--keys and --values are required");
  if (o.methods.empty())
    die("--method is required");
  if (o.fitAll && o.prefill >= 0)
    die("--fit-all and --prefill exclude each other");
  return o;
}

kvq::npy::Array load(const std::string &path, const char *what) {
  kvq::npy::Array a;
  std::string err;
  if (!kvq::npy::read(path, a, err))
    die(err);
  if (a.shape.size() != 3)
    die(std::string(what) + " must be 3-D [tokens, heads, head_dim], got " +
        std::to_string(a.shape.size()) + "-D");
  for (float f : a.data)
    if (!std::isfinite(f))
      die(std::string(what) + " contains NaN or Inf");
  return a;
}

/// Causal grouped-query attention of every position, scale 1/sqrt(d).
std::vector<double> attention(const std::vector<float> &q, int64_t T,
                              int64_t qHeads, const std::vector<float> &k,
                              const std::vector<float> &v, int64_t kvHeads,
                              int64_t d) {
  std::vector<double> out(static_cast<size_t>(T * qHeads * d), 0.0);
  std::vector<double> w(static_cast<size_t>(T));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t group = qHeads / kvHeads;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t h = 0; h < qHeads; ++h) {
      const int64_t kvh = h / group;
      const float *qi = &q[static_cast<size_t>((i * qHeads + h) * d)];
      double mx = -INFINITY;
      for (int64_t t = 0; t <= i; ++t) {
        const float *kt = &k[static_cast<size_t>((t * kvHeads + kvh) * d)];
        double dot = 0;
        for (int64_t j = 0; j < d; ++j)
          dot += static_cast<double>(qi[j]) * kt[j];
        w[static_cast<size_t>(t)] = dot * scale;
        mx = std::max(mx, w[static_cast<size_t>(t)]);
      }
      double sum = 0;
      for (int64_t t = 0; t <= i; ++t)
        sum += (w[static_cast<size_t>(t)] = std::exp(w[static_cast<size_t>(t)] - mx));
      double *o = &out[static_cast<size_t>((i * qHeads + h) * d)];
      for (int64_t t = 0; t <= i; ++t) {
        const float *vt = &v[static_cast<size_t>((t * kvHeads + kvh) * d)];
        for (int64_t j = 0; j < d; ++j)
          o[j] += w[static_cast<size_t>(t)] / sum * vt[j];
      }
    }
  return out;
}

/// Errors over a range of token positions [from, to).
struct PartError {
  double keyMse = NAN, valueMse = NAN, attnRelErr = NAN;
};

struct Result {
  std::string method;
  int keyBits = 16, valueBits = 16, refitInterval = -1; // -1: not kvquant
  double keyMse = 0, valueMse = 0, attnRelErr = -1;
  PartError prefill, decode; ///< positions [0, P) and [P, T)
  kvq_stats stats{};
  std::vector<int64_t> sinkPositions;
};

/// Mean squared error of fetched vs input rows [from, to) of C channels.
double mse(const std::vector<float> &got, const std::vector<float> &want,
           int64_t from, int64_t to, int64_t C) {
  if (to <= from)
    return NAN;
  double sum = 0;
  for (int64_t i = from * C; i < to * C; ++i) {
    double d = static_cast<double>(got[static_cast<size_t>(i)]) -
               want[static_cast<size_t>(i)];
    sum += d * d;
  }
  return sum / static_cast<double>((to - from) * C);
}

/// ||O - Ô|| / ||O|| over query positions [from, to) (rows of `row` values).
double relErr(const std::vector<double> &approx,
              const std::vector<double> &reference, int64_t from, int64_t to,
              int64_t row) {
  if (to <= from)
    return NAN;
  double num2 = 0, den2 = 0;
  for (int64_t i = from * row; i < to * row; ++i) {
    double r = reference[static_cast<size_t>(i)];
    double d = approx[static_cast<size_t>(i)] - r;
    num2 += d * d;
    den2 += r * r;
  }
  return den2 > 0 ? std::sqrt(num2 / den2) : 0.0;
}

std::string num(double x) {
  if (!std::isfinite(x))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", x);
  return buf;
}

[[noreturn]] void runtimeFailure(const std::string &method, kvq_status s) {
  die(method + ": " + kvq_status_string(s) + ": " + kvq_last_error());
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseArgs(argc, argv);
  kvq::npy::Array K = load(opt.keys, "keys"), V = load(opt.values, "values");
  if (K.shape != V.shape)
    die("keys and values shapes differ");
  const int64_t T = K.shape[0], H = K.shape[1], D = K.shape[2];
  if (T == 0 || H == 0 || D == 0)
    die("keys are empty");
  kvq::npy::Array Q;
  const bool haveQ = !opt.queries.empty();
  if (haveQ) {
    Q = load(opt.queries, "queries");
    if (Q.shape[0] != T || Q.shape[2] != D)
      die("queries must be [tokens, q_heads, head_dim] with the keys' tokens "
          "and head_dim");
    if (Q.shape[1] == 0 || Q.shape[1] % H != 0)
      die("q_heads " + std::to_string(Q.shape[1]) +
          " is not a multiple of kv_heads " + std::to_string(H));
  }
  if (opt.prefill > T)
    die("--prefill " + std::to_string(opt.prefill) + " exceeds the " +
        std::to_string(T) + " tokens");
  if (opt.prefill == 0)
    die("--prefill must be at least 1");
  // Default: a prompt-sized prefill, clipped so that at least one token is
  // decoded (a one-token dump can only be a prefill).
  const int64_t prefill =
      opt.fitAll ? T
      : opt.prefill > 0
          ? opt.prefill
          : std::max<int64_t>(1, std::min<int64_t>(kDefaultPrefill, T - 1));
  const int64_t C = H * D;

  std::vector<double> reference;
  if (haveQ)
    reference = attention(Q.data, T, Q.shape[1], K.data, V.data, H, D);

  std::vector<Result> results;
  for (const std::string &m : opt.methods) {
    kvq_method method = m == "fp16"        ? KVQ_METHOD_FP16
                        : m == "kivi"      ? KVQ_METHOD_KIVI
                        : m == "kivi_sink" ? KVQ_METHOD_KIVI_SINK
                                           : KVQ_METHOD_KVQUANT;
    kvq_config cfg;
    kvq_config_init(&cfg, method);
    cfg.num_layers = 1;
    cfg.num_kv_heads = static_cast<int32_t>(H);
    cfg.head_dim = static_cast<int32_t>(D);
    if (opt.bits >= 0)
      cfg.key_bits = cfg.value_bits = opt.bits;
    if (opt.groupSize >= 0)
      cfg.group_size = opt.groupSize;
    else if (cfg.head_dim % cfg.group_size != 0)
      cfg.group_size = cfg.head_dim < 32 ? cfg.head_dim : cfg.group_size;
    if (opt.residual >= 0)
      cfg.residual_length = opt.residual;
    if (opt.residualMode >= 0)
      cfg.residual_mode = opt.residualMode;
    if (opt.sinks >= 0 && method == KVQ_METHOD_KIVI_SINK)
      cfg.n_sink_tokens = opt.sinks;
    if (opt.outlierFraction >= 0)
      cfg.outlier_fraction = static_cast<float>(opt.outlierFraction);
    if (opt.lloydIters >= 0)
      cfg.lloyd_iters = opt.lloydIters;
    if (opt.kvquantSinks >= 0)
      cfg.kvquant_n_sink = opt.kvquantSinks;
    if (opt.refitInterval >= 0)
      cfg.refit_interval = opt.refitInterval;

    kvq_cache_t *cache = nullptr;
    if (kvq_status s = kvq_cache_create(&cfg, &cache))
      runtimeFailure(m, s);
    auto update = [&](int64_t from, int64_t to) {
      kvq_status s = kvq_cache_update(cache, 0, &K.data[from * C],
                                      &V.data[from * C], to - from,
                                      KVQ_DTYPE_F32);
      if (s != KVQ_OK) {
        kvq_cache_destroy(cache);
        runtimeFailure(m, s);
      }
    };
    update(0, prefill);
    for (int64_t t = prefill; t < T; ++t)
      update(t, t + 1);
    std::vector<float> k(static_cast<size_t>(T * C)), v(k.size());
    if (kvq_status s =
            kvq_cache_fetch(cache, 0, k.data(), v.data(), T, KVQ_DTYPE_F32))
      runtimeFailure(m, s);
    Result r;
    r.method = m;
    if (method != KVQ_METHOD_FP16) {
      r.keyBits = cfg.key_bits;
      r.valueBits = cfg.value_bits;
    }
    if (method == KVQ_METHOD_KVQUANT)
      r.refitInterval = cfg.refit_interval;
    r.keyMse = mse(k, K.data, 0, T, C);
    r.valueMse = mse(v, V.data, 0, T, C);
    r.prefill.keyMse = mse(k, K.data, 0, prefill, C);
    r.prefill.valueMse = mse(v, V.data, 0, prefill, C);
    r.decode.keyMse = mse(k, K.data, prefill, T, C);
    r.decode.valueMse = mse(v, V.data, prefill, T, C);
    kvq_cache_stats(cache, 0, &r.stats);
    if (method == KVQ_METHOD_KIVI_SINK) {
      int64_t count = 0;
      kvq_cache_sink_positions(cache, 0, nullptr, 0, &count);
      r.sinkPositions.resize(static_cast<size_t>(count));
      if (count)
        kvq_cache_sink_positions(cache, 0, r.sinkPositions.data(), count,
                                 &count);
    }
    kvq_cache_destroy(cache);
    if (haveQ) {
      std::vector<double> approx = attention(Q.data, T, Q.shape[1], k, v, H, D);
      const int64_t row = Q.shape[1] * D;
      r.attnRelErr = relErr(approx, reference, 0, T, row);
      r.prefill.attnRelErr = relErr(approx, reference, 0, prefill, row);
      r.decode.attnRelErr = relErr(approx, reference, prefill, T, row);
    }
    results.push_back(r);
  }

  if (opt.json) {
    std::printf("[");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result &r = results[i];
      const kvq_stats &s = r.stats;
      std::printf("%s\n  {\"method\": \"%s\", \"key_bits\": %d, \"value_bits\": "
                  "%d, \"key_mse\": %s, \"value_mse\": %s",
                  i ? "," : "", r.method.c_str(), r.keyBits, r.valueBits,
                  num(r.keyMse).c_str(), num(r.valueMse).c_str());
      if (haveQ)
        std::printf(", \"attn_rel_err\": %s", num(r.attnRelErr).c_str());
      // The split: positions [0, prefill) went in as one update, the rest
      // one token per update; null where a part is empty.
      std::printf(", \"prefill_tokens\": %lld, \"decoded_tokens\": %lld, "
                  "\"key_mse_prefill\": %s, \"key_mse_decode\": %s, "
                  "\"value_mse_prefill\": %s, \"value_mse_decode\": %s",
                  (long long)prefill, (long long)(T - prefill),
                  num(r.prefill.keyMse).c_str(), num(r.decode.keyMse).c_str(),
                  num(r.prefill.valueMse).c_str(),
                  num(r.decode.valueMse).c_str());
      if (haveQ)
        std::printf(", \"attn_rel_err_prefill\": %s, "
                    "\"attn_rel_err_decode\": %s",
                    num(r.prefill.attnRelErr).c_str(),
                    num(r.decode.attnRelErr).c_str());
      if (r.refitInterval >= 0)
        std::printf(", \"refit_interval\": %d", r.refitInterval);
      std::printf(", \"effective_bits\": %s, \"tokens\": {\"total\": %lld, "
                  "\"compressed\": %lld, \"sink\": %lld, \"residual\": %lld}",
                  num(s.effective_bits).c_str(), (long long)s.tokens,
                  (long long)s.compressed_tokens, (long long)s.sink_tokens,
                  (long long)s.residual_tokens);
      std::printf(", \"bytes\": {\"codes\": %lld, \"scale_zero\": %lld, "
                  "\"level_tables\": %lld, \"outliers\": %lld, \"sinks\": "
                  "%lld, \"residual\": %lld, \"total\": %lld}, "
                  "\"outlier_count\": %lld, \"fp16_bytes\": %lld",
                  (long long)s.code_bytes, (long long)s.scale_zero_bytes,
                  (long long)s.level_table_bytes, (long long)s.outlier_bytes,
                  (long long)s.sink_bytes, (long long)s.residual_bytes,
                  (long long)s.total_bytes, (long long)s.outlier_count,
                  (long long)s.fp16_bytes);
      if (r.method == "kivi_sink") {
        std::printf(", \"sink_positions\": [");
        for (size_t j = 0; j < r.sinkPositions.size(); ++j)
          std::printf("%s%lld", j ? ", " : "", (long long)r.sinkPositions[j]);
        std::printf("]");
      }
      std::printf("}");
    }
    std::printf("\n]\n");
    return 0;
  }
  // The table: one row per method over all tokens, then its prefill part
  // and its decoded part, so a decode-time breakdown is visible at a glance.
  std::printf("%lld tokens: ", (long long)T);
  if (prefill == T)
    std::printf("one update of all of them (--fit-all): every fit saw every "
                "token it encodes; no decode steps\n");
  else
    std::printf("a %lld-token prefill, then %lld decode steps of one token "
                "(--prefill N, --fit-all)\n",
                (long long)prefill, (long long)(T - prefill));
  std::printf("%-10s %5s %5s %-8s %12s %12s %12s %8s %12s %12s  %s\n",
              "method", "kbits", "vbits", "part", "key_mse", "value_mse",
              "attn_rel_err", "eff_bits", "total_bytes", "fp16_bytes",
              "sinks");
  auto cell = [&](double x) { return haveQ ? num(x) : std::string("-"); };
  std::vector<std::string> notes;
  for (const Result &r : results) {
    std::string sinks;
    for (size_t j = 0; j < r.sinkPositions.size(); ++j)
      sinks += (j ? "," : "") + std::to_string(r.sinkPositions[j]);
    std::printf("%-10s %5d %5d %-8s %12.6g %12.6g %12s %8.3f %12lld %12lld  %s\n",
                r.method.c_str(), r.keyBits, r.valueBits, "all", r.keyMse,
                r.valueMse, cell(r.attnRelErr).c_str(),
                r.stats.effective_bits, (long long)r.stats.total_bytes,
                (long long)r.stats.fp16_bytes, sinks.c_str());
    if (prefill == T)
      continue;
    std::printf("%-10s %5s %5s %-8s %12.6g %12.6g %12s\n", "", "", "",
                "prefill", r.prefill.keyMse, r.prefill.valueMse,
                cell(r.prefill.attnRelErr).c_str());
    std::printf("%-10s %5s %5s %-8s %12.6g %12.6g %12s\n", "", "", "",
                "decode", r.decode.keyMse, r.decode.valueMse,
                cell(r.decode.attnRelErr).c_str());
    if (r.decode.keyMse > 2 * r.prefill.keyMse) {
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "%s: key MSE of the decoded tokens is %.1fx that of the "
                    "prefill",
                    r.method.c_str(),
                    r.prefill.keyMse > 0 ? r.decode.keyMse / r.prefill.keyMse
                                         : INFINITY);
      std::string note = buf;
      if (r.refitInterval == 0)
        note += " (kvquant refit_interval 0: key levels frozen at the "
                "prefill; try --refit-interval N)";
      notes.push_back(note);
    }
  }
  for (const std::string &n : notes)
    std::printf("warning: %s\n", n.c_str());
  return 0;
}
