//===- Bench.cpp - kvq-run --bench: decode speed per cache method ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// For each method and context length C: the compiled model's cache is
// filled to C tokens through the runtime (random K/V: the speed of a step
// does not depend on the values), then decode steps at position C are timed.
// The attention part of a step is exactly the runtime calls the lowered
// graph makes per layer (kvq_cache_update of one token, kvq_cache_attend of
// the query heads); it is timed the same way on a second cache filled
// identically, and "rest" is the step minus that. Medians of the repetitions.
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Bench.h"

#include "kvq/runtime.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace kvq::run {

namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::time_point since) {
  return std::chrono::duration<double>(clock::now() - since).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Appends `tokens` random rows to every layer of `cache`, in chunks.
bool fill(kvq_cache_t *cache, const model::Llama2cConfig &c, int64_t tokens,
          std::mt19937 &rng, std::string *error) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t chunk = 1024;
  std::vector<float> k, v;
  for (int32_t layer = 0; layer < c.layers; ++layer)
    for (int64_t done = 0; done < tokens;) {
      int64_t n = std::min(chunk, tokens - done);
      k.resize(size_t(n) * c.kvDim());
      v.resize(k.size());
      for (float &x : k)
        x = normal(rng);
      for (float &x : v)
        x = normal(rng);
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
    const CompileOptions &compileOptions) {
  const auto &c = ckpt.config();
  std::string error;
  struct Row {
    std::string method;
    int64_t context;
    double step, attention;
  };
  std::vector<Row> rows;
  for (const auto &[label, options] : methods) {
    auto model =
        CompiledModel::compile(ckpt, 1, options, &error, {}, compileOptions);
    if (!model) {
      llvm::errs() << "kvq-run: error: " << label << ": " << error << "\n";
      return 2;
    }
    for (int64_t context : contexts) {
      if (context + repetitions > c.seqLen) {
        llvm::errs() << "kvq-run: error: context " << context << " + "
                     << repetitions << " steps exceeds seq_len " << c.seqLen
                     << "\n";
        return 2;
      }
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
      std::vector<float> kv(size_t(c.kvDim()), 0.5f), q(size_t(c.dim), 0.25f),
          out(size_t(c.dim));
      std::vector<double> attention;
      for (int r = 0; r < repetitions; ++r) {
        auto start = clock::now();
        for (int32_t layer = 0; layer < c.layers; ++layer) {
          kvq_cache_update(twin, layer, kv.data(), kv.data(), 1, KVQ_DTYPE_F32);
          kvq_cache_attend(twin, layer, q.data(), 1, c.heads, out.data());
        }
        attention.push_back(seconds(start));
      }
      kvq_cache_destroy(twin);
      rows.push_back({label, context, median(steps), median(attention)});
      if (!json)
        llvm::errs() << "  " << label << " @" << context << ": step "
                     << llvm::format("%.2f", 1e3 * rows.back().step) << " ms\n";
    }
  }
  auto fp16Attention = [&](int64_t context) {
    for (const Row &r : rows)
      if (r.method == "fp16" && r.context == context)
        return r.attention;
    return 0.0;
  };
  if (json) {
    llvm::outs() << "{\n  \"config\": {\"dim\": " << c.dim
                 << ", \"hidden_dim\": " << c.hiddenDim
                 << ", \"layers\": " << c.layers << ", \"heads\": " << c.heads
                 << ", \"kv_heads\": " << c.kvHeads
                 << ", \"vocab\": " << c.vocab << ", \"seq_len\": " << c.seqLen
                 << "},\n  \"repetitions\": " << repetitions
                 << ",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row &r = rows[i];
      llvm::outs() << "    {\"method\": \"" << r.method
                   << "\", \"context\": " << r.context
                   << ", \"step_ms\": " << llvm::format("%.4f", 1e3 * r.step)
                   << ", \"attention_ms\": "
                   << llvm::format("%.4f", 1e3 * r.attention)
                   << ", \"rest_ms\": "
                   << llvm::format("%.4f", 1e3 * (r.step - r.attention)) << "}"
                   << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    llvm::outs() << "  ]\n}\n";
    return 0;
  }
  llvm::outs() << "decode step of a " << c.layers << "-layer model (dim "
               << c.dim << ", " << c.heads << " query / " << c.kvHeads
               << " KV heads, head_dim " << c.headDim() << ", hidden "
               << c.hiddenDim << ", vocab " << c.vocab
               << "), one thread, median of " << repetitions << " steps\n\n";
  llvm::outs() << llvm::format("%-28s %8s %10s %13s %10s %16s\n", "method",
                               "context", "step ms", "attention ms", "rest ms",
                               "attn vs fp16");
  for (const Row &r : rows) {
    double base = fp16Attention(r.context);
    llvm::outs() << llvm::format(
        "%-28s %8lld %10.2f %13.3f %10.2f %15.2fx\n", r.method.c_str(),
        (long long)r.context, 1e3 * r.step, 1e3 * r.attention,
        1e3 * (r.step - r.attention), base > 0 ? r.attention / base : 0.0);
  }
  llvm::outs() << "\nattention: the runtime calls the lowered graph makes per "
                  "step (kvq_cache_update + kvq_cache_attend per layer), timed "
                  "on an identically filled cache; rest = step - attention "
                  "(projections, FFN and classifier: kvq_matmul calls, or "
                  "scalar loops with --matmul-kernels=false; norms, RoPE).\n";
  return 0;
}

} // namespace kvq::run
