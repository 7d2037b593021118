//===- kvq_bench.cpp - Throughput and latency of kvq against this machine ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One run, one thread: the machine's memcpy and read bandwidth, then
// quantize/dequantize throughput per method and width (GB/s of fp16 input),
// fused decode attention per cache type and context length with the bytes
// it reads and the bandwidth bound they imply, the cost of appending one
// token at 1K and 64K cached tokens, and the kvq-opt pipeline time on a
// generated 32-layer graph. Ratios (vs memcpy, vs the bound, vs fp16) are
// printed next to the absolute numbers; --json emits one object with the
// keys docs/PERFORMANCE.md documents.
//
//===----------------------------------------------------------------------===//
#include "flags.h"
#include "graph.h"
#include "harness.h"

#include "kernels.h"
#include "kvq/runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <vector>

using namespace kvqbench;

namespace {

struct Options {
  bool json = false, quick = false, smoke = false;
  std::string kvqOpt; ///< empty: look next to this executable
  int layers = 32;
  /// Sections to run (--only) and attention caches to time (--caches);
  /// empty: all. Skipped sections print as empty lists / null.
  std::vector<std::string> only, caches;
  bool runs(const char *section) const { return selected(only, section); }
  bool times(const char *cache) const { return selected(caches, cache); }
  static bool selected(const std::vector<std::string> &list, const char *x) {
    return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
  }
};

struct QuantRow {
  std::string method;
  int bits;
  double gbps, refGbps;
};

struct AttnRow {
  std::string cache;
  int64_t tokens;
  int qPerKv;
  double ms;
  int64_t bytesRead;
  double boundMs;
};

struct Report {
  double memcpyGbps = 0, readGbps = 0;
  std::vector<QuantRow> quant, dequant;
  std::vector<AttnRow> attention;
  double appendNs1k = 0, appendNs64k = 0;
  bool compiled = false;
  double compileSeconds = 0;
  std::string compileNote;
  /// One-minute load average before and after the run (-1: unknown): a
  /// shared machine's other work moves every figure, so the output says
  /// how busy it was.
  double loadStart = -1, loadEnd = -1;
};

double loadAverage() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

constexpr int kHeads = 8, kDim = 128, kChannels = kHeads * kDim;

void check(kvq_status s, const char *what) {
  if (s != KVQ_OK) {
    std::fprintf(stderr, "kvq-bench: %s failed: %s: %s\n", what,
                 kvq_status_string(s), kvq_last_error());
    std::exit(1);
  }
}

/// n fp16 values of N(0, 1) (fixed seed: every run measures the same data).
std::vector<uint16_t> gaussianHalfs(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) {
    double u1 = (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
    f[i] = static_cast<float>(std::sqrt(-2 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }
  std::vector<uint16_t> h(n);
  // Through the runtime's own converter: group_quant would reject nothing
  // here, and the bytes are what a model would hand over.
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &f[i], 4);
    // Round to nearest even to fp16 (values are well inside the range).
    uint32_t sign = (b >> 16) & 0x8000u, mag = b & 0x7fffffffu;
    if (mag < 0x38800000u) { // below the fp16 normal range: flush to 0
      h[i] = static_cast<uint16_t>(sign);
      continue;
    }
    uint32_t r = ((mag >> 13) - (112u << 10));
    uint32_t rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u)))
      ++r;
    h[i] = static_cast<uint16_t>(sign | r);
  }
  return h;
}

Effort effort(const Options &o) {
  Effort e;
  if (o.smoke) {
    e.warmup = 1;
    e.reps = 3;
    e.minSeconds = 0.0;
  } else if (o.quick) {
    e.warmup = 1;
    e.reps = 5;
    e.minSeconds = 0.1;
  }
  return e;
}

//===----------------------------------------------------------------------===//
// Baselines
//===----------------------------------------------------------------------===//

