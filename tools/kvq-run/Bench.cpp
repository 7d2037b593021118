//===- Bench.cpp - kvq-run --bench: decode speed per cache method ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// For each method and context length C: the compiled model's cache is
// filled to C tokens through the runtime (random K/V: the speed of a step
// does not depend on the values), then decode steps at position C are timed.
// The attention part of a step is exactly the runtime calls the lowered
// graph makes per layer (kvq_cache_update of one token, kvq_cache_attend of
// the query heads); it is timed the same way on a second cache filled
// identically. The dense part is the kvq_matmul calls of a step (every
// projection, the FFN and the classifier, m = 1) on the checkpoint's own
// weights, timed alone; "rest" is the step minus both. Each is the fastest
// of its repetitions (interference only adds time), so the parts are timed
// apart and "rest" can come out slightly negative when a step is nearly all
// dense layers. Bytes read per step are the dense layers' weights plus the
// cache's bytes; the bound they are compared with is the fastest read loop
// (tools/common/read_loops.h) over a buffer far larger than any last-level
// cache, timed in the same run before and after the steps. Prefill: one
// @prefill of --prefill tokens on an empty cache, its multiply-adds those
// of the dense layers.
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Bench.h"
#include "tools/kvq-run/Common.h"
#include "tools/kvq-run/Methods.h"

#include "kvq/runtime.h"
#include "json_number.h"
#include "json_report.h"
#include "read_loops.h"
#include "run_info.h"
#include "table.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <random>

namespace kvq::run {

namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::time_point since) {
  return std::chrono::duration<double>(clock::now() - since).count();
}

/// The fastest repetition: on a shared machine, interference only ever
/// adds time.
double fastest(const std::vector<double> &v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

/// One dense layer of a decode step: n x k weights at `offset` floats.
struct Dense {
  int64_t offset, n, k;
};

/// The kvq_matmul calls of one token through the model (the graph's
/// projections, FFN and classifier).
std::vector<Dense> denseLayers(const model::Llama2cCheckpoint &ckpt) {
  const auto &c = ckpt.config();
  const auto &l = ckpt.layout();
  const int64_t d = c.dim, kv = c.kvDim(), h = c.hiddenDim;
  std::vector<Dense> out;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    out.push_back({l.wq + layer * d * d, d, d});
    out.push_back({l.wk + layer * kv * d, kv, d});
    out.push_back({l.wv + layer * kv * d, kv, d});
    out.push_back({l.wo + layer * d * d, d, d});
    out.push_back({l.w1 + layer * h * d, h, d});
    out.push_back({l.w3 + layer * h * d, h, d});
    out.push_back({l.w2 + layer * d * h, d, h});
  }
  out.push_back({l.classifier, c.vocab, d});
  return out;
}

/// The best read bandwidth (GB/s) of this machine now: every read loop
/// over 512 MB, the fastest of three reads each.
double readBandwidth() {
  const size_t bytes = size_t(512) << 20;
  std::vector<uint64_t> buffer(bytes / 8, 1);
  double best = 0;
  volatile uint64_t sink = 0;
  for (const kvqbench::ReadLoop &loop : kvqbench::readLoops())
    for (int r = 0; r < 3; ++r) {
      auto start = clock::now();
      sink = sink + loop.fn(buffer.data(), buffer.size());
      best = std::max(best, double(bytes) / seconds(start) / 1e9);
    }
  return best;
}

/// Standard normal samples that fill() copies windows of: drawing every
/// element of a long context afresh (half a billion per fill at 32K tokens
/// of the long-context shape) took most of such a run.
const std::vector<float> &normalPool() {
  static const std::vector<float> pool = [] {
    std::mt19937 rng(99);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> p(size_t(1) << 22);
    for (float &x : p)
      x = normal(rng);
    return p;
  }();
  return pool;
}

