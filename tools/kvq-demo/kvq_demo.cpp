//===- kvq_demo.cpp - run the compiled example graph for every method -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The demo's host program. examples/decoder_layer.mlir is compiled once per
// method (fp16, kivi, kivi_sink, kvquant) into a shared library by the
// build; this program loads each, streams the same seeded synthetic K/V/Q
// through it (a prefill, then one decode step per token) and prints what
// each method stores and how far its attention output is from the fp16 run.
//
//===----------------------------------------------------------------------===//
#include "flags.h"
#include "npy.h"
#include "table.h"
#include "version.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// The compiled graph's C interface (llvm.emit_c_interface)
//===----------------------------------------------------------------------===//

/// MLIR's descriptor of a rank-3 memref.
template <typename T> struct Memref3 {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
};

template <typename T>
Memref3<T> viewOf(std::vector<T> &data, int64_t d0, int64_t d1, int64_t d2) {
  return {data.data(), data.data(), 0, {d0, d1, d2}, {d1 * d2, d2, 1}};
}

/// The entry points of one compiled graph.
struct Graph {
  void *handle = nullptr;
  void *(*newCache)() = nullptr;
  void (*freeCache)(void *) = nullptr;
  void (*prefill)(void *, Memref3<uint16_t> *, Memref3<uint16_t> *) = nullptr;
  void (*decodeStep)(Memref3<float> *, void *, Memref3<uint16_t> *,
                     Memref3<uint16_t> *, Memref3<float> *) = nullptr;
  int64_t (*cacheBytes)(void *) = nullptr;
  int64_t (*fp16Bytes)(void *) = nullptr;
  double (*effectiveBits)(void *) = nullptr;

  /// Loads `path`; prints why and returns false when it cannot.
  bool load(const std::string &path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::fprintf(stderr, "kvq-demo: cannot load %s: %s\n", path.c_str(),
                   dlerror());
      return false;
    }
    bool ok = bind(newCache, "_mlir_ciface_new_cache") &&
              bind(freeCache, "_mlir_ciface_free_cache") &&
              bind(prefill, "_mlir_ciface_prefill") &&
              bind(decodeStep, "_mlir_ciface_decode_step") &&
              bind(cacheBytes, "_mlir_ciface_cache_bytes") &&
              bind(fp16Bytes, "_mlir_ciface_fp16_bytes") &&
              bind(effectiveBits, "_mlir_ciface_effective_bits");
    if (!ok)
      std::fprintf(stderr, "kvq-demo: %s lacks an entry point: %s\n",
                   path.c_str(), dlerror());
    return ok;
  }

  ~Graph() {
    if (handle)
      dlclose(handle);
  }

private:
  template <typename Fn> bool bind(Fn &fn, const char *symbol) {
    fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
    return fn != nullptr;
  }
};

//===----------------------------------------------------------------------===//
// The synthetic stream
//===----------------------------------------------------------------------===//

constexpr int64_t kKvHeads = 8, kHeadDim = 64, kQHeads = 16;
constexpr int kOutlierChannels[] = {5, 21, 50};
constexpr int64_t kSinkTokens[] = {0, 77, 301};
constexpr float kOutlierScale = 8.0f, kSinkScale = 25.0f;

/// splitmix64: a fixed, portable generator (std distributions differ
/// between standard libraries; the stream must not).
struct Rng {
  uint64_t state;
  double uniform() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  /// Laplace(0, scale): heavy-tailed like real K/V activations.
  float laplace(double scale) {
    double u = uniform() - 0.5;
    double magnitude = -scale * std::log(1.0 - 2.0 * std::fabs(u));
    return float(u < 0 ? -magnitude : magnitude);
  }
};

struct Stream {
  int64_t tokens;
  std::vector<float> keys, values, queries; // [tokens, heads, head_dim]
};

bool isSink(int64_t t) {
  for (int64_t s : kSinkTokens)
    if (s == t)
      return true;
  return false;
}