/// Sum of n words with eight independent accumulators (vectorized by the
/// compiler). On x86_64 an AVX2 clone is used when the CPU has it: the
/// baseline is the fastest sequential read this machine does, so the
/// attention bound derived from it is not flattered by a slow loop.
template <int N> uint64_t sumWords(const uint64_t *p, size_t n) {
  uint64_t a[N] = {};
  for (size_t i = 0; i + N <= n; i += N)
    for (int j = 0; j < N; ++j)
      a[j] += p[i + j];
  uint64_t s = 0;
  for (int j = 0; j < N; ++j)
    s += a[j];
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sumWordsAvx2(const uint64_t *p,
                                                      size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const __m256i *v = reinterpret_cast<const __m256i *>(p);
  for (size_t i = 0; i + 16 <= n; i += 16, v += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(v));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(v + 3));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  return static_cast<uint64_t>(
      _mm256_extract_epi64(a0, 0) + _mm256_extract_epi64(a0, 1) +
      _mm256_extract_epi64(a0, 2) + _mm256_extract_epi64(a0, 3));
}
#endif

uint64_t readAll(const uint64_t *p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2"))
    return sumWordsAvx2(p, n);
#endif
  return sumWords<8>(p, n);
}

void measureBaseline(const Options &o, Report &r) {
  const size_t bytes = o.smoke ? (16u << 20) : (256u << 20);
  std::vector<uint64_t> src(bytes / 8, 1), dst(bytes / 8, 0);
  Effort e = effort(o);
  double t = medianSeconds(e, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    sink(dst[bytes / 16]);
  });
  r.memcpyGbps = static_cast<double>(bytes) / t / 1e9;
  t = medianSeconds(e, [&] { sink(readAll(src.data(), src.size())); });
  r.readGbps = static_cast<double>(bytes) / t / 1e9;
}

//===----------------------------------------------------------------------===//
// Quantize / dequantize
//===----------------------------------------------------------------------===//

kvq::Grid grid(int64_t rows, int64_t cols, int64_t group, kvq_axis axis) {
  kvq::Grid g;
  g.rows = rows;
  g.cols = cols;
  g.group = group;
  g.axis = axis;
  return g;
}

/// KIVI: keys per channel and values per token, groups of 32, fp16 in,
/// packed codes out; GB/s of fp16 K+V input.
void measureKivi(const Options &o, Report &r, const std::vector<uint16_t> &k,
                 const std::vector<uint16_t> &v, int64_t T) {
  const Effort e = effort(o);
  const int64_t n = T * kChannels;
  const double gb = 2.0 * n * 2 / 1e9;
  const kvq::KernelTable &ref = kvq::referenceKernels();
  for (int bits : {2, 3, 4, 8}) {
    std::vector<uint8_t> ck(kvq_packed_size(n, bits)), cv(ck.size());
    std::vector<uint16_t> sk(n / 32), zk(n / 32), sv(n / 32), zv(n / 32);
    auto quant = [&] {
      check(kvq_group_quant(k.data(), KVQ_DTYPE_F16, T, kChannels,
                            KVQ_AXIS_PER_CHANNEL, 32, bits, nullptr,
                            KVQ_CODES_PACKED, ck.data(), sk.data(), zk.data()),
            "group_quant");
      check(kvq_group_quant(v.data(), KVQ_DTYPE_F16, T, kChannels,
                            KVQ_AXIS_PER_TOKEN, 32, bits, nullptr,
                            KVQ_CODES_PACKED, cv.data(), sv.data(), zv.data()),
            "group_quant");
    };
    double t = medianSeconds(e, quant);
    Effort re = e;
    re.reps = 3;
    re.minSeconds = 0;
    double tr = medianSeconds(re, [&] {
      ref.groupQuant(
          k.data(), KVQ_DTYPE_F16, grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL),
          bits, nullptr, KVQ_CODES_PACKED, ck.data(), sk.data(), zk.data());
      ref.groupQuant(v.data(), KVQ_DTYPE_F16,
                     grid(T, kChannels, 32, KVQ_AXIS_PER_TOKEN), bits, nullptr,
                     KVQ_CODES_PACKED, cv.data(), sv.data(), zv.data());
    });
    r.quant.push_back({"kivi", bits, gb / t, gb / tr});
    quant();
    std::vector<uint16_t> out(n);
    t = medianSeconds(e, [&] {
      check(kvq_group_dequant(ck.data(), KVQ_CODES_PACKED, sk.data(), zk.data(),
                              T, kChannels, KVQ_AXIS_PER_CHANNEL, 32, bits,
                              out.data(), KVQ_DTYPE_F16),
            "group_dequant");
      check(kvq_group_dequant(cv.data(), KVQ_CODES_PACKED, sv.data(), zv.data(),
                              T, kChannels, KVQ_AXIS_PER_TOKEN, 32, bits,
                              out.data(), KVQ_DTYPE_F16),
            "group_dequant");
    });
    tr = medianSeconds(re, [&] {
      ref.groupDequant(ck.data(), KVQ_CODES_PACKED, sk.data(), zk.data(),
                       grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL), bits,
                       out.data(), KVQ_DTYPE_F16);
      ref.groupDequant(cv.data(), KVQ_CODES_PACKED, sv.data(), zv.data(),
                       grid(T, kChannels, 32, KVQ_AXIS_PER_TOKEN), bits,
                       out.data(), KVQ_DTYPE_F16);
    });
    r.dequant.push_back({"kivi", bits, gb / t, gb / tr});
  }
}