/// Appends `tokens` random rows to every layer of `cache`, in chunks: each
/// chunk's keys and values are windows of normalPool() at offsets drawn
/// from rng (the same rows for the same rng).
bool fill(kvq_cache_t *cache, const model::Llama2cConfig &c, int64_t tokens,
          std::mt19937 &rng, std::string *error) {
  const std::vector<float> &pool = normalPool();
  const int64_t chunk = 1024;
  std::vector<float> k, v;
  for (int32_t layer = 0; layer < c.layers; ++layer)
    for (int64_t done = 0; done < tokens;) {
      int64_t n = std::min(chunk, tokens - done);
      k.resize(size_t(n) * c.kvDim());
      v.resize(k.size());
      // A window of the pool (or, for rows wider than it, the pool again
      // and again from a random start).
      for (std::vector<float> *rows : {&k, &v}) {
        size_t at = rng() % pool.size();
        for (float &x : *rows) {
          x = pool[at];
          at = at + 1 == pool.size() ? 0 : at + 1;
        }
      }
      if (kvq_cache_update(cache, layer, k.data(), v.data(), n,
                           KVQ_DTYPE_F32) != KVQ_OK) {
        *error = std::string("filling the cache: ") + kvq_last_error();
        return false;
      }
      done += n;
    }
  return true;
}

} // namespace