Stream makeStream(uint64_t seed, int64_t tokens) {
  Rng rng{seed};
  Stream s{tokens, {}, {}, {}};
  s.keys.resize(tokens * kKvHeads * kHeadDim);
  s.values.resize(s.keys.size());
  s.queries.resize(tokens * kQHeads * kHeadDim);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < kKvHeads; ++h)
      for (int64_t d = 0; d < kHeadDim; ++d) {
        float k = rng.laplace(0.5);
        for (int c : kOutlierChannels)
          if (d == c)
            k *= kOutlierScale;
        if (isSink(t))
          k *= kSinkScale;
        s.keys[(t * kKvHeads + h) * kHeadDim + d] = k;
        s.values[(t * kKvHeads + h) * kHeadDim + d] = rng.laplace(0.5);
      }
  // Queries lean towards the first sink's key, as attention heads that dump
  // mass on an attention sink do; the rest is noise.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t qh = 0; qh < kQHeads; ++qh) {
      int64_t h = qh / (kQHeads / kKvHeads);
      for (int64_t d = 0; d < kHeadDim; ++d)
        s.queries[(t * kQHeads + qh) * kHeadDim + d] =
            0.004f * s.keys[h * kHeadDim + d] + rng.laplace(0.5);
    }
  return s;
}

std::vector<uint16_t> toHalf(const float *x, int64_t n) {
  std::vector<uint16_t> h(n);
  for (int64_t i = 0; i < n; ++i)
    h[i] = kvq::npy::floatToHalf(x[i]);
  return h;
}

//===----------------------------------------------------------------------===//
// One run
//===----------------------------------------------------------------------===//

struct Result {
  std::string method;
  double effectiveBits = 0;
  int64_t bytes = 0, fp16Bytes = 0;
  std::vector<float> outputs; // every decode step's attention output
  double relError = 0;
};

/// Streams `s` through `graph`: `prefill` tokens at once, then one decode
/// step per remaining token.
Result run(Graph &graph, const std::string &method, const Stream &s,
           int64_t prefill) {
  Result r;
  r.method = method;
  void *cache = graph.newCache();
  int64_t kvRow = kKvHeads * kHeadDim, qRow = kQHeads * kHeadDim;
  std::vector<uint16_t> k = toHalf(s.keys.data(), prefill * kvRow);
  std::vector<uint16_t> v = toHalf(s.values.data(), prefill * kvRow);
  auto kd = viewOf(k, prefill, kKvHeads, kHeadDim);
  auto vd = viewOf(v, prefill, kKvHeads, kHeadDim);
  graph.prefill(cache, &kd, &vd);
  for (int64_t t = prefill; t < s.tokens; ++t) {
    std::vector<uint16_t> kt = toHalf(&s.keys[t * kvRow], kvRow);
    std::vector<uint16_t> vt = toHalf(&s.values[t * kvRow], kvRow);
    std::vector<float> qt(&s.queries[t * qRow], &s.queries[(t + 1) * qRow]);
    auto ktd = viewOf(kt, 1, kKvHeads, kHeadDim);
    auto vtd = viewOf(vt, 1, kKvHeads, kHeadDim);
    auto qtd = viewOf(qt, 1, kQHeads, kHeadDim);
    Memref3<float> out;
    graph.decodeStep(&out, cache, &ktd, &vtd, &qtd);
    r.outputs.insert(r.outputs.end(), out.aligned + out.offset,
                     out.aligned + out.offset + qRow);
    std::free(out.allocated); // the graph allocated it for us
  }
  r.bytes = graph.cacheBytes(cache);
  r.fp16Bytes = graph.fp16Bytes(cache);
  r.effectiveBits = graph.effectiveBits(cache);
  graph.freeCache(cache);
  return r;
}

double relativeError(const std::vector<float> &reference,
                     const std::vector<float> &approx) {
  double num = 0, den = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    double d = double(approx[i]) - double(reference[i]);
    num += d * d;
    den += double(reference[i]) * double(reference[i]);
  }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

const char *kUsage =
    "usage: kvq-demo [--graphs DIR] [--seed N] [--prefill N] [--steps N] "
    "[--check] [--version]\n"
    "  --graphs DIR  where decoder_layer_<method>.so are (default: the "
    "build's)\n"
    "  --check       exit 1 unless the table shows what docs/ARCHITECTURE.md says\n"
    "  (every flag also takes --flag=value)\n";

} // namespace