/// KVQuant's NUQ step: nearest-level codes against levels fitted beforehand
/// (keys per channel over a block of 32 tokens, values per (token, head)),
/// and table-lookup dequantization. The Lloyd fit itself is not timed.
void measureNuq(const Options &o, Report &r, const std::vector<uint16_t> &k,
                const std::vector<uint16_t> &v, int64_t T) {
  const Effort e = effort(o);
  const int64_t n = T * kChannels;
  const double gb = 2.0 * n * 2 / 1e9;
  const kvq::KernelTable &ref = kvq::referenceKernels();
  for (int bits : {2, 3, 4}) {
    const int64_t L = int64_t{1} << bits;
    const int64_t kv = (T / 32) * kChannels, vv = T * kHeads;
    std::vector<uint16_t> lk(kv * L), lv(vv * L);
    std::vector<float> scratch(kDim);
    check(kvq_nuq_fit(k.data(), KVQ_DTYPE_F16, T, kChannels,
                      KVQ_AXIS_PER_CHANNEL, 32, bits, 4, nullptr,
                      scratch.data(), kDim, lk.data()),
          "nuq_fit");
    check(kvq_nuq_fit(v.data(), KVQ_DTYPE_F16, T, kChannels, KVQ_AXIS_PER_TOKEN,
                      kDim, bits, 4, nullptr, scratch.data(), kDim, lv.data()),
          "nuq_fit");
    std::vector<uint8_t> ck(kvq_packed_size(n, bits)), cv(ck.size());
    auto quant = [&] {
      check(kvq_nuq_quant(k.data(), KVQ_DTYPE_F16, T, kChannels,
                          KVQ_AXIS_PER_CHANNEL, 32, bits, lk.data(),
                          KVQ_CODES_PACKED, ck.data()),
            "nuq_quant");
      check(kvq_nuq_quant(v.data(), KVQ_DTYPE_F16, T, kChannels,
                          KVQ_AXIS_PER_TOKEN, kDim, bits, lv.data(),
                          KVQ_CODES_PACKED, cv.data()),
            "nuq_quant");
    };
    double t = medianSeconds(e, quant);
    Effort re = e;
    re.reps = 3;
    re.minSeconds = 0;
    double tr = medianSeconds(re, [&] {
      ref.nuqQuant(k.data(), KVQ_DTYPE_F16,
                   grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL), bits,
                   lk.data(), KVQ_CODES_PACKED, ck.data());
      ref.nuqQuant(v.data(), KVQ_DTYPE_F16,
                   grid(T, kChannels, kDim, KVQ_AXIS_PER_TOKEN), bits,
                   lv.data(), KVQ_CODES_PACKED, cv.data());
    });
    r.quant.push_back({"kvquant", bits, gb / t, gb / tr});
    std::vector<uint16_t> out(n);
    t = medianSeconds(e, [&] {
      check(kvq_nuq_dequant(ck.data(), KVQ_CODES_PACKED, lk.data(), T,
                            kChannels, KVQ_AXIS_PER_CHANNEL, 32, bits,
                            out.data(), KVQ_DTYPE_F16),
            "nuq_dequant");
      check(kvq_nuq_dequant(cv.data(), KVQ_CODES_PACKED, lv.data(), T,
                            kChannels, KVQ_AXIS_PER_TOKEN, kDim, bits,
                            out.data(), KVQ_DTYPE_F16),
            "nuq_dequant");
    });
    tr = medianSeconds(re, [&] {
      ref.nuqDequant(ck.data(), KVQ_CODES_PACKED, lk.data(),
                     grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL), bits,
                     out.data(), KVQ_DTYPE_F16);
      ref.nuqDequant(cv.data(), KVQ_CODES_PACKED, lv.data(),
                     grid(T, kChannels, kDim, KVQ_AXIS_PER_TOKEN), bits,
                     out.data(), KVQ_DTYPE_F16);
    });
    r.dequant.push_back({"kvquant", bits, gb / t, gb / tr});
  }
}