int runDecodeBench(
    const model::Llama2cCheckpoint &ckpt,
    const std::vector<std::pair<std::string, std::string>> &methods,
    const std::vector<int64_t> &contexts, int repetitions, bool json,
    const import::ImportOptions &spelling,
    const CompileOptions &compileOptions, int64_t prefillTokens,
    int threads, const cli::Progress &progress) {
  cli::RunInfo runInfo = cli::RunInfo::start();
  const auto &c = ckpt.config();
  std::string error;
  struct Row {
    std::string method;
    int64_t context;
    double step, attention, dense;
    int64_t cacheBytes;
  };
  std::vector<Row> rows;
  struct Prefill {
    std::string method;
    double seconds;
  };
  std::vector<Prefill> prefills;
  const std::vector<Dense> dense = denseLayers(ckpt);
  int64_t denseWeights = 0;
  for (const Dense &d : dense)
    denseWeights += d.n * d.k;
  const bool f32Weights =
      spelling.weightType == import::ImportOptions::WeightType::F32;
  const int64_t weightBytes = (f32Weights ? 4 : 2) * denseWeights;
  // The dense layers of one token, alone: the graph's kvq_matmul calls.
  std::vector<float> x(size_t(std::max(c.dim, c.hiddenDim)), 0.5f),
      y(size_t(std::max<int64_t>(c.vocab, c.hiddenDim)));
  auto denseStep = [&](const CompiledModel &m) -> bool {
    const char *base = static_cast<const char *>(m.weights());
    for (const Dense &d : dense)
      if (kvq_matmul(x.data(), d.k, base + d.offset * (f32Weights ? 4 : 2),
                     m.weightType(), d.k, y.data(), d.n, 1, d.n,
                     d.k) != KVQ_OK)
        return false;
    return true;
  };
  const double boundBefore = readBandwidth();
  for (const auto &[label, options] : methods) {
    import::ImportOptions modelSpelling = spelling;
    auto model = CompiledModel::compile(ckpt, prefillTokens, options, &error,
                                        modelSpelling, compileOptions);
    if (!model) {
      llvm::errs() << "kvq-run: error: " << label << ": " << error << "\n";
      return 2;
    }
    progress("%s: compiled", label.c_str());
    {
      std::vector<int32_t> tokens(static_cast<size_t>(prefillTokens));
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = int32_t((i * 7 + 3) % size_t(c.vocab));
      std::vector<double> times;
      for (int r = 0; r < std::min(repetitions, 3); ++r) {
        if (!model->reset(&error)) {
          llvm::errs() << "kvq-run: error: " << error << "\n";
          return 2;
        }
        auto start = clock::now();
        if (!model->prefill(tokens.data(), 0)) {
          llvm::errs() << "kvq-run: error: " << label << ": "
                       << model->error() << "\n";
          return 2;
        }
        times.push_back(seconds(start));
      }
      prefills.push_back({label, fastest(times)});
      progress("%s: prefill of %lld tokens: %.2f ms", label.c_str(),
               static_cast<long long>(prefillTokens),
               1e3 * prefills.back().seconds);
    }
    for (int64_t context : contexts) {
      assert(context >= 0 && context + repetitions <= c.seqLen &&
             "runBench checks the contexts");
      std::mt19937 rng(1234);
      if (!model->reset(&error) ||
          !fill(static_cast<kvq_cache_t *>(model->cacheHandle()), c, context,
                rng, &error)) {
        llvm::errs() << "kvq-run: error: " << error << "\n";
        return 2;
      }
      std::vector<double> steps;
      for (int r = 0; r < repetitions; ++r) {
        auto start = clock::now();
        if (!model->decode(int32_t(r + 3) % c.vocab, context + r)) {
          llvm::errs() << "kvq-run: error: " << label << ": "
                       << model->error() << "\n";
          return 2;
        }
        steps.push_back(seconds(start));
      }
      // The same runtime calls on a cache filled the same way.
      auto *twin = static_cast<kvq_cache_t *>(model->newCache(&error));
      if (!twin) {
        llvm::errs() << "kvq-run: error: " << error << "\n";
        return 2;
      }
      std::mt19937 rng2(1234);
      if (!fill(twin, c, context, rng2, &error)) {
        kvq_cache_destroy(twin);
        llvm::errs() << "kvq-run: error: " << error << "\n";
        return 2;
      }
      std::vector<float> kv(size_t(c.kvDim()), 0.5f),
          q(size_t(c.qDim()), 0.25f), out(size_t(c.qDim()));
      std::vector<double> attention;
      for (int r = 0; r < repetitions; ++r) {
        auto start = clock::now();
        for (int32_t layer = 0; layer < c.layers; ++layer) {
          kvq_cache_update(twin, layer, kv.data(), kv.data(), 1, KVQ_DTYPE_F32);
          kvq_cache_attend(twin, layer, q.data(), 1, c.heads, out.data());
        }
        attention.push_back(seconds(start));
      }
      kvq_stats cacheStats{};
      kvq_cache_stats(twin, -1, &cacheStats);
      kvq_cache_destroy(twin);
      std::vector<double> denseTimes;
      for (int r = 0; r < repetitions; ++r) {
        auto start = clock::now();
        if (!denseStep(*model)) {
          llvm::errs() << "kvq-run: error: kvq_matmul: " << kvq_last_error()
                       << "\n";
          return 2;
        }
        denseTimes.push_back(seconds(start));
      }
      rows.push_back({label, context, fastest(steps), fastest(attention),
                      fastest(denseTimes), cacheStats.total_bytes});
      progress("%s @%lld: step %.2f ms", label.c_str(),
               static_cast<long long>(context), 1e3 * rows.back().step);
    }
  }
  const double bound = std::max(boundBefore, readBandwidth());
  auto fp16Attention = [&](int64_t context) {
    for (const Row &r : rows)
      if (r.method == "fp16" && r.context == context)
        return r.attention;
    return 0.0;
  };
  auto bytesOf = [&](const Row &r) { return double(weightBytes + r.cacheBytes); };
  // Prefill's multiply-adds: every token through the layers, the
  // classifier for the last one only (the graph returns its logits).
  const double classifier = double(c.vocab) * double(c.dim);
  const double prefillFlops =
      2.0 * (double(prefillTokens) * (double(denseWeights) - classifier) +
             classifier);
  auto decodeStep = [&](const std::string &method) {
    for (const Row &r : rows)
      if (r.method == method)
        return r.step;
    return 0.0;
  };
  runInfo.finish();
  if (json) {
    // The build, machine, date and load average (tools/common/run_info.h).
    using cli::Json;
    using cli::fixed;
    Json doc;
    runInfo.addTo(doc);
    doc["config"] = {{"dim", c.dim},         {"hidden_dim", c.hiddenDim},
                     {"layers", c.layers},   {"heads", c.heads},
                     {"kv_heads", c.kvHeads}, {"vocab", c.vocab},
                     {"seq_len", c.seqLen}};
    doc["threads"] = threads;
    doc["repetitions"] = repetitions;
    doc["read_gbps"] = fixed(bound, 2);
    doc["weight_type"] = import::weightTypeName(spelling.weightType);
    doc["weight_bytes"] = weightBytes;
    Json decode = Json::array();
    for (const Row &r : rows)
      decode.push_back(
          {{"method", r.method},
           {"context", r.context},
           {"step_ms", fixed(1e3 * r.step, 4)},
           {"dense_ms", fixed(1e3 * r.dense, 4)},
           {"attention_ms", fixed(1e3 * r.attention, 4)},
           {"rest_ms", fixed(1e3 * (r.step - r.attention - r.dense), 4)},
           {"cache_bytes", r.cacheBytes},
           {"bytes_read", int64_t(bytesOf(r))},
           {"gbps", fixed(bytesOf(r) / r.step / 1e9, 2)},
           {"vs_bound", fixed(r.step / (bytesOf(r) / bound / 1e9), 3)},
           {"tokens_per_second", fixed(1.0 / r.step, 2)}});
    doc["rows"] = std::move(decode);
    Json prefill = Json::array();
    for (const Prefill &p : prefills) {
      const double step = decodeStep(p.method);
      prefill.push_back(
          {{"method", p.method},
           {"tokens", prefillTokens},
           {"ms", fixed(1e3 * p.seconds, 4)},
           {"tokens_per_second", fixed(double(prefillTokens) / p.seconds, 2)},
           {"dense_gflops", fixed(prefillFlops / p.seconds / 1e9, 2)},
           {"vs_decode",
            fixed(step > 0 ? step * double(prefillTokens) / p.seconds : 0.0,
                  2)}});
    }
    doc["prefill"] = std::move(prefill);
    llvm::outs() << cli::jsonReport(doc);
    return 0;
  }
  llvm::outs() << "decode step of a " << c.layers << "-layer model (dim "
               << c.dim << ", " << c.heads << " query / " << c.kvHeads
               << " KV heads, head_dim " << c.headDim() << ", hidden "
               << c.hiddenDim << ", vocab " << c.vocab << "), " << threads
               << (threads == 1 ? " thread" : " threads") << ", fastest of "
               << repetitions << " steps; read bound "
               << llvm::format("%.1f", bound) << " GB/s (best read loop over "
               << "512 MB, this run), dense weights "
               << llvm::format("%.1f", weightBytes / 1e6) << " MB "
               << import::weightTypeName(spelling.weightType) << "\n\n";
  const int labelWidth = cli::labelColumnWidth(
      "method", rows, [](const Row &r) { return r.method; });
  llvm::outs() << llvm::format("%-*s %7s %9s %9s %9s %9s %9s %7s %8s %9s %10s\n",
                               labelWidth, "method", "context", "step ms", "dense ms",
                               "attn ms", "rest ms", "MB read", "GB/s",
                               "x bound", "tokens/s", "attn/fp16");
  for (const Row &r : rows) {
    double base = fp16Attention(r.context);
    llvm::outs() << llvm::format(
        "%-*s %7lld %9.2f %9.2f %9.3f %9.2f %9.1f %7.1f %7.2fx %9.1f %9.2fx\n",
        labelWidth, r.method.c_str(), (long long)r.context, 1e3 * r.step, 1e3 * r.dense,
        1e3 * r.attention, 1e3 * (r.step - r.attention - r.dense),
        bytesOf(r) / 1e6, bytesOf(r) / r.step / 1e9,
        r.step / (bytesOf(r) / bound / 1e9), 1.0 / r.step,
        base > 0 ? r.attention / base : 0.0);
  }
  llvm::outs() << "\nprefill of " << prefillTokens
               << " tokens on an empty cache, fastest of "
               << std::min(repetitions, 3) << "\n\n";
  llvm::outs() << llvm::format("%-*s %10s %10s %12s %15s\n", labelWidth,
                               "method",
                               "ms", "tokens/s", "dense GFLOP/s",
                               "per token vs decode");
  for (const Prefill &p : prefills) {
    double step = decodeStep(p.method);
    llvm::outs() << llvm::format(
        "%-*s %10.2f %10.1f %12.1f %14.1fx\n", labelWidth, p.method.c_str(),
        1e3 * p.seconds, double(prefillTokens) / p.seconds,
        prefillFlops / p.seconds / 1e9,
        step > 0 ? step * double(prefillTokens) / p.seconds : 0.0);
  }
  llvm::outs() << "\ndense: the step's kvq_matmul calls (projections, FFN, "
                  "classifier) timed alone on the model's weights; attention: "
                  "the runtime calls the lowered graph makes per step "
                  "(kvq_cache_update + kvq_cache_attend per layer) on an "
                  "identically filled cache; rest = step - dense - attention "
                  "(norms, RoPE, the JIT's loops). MB read: dense weights + "
                  "the cache's bytes; x bound: step time over MB read / the "
                  "read bound. Prefill: dense GFLOP/s counts the dense "
                  "layers' multiply-adds (x2); per token vs decode: decode "
                  "step (first context) x tokens / prefill time.\n";
  return 0;
}