int main(int argc, char **argv) {
  std::string dir = KVQ_DEMO_GRAPH_DIR;
  int64_t seed = 2026, prefill = 512, steps = 128;
  bool check = false;
  // The flag rules of every kvq tool (tools/common/flags.h).
  kvq::cli::Parser p("kvq-demo", argc, argv);
  while (p.next()) {
    if (p.is("--graphs"))
      dir = p.value();
    else if (p.is("--seed"))
      seed = p.intValue(0, INT64_MAX);
    else if (p.is("--prefill"))
      prefill = p.intValue(1, 1 << 20);
    else if (p.is("--steps"))
      steps = p.intValue(1, 1 << 20);
    else if (p.is("--check"))
      check = p.flag();
    else if (p.is("--version")) {
      std::printf("kvq-demo %s\n", kvq::cli::versionString());
      return 0;
    } else if (p.is("--help")) {
      std::fputs(kUsage, stdout);
      return 0;
    } else
      p.unknown();
  }

  Stream stream = makeStream(uint64_t(seed), prefill + steps);
  std::printf("kvq demo: examples/decoder_layer.mlir, compiled by kvq-opt "
              "--kvq-configure-caches=method=<m> --kvq-to-llvm for each "
              "method, run against libkvq_runtime_cpu.\n");
  std::printf("Synthetic K/V stream made by kvq-demo (seed %lld): %d KV heads "
              "x %d dims, %d query heads; %lld-token prefill + %lld decode "
              "steps.\n",
              (long long)seed, int(kKvHeads), int(kHeadDim), int(kQHeads),
              (long long)prefill, (long long)steps);
  std::printf("Heavy-tailed (Laplace) K/V; outlier key channels 5, 21, 50 "
              "(x%.0f); planted high-norm sink tokens at 0, 77, 301 (x%.0f "
              "key norm); queries lean towards the sink at 0.\n\n",
              kOutlierScale, kSinkScale);

  const char *methods[] = {"fp16", "kivi", "kivi_sink", "kvquant"};
  std::vector<Result> results;
  for (const char *method : methods) {
    Graph graph;
    if (!graph.load(dir + "/decoder_layer_" + method + ".so"))
      return 1;
    results.push_back(run(graph, method, stream, prefill));
  }
  for (Result &r : results)
    r.relError = relativeError(results[0].outputs, r.outputs);

  const int labelWidth = kvq::cli::labelColumnWidth(
      "method", results, [](const Result &r) { return r.method; });
  std::printf("%-*s %10s %12s %10s %20s\n", labelWidth, "method", "eff. bits",
              "cache bytes", "vs fp16", "attn rel. error");
  for (const Result &r : results)
    std::printf("%-*s %10.2f %12lld %9.2fx %20.3e\n", labelWidth, r.method.c_str(),
                r.effectiveBits, (long long)r.bytes,
                double(r.fp16Bytes) / double(r.bytes), r.relError);
  std::printf("\nattn rel. error = ||O - O_fp16|| / ||O_fp16|| over the "
              "attention outputs of all %lld decode steps.\n",
              (long long)steps);

  if (!check)
    return 0;
  // What docs/ARCHITECTURE.md ("What ./kvq.sh demo and ./kvq.sh test run")
  // says the table shows.
  const Result &fp16 = results[0], &kivi = results[1], &sink = results[2],
               &nuq = results[3];
  bool ok = fp16.relError == 0.0 && fp16.effectiveBits == 16.0;
  for (const Result *r : {&kivi, &sink, &nuq})
    ok = ok && r->bytes < fp16.bytes && r->relError > 0.0 && r->relError < 0.5;
  ok = ok && sink.relError < kivi.relError && nuq.relError < kivi.relError;
  if (!ok)
    std::fprintf(stderr, "kvq-demo --check: the table does not show what the "
                         "docs/ARCHITECTURE.md claims\n");
  return ok ? 0 : 1;
}