//===----------------------------------------------------------------------===//
// Caches: attention and append
//===----------------------------------------------------------------------===//

struct CacheKind {
  const char *name;
  kvq_method method;
  int bits;
};

kvq_config cacheConfig(const CacheKind &c) {
  kvq_config cfg;
  kvq_config_init(&cfg, c.method);
  cfg.num_kv_heads = kHeads;
  cfg.head_dim = kDim;
  if (c.method != KVQ_METHOD_FP16) {
    cfg.key_bits = c.bits;
    cfg.value_bits = c.bits;
  }
  return cfg;
}

/// Append `tokens` tokens in blocks of at most 4096 from a fixed pool.
void fill(kvq_cache_t *cache, const std::vector<uint16_t> &pool,
          int64_t poolTokens, int64_t tokens) {
  for (int64_t done = 0; done < tokens;) {
    int64_t n =
        std::min<int64_t>(std::min<int64_t>(4096, poolTokens), tokens - done);
    check(kvq_cache_update(cache, 0, pool.data(), pool.data() + n * kChannels,
                           n, KVQ_DTYPE_F16),
          "cache_update");
    done += n;
  }
}

void measureAttention(const Options &o, Report &r,
                      const std::vector<uint16_t> &pool, int64_t poolTokens) {
  std::vector<CacheKind> kinds = {{"fp16", KVQ_METHOD_FP16, 16},
                                  {"kivi2", KVQ_METHOD_KIVI, 2},
                                  {"kivi4", KVQ_METHOD_KIVI, 4},
                                  {"kvquant3", KVQ_METHOD_KVQUANT, 3}};
  std::vector<int64_t> lengths = {1024, 8192, 32768};
  if (o.smoke)
    lengths = {256, 1024};
  const Effort e = effort(o);
  for (const CacheKind &kind : kinds)
    for (int64_t T : lengths) {
      if (!o.times(kind.name))
        continue;
      kvq_config cfg = cacheConfig(kind);
      kvq_cache_t *cache = nullptr;
      check(kvq_cache_create(&cfg, &cache), "cache_create");
      fill(cache, pool, poolTokens, T);
      kvq_stats st;
      check(kvq_cache_stats(cache, 0, &st), "cache_stats");
      for (int qPerKv : {1, 4}) {
        const int32_t qHeads = kHeads * qPerKv;
        std::vector<float> q(static_cast<size_t>(qHeads) * kDim);
        for (size_t i = 0; i < q.size(); ++i)
          q[i] = static_cast<float>((i * 7919) % 17) / 8.0f - 1.0f;
        std::vector<float> out(q.size());
        double t = medianSeconds(e, [&] {
          check(kvq_cache_attend(cache, 0, q.data(), 1, qHeads, out.data()),
                "cache_attend");
        });
        r.attention.push_back({kind.name, T, qPerKv, t * 1e3, st.total_bytes,
                               st.total_bytes / (r.readGbps * 1e9) * 1e3});
      }
      kvq_cache_destroy(cache);
    }
}