int runBench(const Options &opt, const LoadedModel &model,
             const cli::Progress &progress) {
  const model::Llama2cConfig &config = model.config();
  std::optional<std::vector<MethodSpec>> specs = planMethods(opt);
  if (!specs)
    return kFailed;
  std::vector<std::pair<std::string, std::string>> methods;
  for (const MethodSpec &m : *specs) {
    if (m.method == "none")
      return fail("--bench times kvq caches; 'none' has no runtime cache");
    methods.push_back({m.label, passOptionsFor(m)});
  }
  const int64_t maxSteps = std::min<int64_t>(1000, config.seqLen);
  if (opt.benchSteps < 1 || opt.benchSteps > maxSteps)
    return fail("--bench-steps must be in [1, " + std::to_string(maxSteps) +
                "]");
  // Unless given, the prefill is the default or the whole window if shorter.
  const int64_t prefill =
      opt.prefillGiven ? opt.prefill
                       : std::min<int64_t>(opt.prefill, config.seqLen);
  if (prefill < 1 || prefill > config.seqLen)
    return fail("--prefill must be in [1, " + std::to_string(config.seqLen) +
                "]");
  // The timed steps sit at positions context .. context + steps - 1.
  const int64_t lastContext = config.seqLen - opt.benchSteps;
  std::vector<int64_t> points = opt.contexts;
  if (points.empty())
    for (int64_t p : {1024, 4096, 8192})
      if (p <= lastContext)
        points.push_back(p);
  if (points.empty())
    points.push_back(std::min<int64_t>(config.seqLen / 2, lastContext));
  for (int64_t p : points)
    if (p < 0 || p > lastContext)
      return fail("--contexts: " + std::to_string(p) + " is outside [0, " +
                  std::to_string(lastContext) + "] (seq_len " +
                  std::to_string(config.seqLen) + " less " +
                  std::to_string(opt.benchSteps) + " --bench-steps)");
  return runDecodeBench(*model.ckpt, methods, points, opt.benchSteps, opt.json,
                        model.spelling, model.compileOptions, prefill,
                        int(opt.threads), progress);
}

} // namespace kvq::run