/// ns per single-token append into a KIVI-2 cache already holding `held`
/// tokens: fresh cache per repetition, 256 appends timed (eight key groups
/// leave the window in that span, so the flushes are included).
double appendNs(const Options &o, const std::vector<uint16_t> &pool,
                int64_t poolTokens, int64_t held) {
  const CacheKind kind = {"kivi2", KVQ_METHOD_KIVI, 2};
  const int64_t appends = 256;
  std::vector<double> samples;
  const int reps = o.smoke ? 2 : (o.quick ? 3 : 5);
  for (int rep = 0; rep < reps; ++rep) {
    kvq_config cfg = cacheConfig(kind);
    kvq_cache_t *cache = nullptr;
    check(kvq_cache_create(&cfg, &cache), "cache_create");
    fill(cache, pool, poolTokens, held);
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < appends; ++i) {
      const uint16_t *row = pool.data() + (i % poolTokens) * kChannels;
      check(kvq_cache_update(cache, 0, row, row, 1, KVQ_DTYPE_F16),
            "cache_update");
    }
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count() *
        1e9 / appends);
    kvq_cache_destroy(cache);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

//===----------------------------------------------------------------------===//
// Compile
//===----------------------------------------------------------------------===//

std::string selfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

void measureCompile(const Options &o, Report &r) {
  std::string opt = o.kvqOpt.empty() ? selfDir() + "/kvq-opt" : o.kvqOpt;
  struct stat sb;
  if (stat(opt.c_str(), &sb) != 0) {
    r.compileNote = "kvq-opt not found at " + opt +
                    " (runtime-only build?): compile not measured";
    return;
  }
  const char *tmp = std::getenv("TMPDIR");
  double s = timeCompile(opt, decoderGraph(o.layers), tmp ? tmp : "/tmp",
                         o.smoke ? 1 : (o.quick ? 3 : 5));
  if (s < 0) {
    r.compileNote = "kvq-opt --kvq-to-llvm failed on the generated graph";
    return;
  }
  r.compiled = true;
  r.compileSeconds = s;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

void printHuman(FILE *f, const Report &r, const Options &o) {
  std::fprintf(f, "kvq-bench (%s kernels, one thread%s)\n", kvq::kernels().name,
               o.smoke ? ", smoke sizes" : (o.quick ? ", quick" : ""));
  std::fprintf(f, "load average (1 min): %.2f at start, %.2f at end\n",
               r.loadStart, r.loadEnd);
  std::fprintf(f, "baseline: memcpy %.1f GB/s, sequential read %.1f GB/s\n\n",
               r.memcpyGbps, r.readGbps);
  for (int pass = 0; pass < 2; ++pass) {
    const auto &rows = pass ? r.dequant : r.quant;
    std::fprintf(f, "%-10s %-8s %4s %9s %9s %8s %9s\n",
                 pass ? "dequantize" : "quantize", "method", "bits", "GB/s",
                 "vs memcpy", "ref GB/s", "vs ref");
    for (const QuantRow &q : rows)
      std::fprintf(f, "%-10s %-8s %4d %9.2f %9.2f %8.2f %8.1fx\n", "",
                   q.method.c_str(), q.bits, q.gbps, q.gbps / r.memcpyGbps,
                   q.refGbps, q.gbps / q.refGbps);
    std::fprintf(f, "\n");
  }
  std::fprintf(f, "%-9s %7s %4s %9s %11s %9s %8s %8s\n", "attention", "tokens",
               "q/kv", "ms", "bytes read", "bound ms", "vs bound", "vs fp16");
  for (const AttnRow &a : r.attention) {
    double fp16 = 0;
    for (const AttnRow &b : r.attention)
      if (b.cache == "fp16" && b.tokens == a.tokens && b.qPerKv == a.qPerKv)
        fp16 = b.ms;
    std::fprintf(f, "%-9s %7lld %4d %9.3f %11lld %9.3f %7.2fx %7.2fx\n",
                 a.cache.c_str(), static_cast<long long>(a.tokens), a.qPerKv,
                 a.ms, static_cast<long long>(a.bytesRead), a.boundMs,
                 a.ms / a.boundMs, fp16 > 0 ? fp16 / a.ms : 0.0);
  }
  if (r.appendNs1k > 0)
    std::fprintf(f, "\nappend (kivi2): %.0f ns at 1K, %.0f ns at 64K (%.2fx)\n",
                 r.appendNs1k, r.appendNs64k, r.appendNs64k / r.appendNs1k);
  if (r.compiled)
    std::fprintf(f, "compile: kvq-opt --kvq-to-llvm on %d layers: %.3f s\n",
                 o.layers, r.compileSeconds);
  else
    std::fprintf(f, "compile: %s\n", r.compileNote.c_str());
}

/// `s` as a JSON string literal (quotes, backslashes and control bytes
/// escaped by the JSON library).
std::string js(const std::string &s) {
  return nlohmann::json(s).dump(-1, ' ', false,
                                nlohmann::json::error_handler_t::replace);
}

void printJson(FILE *f, const Report &r, const Options &o) {
  std::fprintf(f, "{\n  \"kernels\": %s,\n  \"mode\": %s,\n",
               js(kvq::kernels().name).c_str(),
               js(o.smoke ? "smoke" : (o.quick ? "quick" : "full")).c_str());
  std::fprintf(f, "  \"load_average\": {\"start\": %.2f, \"end\": %.2f},\n",
               r.loadStart, r.loadEnd);
  std::fprintf(
      f, "  \"baseline\": {\"memcpy_gbps\": %.3f, \"read_gbps\": %.3f},\n",
      r.memcpyGbps, r.readGbps);
  for (int pass = 0; pass < 2; ++pass) {
    const auto &rows = pass ? r.dequant : r.quant;
    std::fprintf(f, "  \"%s\": [\n", pass ? "dequantize" : "quantize");
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "    {\"method\": %s, \"bits\": %d, \"gbps\": %.3f, "
                   "\"ref_gbps\": %.3f}%s\n",
                   js(rows[i].method).c_str(), rows[i].bits, rows[i].gbps,
                   rows[i].refGbps, i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "  ],\n");
  }
  std::fprintf(f, "  \"attention\": [\n");
  for (size_t i = 0; i < r.attention.size(); ++i) {
    const AttnRow &a = r.attention[i];
    std::fprintf(f,
                 "    {\"cache\": %s, \"tokens\": %lld, \"q_per_kv\": %d, "
                 "\"ms\": %.4f, \"bytes_read\": %lld, \"bound_ms\": %.4f}%s\n",
                 js(a.cache).c_str(), static_cast<long long>(a.tokens),
                 a.qPerKv, a.ms, static_cast<long long>(a.bytesRead), a.boundMs,
                 i + 1 < r.attention.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n");
  std::fprintf(f, "  \"append\": {\"ns_at_1k\": %.1f, \"ns_at_64k\": %.1f},\n",
               r.appendNs1k, r.appendNs64k);
  if (r.compiled)
    std::fprintf(f, "  \"compile\": {\"layers\": %d, \"seconds\": %.4f}\n",
                 o.layers, r.compileSeconds);
  else
    std::fprintf(f, "  \"compile\": null,\n  \"compile_note\": %s\n",
                 js(r.compileNote).c_str());
  std::fprintf(f, "}\n");
}

void usage() {
  std::fprintf(stderr,
               "usage: kvq-bench [--json] [--quick] [--kvq-opt PATH] "
               "[--layers N]\n"
               "                 [--only LIST] [--caches LIST] [--version]\n"
               "  (every flag also takes --flag=value)\n"
               "  --json         one JSON object on stdout (the table goes "
               "to stderr)\n"
               "  --quick        reduced set, under a minute\n"
               "  --kvq-opt=PATH kvq-opt to time (default: next to "
               "kvq-bench)\n"
               "  --layers=N     layers of the generated graph (default 32)\n"
               "  --smoke        tiny sizes, seconds (for the test suite)\n"
               "  --only=LIST    sections to run, of quantize,attention,append,"
               "compile\n"
               "                 (default all; the baseline always runs)\n"
               "  --caches=LIST  attention caches to time, of fp16,kivi2,"
               "kivi4,kvquant3\n");
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  // The shared rules (tools/common/flags.h): --flag value or --flag=value,
  // range-checked integers, one-line errors with exit status 2.
  kvq::cli::Parser p("kvq-bench", argc, argv);
  while (p.next()) {
    if (p.is("--json"))
      o.json = p.flag();
    else if (p.is("--quick"))
      o.quick = p.flag();
    else if (p.is("--smoke"))
      o.smoke = o.quick = p.flag();
    else if (p.is("--kvq-opt"))
      o.kvqOpt = p.value();
    else if (p.is("--layers"))
      o.layers = static_cast<int>(p.intValue(1, 4096));
    else if (p.is("--only"))
      o.only = p.listValue();
    else if (p.is("--caches"))
      o.caches = p.listValue();
    else if (p.is("--help")) {
      usage();
      return 0;
    } else if (p.is("--version")) {
      std::printf("kvq-bench %s\n", KVQ_VERSION_STRING);
      return 0;
    } else
      p.unknown();
  }
  auto allKnown = [](const std::vector<std::string> &got,
                     std::initializer_list<const char *> known) {
    for (const std::string &g : got)
      if (std::none_of(known.begin(), known.end(),
                       [&](const char *k) { return g == k; })) {
        std::fprintf(stderr, "kvq-bench: unknown name '%s'\n", g.c_str());
        return false;
      }
    return true;
  };
  if (!allKnown(o.only, {"quantize", "attention", "append", "compile"}) ||
      !allKnown(o.caches, {"fp16", "kivi2", "kivi4", "kvquant3"}))
    return 2;
  Report r;
  r.loadStart = loadAverage();
  measureBaseline(o, r);
  const int64_t T = o.smoke ? 256 : (o.quick ? 4096 : 8192);
  const std::vector<uint16_t> k = gaussianHalfs(T * kChannels, 1);
  const std::vector<uint16_t> v = gaussianHalfs(T * kChannels, 2);
  if (o.runs("quantize")) {
    measureKivi(o, r, k, v, T);
    measureNuq(o, r, k, v, T);
  }
  // One pool of K (first half) and V rows feeds every cache.
  const int64_t poolTokens = T / 2;
  if (o.runs("attention"))
    measureAttention(o, r, k, poolTokens);
  const int64_t big = o.smoke ? 4096 : 65536;
  if (o.runs("append")) {
    r.appendNs1k = appendNs(o, k, poolTokens, 1024);
    r.appendNs64k = appendNs(o, k, poolTokens, big);
  }
  if (o.runs("compile"))
    measureCompile(o, r);
  else
    r.compileNote = "not run (--only)";
  r.loadEnd = loadAverage();
  if (o.json) {
    printHuman(stderr, r, o);
    printJson(stdout, r, o);
  } else {
    printHuman(stdout, r, o);
  }
  return 0;
}
