//===- kvq_bench.cpp - Throughput and latency of kvq against this machine ===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One run, one thread: the machine's memcpy bandwidth and the best read
// bandwidth of several tuned loops (the bound), then quantize/dequantize
// throughput per method and width (GB/s of fp16 input), fused decode
// attention per cache type and context length with the bytes it reads and
// the bandwidth bound they imply, the cost of appending one token at 1K and
// 64K cached tokens, and the kvq-opt pipeline time on a generated 32-layer
// graph. Attention and quantize are timed cold (the last-level cache
// evicted before each repetition) as the headline, warm beside it. Every
// cache is also timed as a pre-RoPE key cache (up to 32K tokens),
// with its time over the same method's post-RoPE time. Ratios (vs memcpy,
// vs the bound, vs fp16, pre- vs post-RoPE) are printed next to the absolute
// numbers; --json emits one object with the keys docs/PERFORMANCE.md
// documents.
//
//===----------------------------------------------------------------------===//
#include "flags.h"
#include "json_number.h"
#include "progress.h"
#include "run_info.h"
#include "version.h"
#include "vocabulary.h"
#include "graph.h"
#include "harness.h"
#include "page_buffer.h"
#include "read_loops.h"
#include "thread_pool.h"

#include "fp16.h"
#include "kernels.h"
#include "kvq/runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace kvqbench;

namespace {

struct Options {
  bool json = false, quick = false, smoke = false, quiet = false;
  /// A line on stderr per figure measured (a terminal only, not --quiet).
  kvq::cli::Progress progress;
  std::string kvqOpt; ///< empty: look next to this executable
  int layers = 32;
  /// Sections to run (--only) and attention caches to time (--caches);
  /// empty: all. Skipped sections print as empty lists / null.
  std::vector<std::string> only, caches;
  /// RoPE style of the pre-RoPE attention rows ("none": no such rows).
  std::string rope = "half";
  /// Context lengths of the attention rows (--tokens; empty: the mode's).
  std::vector<int64_t> tokens;
  /// --threads N: also time attention through an N-thread host pool.
  int threads = 1;
  /// --rounds N: attention rows timed in N interleaved rounds (0: the
  /// mode's default, rounds()).
  int roundsFlag = 0;
  int rounds() const {
    return roundsFlag > 0 ? roundsFlag : (quick ? 1 : kFullRunRounds);
  }
  /// A shared VM's memory speed drifts over minutes (fp16 at 32K tokens
  /// timed 10.9 ms in the attention rows of one run and 6.1 ms in its
  /// threads rows), so a full run times every row of a length in three
  /// rounds, each in the opposite order to the one before, and reports
  /// the medians.
  static constexpr int kFullRunRounds = 3;
  bool runs(const char *section) const { return selected(only, section); }
  bool times(const char *cache) const { return selected(caches, cache); }
  static bool selected(const std::vector<std::string> &list, const char *x) {
    return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
  }
};

/// gbps: cold (the headline); warmGbps: the same work with warm caches.
struct QuantRow {
  std::string method;
  int bits;
  double gbps, refGbps, warmGbps;
};

/// ms: cold (the headline); warmMs: the same call with warm caches. rope:
/// "none" (keys stored as given) or the style of a pre-RoPE key cache,
/// whose keys are rotated at their positions when attending.
struct AttnRow {
  std::string cache;
  int64_t tokens;
  int qPerKv;
  double ms;
  int64_t bytesRead;
  double boundMs;
  double warmMs;
  std::string rope = "none";
  std::vector<double> roundMs; ///< cold ms of each round (ms: their median)
};

/// The post-RoPE row of the same cache, length and GQA shape as a (null
/// when there is none).
const AttnRow *postRopeRow(const std::vector<AttnRow> &rows, const AttnRow &a) {
  for (const AttnRow &b : rows)
    if (b.rope == "none" && b.cache == a.cache && b.tokens == a.tokens &&
        b.qPerKv == a.qPerKv)
      return &b;
  return nullptr;
}

struct Report {
  double memcpyGbps = 0, readGbps = 0;
  /// The loop that read fastest (readGbps is its figure), and each loop's:
  /// on 4 KB pages by its name, on 2 MB pages as name + kHugeSuffix.
  std::string readLoop;
  std::vector<std::pair<std::string, double>> readLoops;
  /// The best loop on each page size (0: not measured), and the share of
  /// the 2 MB-page buffer the kernel backed with 2 MB pages.
  double readGbpsSmallPages = 0, readGbpsHugePages = 0, hugePageShare = 0;
  /// The best loop timed again before each attention round (readGbps is
  /// the best of these and of readLoops: the machine's drift cannot
  /// loosen the bound).
  std::vector<double> readRechecks;
  /// The winning loop's function and page size, for the rechecks.
  uint64_t (*readFn)(const uint64_t *, size_t) = nullptr;
  bool readOnHugePages = false;
  int64_t llcBytes = 0, evictBytes = 0;
  std::string cpu, date;
  std::vector<QuantRow> quant, dequant;
  std::vector<AttnRow> attention;
  /// --threads: cold attention on the calling thread (ms1) and through the
  /// pool of `threads` threads (msN), same cache, same run.
  struct ThreadRow {
    std::string cache;
    int64_t tokens;
    int qPerKv;
    double ms1, msN;
  };
  std::vector<ThreadRow> threadRows;
  double appendNs1k = 0, appendNs64k = 0; ///< kivi2
  /// ns per single-token append into each timed cache holding 1K tokens
  /// (the decode path's write: KVQuant fits each value row's levels).
  struct AppendRow {
    std::string cache;
    double ns = 0;
    double maxNs = 0; ///< the slowest append (a KVQuant refit batch)
  };
  std::vector<AppendRow> appendRows;
  /// Append throughput (appendRate): fp16-equivalent GB/s of `dtype` input
  /// in calls of callTokens tokens, cold, and the copy/convert baseline's.
  struct AppendRateRow {
    std::string cache, dtype;
    int64_t callTokens = 0;
    double gbps = 0, baseGbps = 0;
  };
  std::vector<AppendRateRow> appendRates;
  bool compiled = false;
  double compileSeconds = 0;
  std::string compileNote;
  /// Build, machine, date and load average (run_info.h).
  kvq::cli::RunInfo run;
};

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
    // One timed call: smoke figures only show that every row runs, and
    // each cold call evicts twice the last-level cache (the bulk of a
    // smoke run, ten times more under qemu).
    e.warmup = 1;
    e.reps = 1;
    e.minSeconds = 0.0;
  } else if (o.quick) {
    // Five timed calls, however short: a time floor made a short call
    // repeat up to maxReps times, each cold one behind an eviction of
    // twice the last-level cache, which took most of a quick run.
    e.warmup = 1;
    e.reps = 5;
    e.minSeconds = 0.0;
  }
  return e;
}

//===----------------------------------------------------------------------===//
// Baselines
//===----------------------------------------------------------------------===//

/// A read loop's name on the 2 MB-page buffer.
constexpr const char *kHugeSuffix = "@2M";

/// Read bandwidth of one loop over n words at p, in GB/s.
double readGbps(const Effort &e, const ReadLoop &loop, const uint64_t *p,
                size_t n) {
  const double s = medianSeconds(e, [&] { sink(loop.fn(p, n)); });
  return static_cast<double>(n * 8) / s / 1e9;
}

/// Bytes each read loop reads: far larger than any last-level cache, so
/// every loop reads DRAM.
size_t readBytes(const Options &o) {
  return o.smoke ? (16u << 20) : (512u << 20);
}

void measureBaseline(const Options &o, Report &r) {
  const size_t bytes = readBytes(o);
  std::vector<uint64_t> src(bytes / 8, 1), dst(bytes / 8, 0);
  Effort e = effort(o);
  double t = medianSeconds(e, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    sink(dst[bytes / 16]);
  });
  r.memcpyGbps = static_cast<double>(bytes) / t / 1e9;
  dst = {}; // the 2 MB-page buffer takes its place
  const HugePageBuffer huge(bytes);
  r.hugePageShare = huge.hugeShare();
  auto timeLoop = [&](const ReadLoop &loop, const uint64_t *p, size_t n,
                      bool onHuge, double &bestOfPages) {
    const double gbps = readGbps(e, loop, p, n);
    const std::string name =
        std::string(loop.name) + (onHuge ? kHugeSuffix : "");
    r.readLoops.push_back({name, gbps});
    o.progress("read loop %s: %.1f GB/s", name.c_str(), gbps);
    bestOfPages = std::max(bestOfPages, gbps);
    if (gbps > r.readGbps) {
      r.readGbps = gbps;
      r.readLoop = name;
      r.readFn = loop.fn;
      r.readOnHugePages = onHuge;
    }
  };
  for (const ReadLoop &loop : readLoops()) {
    timeLoop(loop, src.data(), src.size(), false, r.readGbpsSmallPages);
    // Without any 2 MB page granted the buffer reads as the first one.
    if (huge.valid() && r.hugePageShare > 0)
      timeLoop(loop, huge.words(), huge.count(), true, r.readGbpsHugePages);
  }
}

/// Times the baseline's best loop again, on the same page size, and raises
/// the bound to it when it reads faster now.
void recheckBound(const Options &o, Report &r) {
  const ReadLoop loop{r.readLoop.c_str(), r.readFn};
  const size_t bytes = readBytes(o);
  double gbps;
  if (r.readOnHugePages) {
    const HugePageBuffer buf(bytes);
    gbps = readGbps(effort(o), loop, buf.words(), buf.count());
  } else {
    const std::vector<uint64_t> buf(bytes / 8, 1);
    gbps = readGbps(effort(o), loop, buf.data(), buf.size());
  }
  r.readRechecks.push_back(gbps);
  r.readGbps = std::max(r.readGbps, gbps);
}

/// The one evictor of the run (its buffer is allocated once).
CacheEvictor &evictor() {
  static CacheEvictor e;
  return e;
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
    double t = medianSecondsAfter(e, evictor(), quant);
    const double tWarm = medianSeconds(e, quant);
    Effort re = e;
    re.reps = 3;
    re.minSeconds = 0;
    double tr = medianSecondsAfter(re, evictor(), [&] {
      kvq::GroupQuantArgs q;
      q.dtype = KVQ_DTYPE_F16;
      q.bits = bits;
      q.layout = KVQ_CODES_PACKED;
      q.x = k.data();
      q.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL);
      q.codes = ck.data();
      q.scale = sk.data();
      q.zero = zk.data();
      ref.groupQuant(q);
      q.x = v.data();
      q.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_TOKEN);
      q.codes = cv.data();
      q.scale = sv.data();
      q.zero = zv.data();
      ref.groupQuant(q);
    });
    r.quant.push_back({"kivi", bits, gb / t, gb / tr, gb / tWarm});
    o.progress("quantize kivi %d-bit: %.2f GB/s", bits, gb / t);
    quant();
    std::vector<uint16_t> out(n);
    auto dequant = [&] {
      check(kvq_group_dequant(ck.data(), KVQ_CODES_PACKED, sk.data(), zk.data(),
                              T, kChannels, KVQ_AXIS_PER_CHANNEL, 32, bits,
                              out.data(), KVQ_DTYPE_F16),
            "group_dequant");
      check(kvq_group_dequant(cv.data(), KVQ_CODES_PACKED, sv.data(), zv.data(),
                              T, kChannels, KVQ_AXIS_PER_TOKEN, 32, bits,
                              out.data(), KVQ_DTYPE_F16),
            "group_dequant");
    };
    t = medianSecondsAfter(e, evictor(), dequant);
    const double tDequantWarm = medianSeconds(e, dequant);
    tr = medianSecondsAfter(re, evictor(), [&] {
      kvq::GroupDequantArgs dq;
      dq.layout = KVQ_CODES_PACKED;
      dq.bits = bits;
      dq.out = out.data();
      dq.dtype = KVQ_DTYPE_F16;
      dq.codes = ck.data();
      dq.scale = sk.data();
      dq.zero = zk.data();
      dq.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL);
      ref.groupDequant(dq);
      dq.codes = cv.data();
      dq.scale = sv.data();
      dq.zero = zv.data();
      dq.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_TOKEN);
      ref.groupDequant(dq);
    });
    r.dequant.push_back({"kivi", bits, gb / t, gb / tr, gb / tDequantWarm});
    o.progress("dequantize kivi %d-bit: %.2f GB/s", bits, gb / t);
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
    const int64_t S = kvq_nuq_fit_scratch_size(kDim, bits);
    std::vector<float> scratch(static_cast<size_t>(S));
    check(kvq_nuq_fit(k.data(), KVQ_DTYPE_F16, T, kChannels,
                      KVQ_AXIS_PER_CHANNEL, 32, bits, 4, nullptr,
                      scratch.data(), S, lk.data()),
          "nuq_fit");
    check(kvq_nuq_fit(v.data(), KVQ_DTYPE_F16, T, kChannels, KVQ_AXIS_PER_TOKEN,
                      kDim, bits, 4, nullptr, scratch.data(), S, lv.data()),
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
    double t = medianSecondsAfter(e, evictor(), quant);
    const double tWarm = medianSeconds(e, quant);
    Effort re = e;
    re.reps = 3;
    re.minSeconds = 0;
    double tr = medianSecondsAfter(re, evictor(), [&] {
      kvq::NuqQuantArgs q;
      q.dtype = KVQ_DTYPE_F16;
      q.bits = bits;
      q.layout = KVQ_CODES_PACKED;
      q.x = k.data();
      q.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL);
      q.levels = lk.data();
      q.codes = ck.data();
      ref.nuqQuant(q);
      q.x = v.data();
      q.grid = grid(T, kChannels, kDim, KVQ_AXIS_PER_TOKEN);
      q.levels = lv.data();
      q.codes = cv.data();
      ref.nuqQuant(q);
    });
    r.quant.push_back({"kvquant", bits, gb / t, gb / tr, gb / tWarm});
    o.progress("quantize kvquant %d-bit: %.2f GB/s", bits, gb / t);
    std::vector<uint16_t> out(n);
    auto dequant = [&] {
      check(kvq_nuq_dequant(ck.data(), KVQ_CODES_PACKED, lk.data(), T,
                            kChannels, KVQ_AXIS_PER_CHANNEL, 32, bits,
                            out.data(), KVQ_DTYPE_F16),
            "nuq_dequant");
      check(kvq_nuq_dequant(cv.data(), KVQ_CODES_PACKED, lv.data(), T,
                            kChannels, KVQ_AXIS_PER_TOKEN, kDim, bits,
                            out.data(), KVQ_DTYPE_F16),
            "nuq_dequant");
    };
    t = medianSecondsAfter(e, evictor(), dequant);
    const double tDequantWarm = medianSeconds(e, dequant);
    tr = medianSecondsAfter(re, evictor(), [&] {
      kvq::NuqDequantArgs dq;
      dq.layout = KVQ_CODES_PACKED;
      dq.bits = bits;
      dq.out = out.data();
      dq.dtype = KVQ_DTYPE_F16;
      dq.codes = ck.data();
      dq.levels = lk.data();
      dq.grid = grid(T, kChannels, 32, KVQ_AXIS_PER_CHANNEL);
      ref.nuqDequant(dq);
      dq.codes = cv.data();
      dq.levels = lv.data();
      dq.grid = grid(T, kChannels, kDim, KVQ_AXIS_PER_TOKEN);
      ref.nuqDequant(dq);
    });
    r.dequant.push_back({"kvquant", bits, gb / t, gb / tr, gb / tDequantWarm});
    o.progress("dequantize kvquant %d-bit: %.2f GB/s", bits, gb / t);
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

/// Every method and width the runtime supports (kivi_sink at the seed's 2
/// bits); --caches picks among these names.
const std::vector<CacheKind> &cacheKinds() {
  static const std::vector<CacheKind> kinds = {
      {"fp16", KVQ_METHOD_FP16, 16},
      {"kivi2", KVQ_METHOD_KIVI, 2},
      {"kivi3", KVQ_METHOD_KIVI, 3},
      {"kivi4", KVQ_METHOD_KIVI, 4},
      {"kivi_sink2", KVQ_METHOD_KIVI_SINK, 2},
      {"kvquant2", KVQ_METHOD_KVQUANT, 2},
      {"kvquant3", KVQ_METHOD_KVQUANT, 3},
      {"kvquant4", KVQ_METHOD_KVQUANT, 4}};
  return kinds;
}

/// RoPE styles by name (kvq-bench --rope).
int32_t ropeStyle(const std::string &name) {
  if (name == "half")
    return KVQ_ROPE_HALF;
  if (name == "interleaved")
    return KVQ_ROPE_INTERLEAVED;
  return KVQ_ROPE_NONE;
}

/// Pre-RoPE rows up to this length: 128K would double the slowest fills.
constexpr int64_t kMaxRopeTokens = 32768;

kvq_config cacheConfig(const CacheKind &c, int32_t rope = KVQ_ROPE_NONE) {
  kvq_config cfg;
  kvq_config_init(&cfg, c.method);
  cfg.num_kv_heads = kHeads;
  cfg.head_dim = kDim;
  if (c.method != KVQ_METHOD_FP16) {
    cfg.key_bits = c.bits;
    cfg.value_bits = c.bits;
  }
  cfg.rope_style = rope; // rope_theta: the default (10000)
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

/// One decode step of attention on layer 0 with a fixed query (the same
/// in every row), qPerKv query heads per KV head.
class OneStep {
public:
  OneStep(const kvq_cache_t *cache, int qPerKv)
      : cache_(cache), qHeads_(kHeads * qPerKv),
        q_(static_cast<size_t>(qHeads_) * kDim), out_(q_.size()) {
    for (size_t i = 0; i < q_.size(); ++i)
      q_[i] = static_cast<float>((i * 7919) % 17) / 8.0f - 1.0f;
  }
  void operator()() const {
    check(kvq_cache_attend(cache_, 0, q_.data(), 1, qHeads_, out_.data()),
          "cache_attend");
  }

private:
  const kvq_cache_t *cache_;
  int32_t qHeads_;
  std::vector<float> q_;
  mutable std::vector<float> out_;
};

void measureAttention(const Options &o, Report &r,
                      const std::vector<uint16_t> &pool, int64_t poolTokens) {
  // 128K only in a full run: filling its caches takes minutes; 32K not in
  // a quick one: filling its sixteen caches took most of a minute.
  std::vector<int64_t> lengths = {1024, 8192, 32768, 131072};
  if (o.quick)
    lengths = {1024, 8192};
  if (o.smoke)
    lengths = {256, 1024};
  if (!o.tokens.empty())
    lengths = o.tokens;
  const Effort e = effort(o);
  // The same keys stored as given, then (up to kMaxRopeTokens) as the
  // pre-RoPE keys of a cache that rotates them when attending.
  std::vector<std::string> ropes = {"none"};
  if (o.rope != "none")
    ropes.push_back(o.rope);
  // A smoke run has its pre-RoPE rows at the shortest length only.
  const int64_t maxRopeTokens =
      o.smoke ? *std::min_element(lengths.begin(), lengths.end())
              : kMaxRopeTokens;
  static constexpr int kQPerKv[] = {1, 4};
  struct Timed {
    const CacheKind *kind;
    std::string rope;
    kvq_cache_t *cache;
    int64_t bytes;
    std::vector<double> cold[2], warm[2]; ///< per round, by kQPerKv
  };
  for (int64_t T : lengths) {
    // Every cache of this length lives through all rounds, so each round
    // times every row within a few seconds of the others.
    std::vector<Timed> timed;
    for (const CacheKind &kind : cacheKinds())
      for (const std::string &rope : ropes) {
        if (!o.times(kind.name) || (rope != "none" && T > maxRopeTokens))
          continue;
        kvq_config cfg = cacheConfig(kind, ropeStyle(rope));
        Timed t{&kind, rope, nullptr, 0, {}, {}};
        check(kvq_cache_create(&cfg, &t.cache), "cache_create");
        fill(t.cache, pool, poolTokens, T);
        kvq_stats st;
        check(kvq_cache_stats(t.cache, 0, &st), "cache_stats");
        t.bytes = st.total_bytes;
        timed.push_back(std::move(t));
      }
    for (int round = 0; round < o.rounds(); ++round) {
      if (o.rounds() > 1)
        recheckBound(o, r);
      for (size_t i = 0; i < timed.size(); ++i) {
        Timed &t = timed[round % 2 ? timed.size() - 1 - i : i];
        for (int q = 0; q < 2; ++q) {
          const OneStep attend(t.cache, kQPerKv[q]);
          t.cold[q].push_back(medianSecondsAfter(e, evictor(), attend) * 1e3);
          t.warm[q].push_back(medianSeconds(e, attend) * 1e3);
          o.progress("attention %s%s %lld tokens, %d q/kv, round %d/%d: "
                     "%.3f ms",
                     t.kind->name, t.rope == "none" ? "" : " pre-RoPE",
                     static_cast<long long>(T), kQPerKv[q], round + 1,
                     o.rounds(), t.cold[q].back());
        }
      }
    }
    for (Timed &t : timed) {
      for (int q = 0; q < 2; ++q) {
        AttnRow row{t.kind->name,      T,       kQPerKv[q],
                    median(t.cold[q]), t.bytes, 0,
                    median(t.warm[q]), t.rope,  t.cold[q]};
        r.attention.push_back(row);
      }
      kvq_cache_destroy(t.cache);
    }
  }
  // Bounds from the run's best read (a recheck may have raised it), rows in
  // the order of cacheKinds(), then length, then RoPE.
  for (AttnRow &a : r.attention)
    a.boundMs = a.bytesRead / (r.readGbps * 1e9) * 1e3;
  std::vector<AttnRow> byLength;
  byLength.swap(r.attention);
  for (const CacheKind &kind : cacheKinds())
    for (const AttnRow &a : byLength)
      if (a.cache == kind.name)
        r.attention.push_back(a);
}

/// kvq-bench --threads N: attention with the runtime's work split through
/// a host pool of N threads (kvq_cache_set_parallel) against the same cache
/// on one thread, cold; post-RoPE caches, 32K tokens unless --tokens.
void measureThreads(const Options &o, Report &r,
                    const std::vector<uint16_t> &pool, int64_t poolTokens) {
  std::vector<int64_t> lengths = {32768};
  if (o.smoke)
    lengths = {1280}; // two ranges of the split (kvq_cache_set_parallel)
  if (!o.tokens.empty())
    lengths = o.tokens;
  const Effort e = effort(o);
  kvqbench::ThreadPool threads(o.threads);
  const kvq_parallel host = threads.handle();
  for (const CacheKind &kind : cacheKinds())
    for (int64_t T : lengths) {
      if (!o.times(kind.name))
        continue;
      kvq_config cfg = cacheConfig(kind);
      kvq_cache_t *cache = nullptr;
      check(kvq_cache_create(&cfg, &cache), "cache_create");
      fill(cache, pool, poolTokens, T);
      for (int qPerKv : {1, 4}) {
        const OneStep attend(cache, qPerKv);
        check(kvq_cache_set_parallel(cache, nullptr), "cache_set_parallel");
        const double one = medianSecondsAfter(e, evictor(), attend);
        check(kvq_cache_set_parallel(cache, &host), "cache_set_parallel");
        const double many = medianSecondsAfter(e, evictor(), attend);
        r.threadRows.push_back({kind.name, T, qPerKv, one * 1e3, many * 1e3});
        o.progress("threads %s %lld tokens, %d q/kv: %.2fx", kind.name,
                   static_cast<long long>(T), qPerKv, one / many);
      }
      kvq_cache_destroy(cache);
    }
}

/// ns per single-token append into a cache already holding `held` tokens:
/// fresh cache per repetition, 256 appends timed (eight KIVI key groups
/// leave the window and two KVQuant key refits run in that span, so the
/// flushes and refits are included). Medians over the repetitions of the
/// mean and of the slowest append.
struct AppendTimes {
  double ns, maxNs;
};
AppendTimes appendNs(const Options &o, const CacheKind &kind,
                     const std::vector<uint16_t> &pool, int64_t poolTokens,
                     int64_t held) {
  const int64_t appends = 256;
  std::vector<double> samples, slowest;
  const int reps = o.smoke ? 2 : (o.quick ? 3 : 5);
  for (int rep = 0; rep < reps; ++rep) {
    kvq_config cfg = cacheConfig(kind);
    kvq_cache_t *cache = nullptr;
    check(kvq_cache_create(&cfg, &cache), "cache_create");
    fill(cache, pool, poolTokens, held);
    double total = 0, worst = 0;
    for (int64_t i = 0; i < appends; ++i) {
      const uint16_t *row = pool.data() + (i % poolTokens) * kChannels;
      const auto t0 = std::chrono::steady_clock::now();
      check(kvq_cache_update(cache, 0, row, row, 1, KVQ_DTYPE_F16),
            "cache_update");
      const double ns =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count() *
          1e9;
      total += ns;
      worst = std::max(worst, ns);
    }
    samples.push_back(total / appends);
    slowest.push_back(worst);
    kvq_cache_destroy(cache);
  }
  std::sort(samples.begin(), samples.end());
  std::sort(slowest.begin(), slowest.end());
  return {samples[samples.size() / 2], slowest[slowest.size() / 2]};
}


/// Tokens timed per append-throughput repetition, after a 1K prefill:
/// sixteen KVQuant refit batches and 64 KIVI key groups, so the refits and
/// flushes are amortised as they are in a long prefill.
constexpr int64_t kRateTokens = 2048;

/// What the baseline of an append does per element: f16 input is copied,
/// f32 input converted to fp16 (F16C where the CPU has it).
#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void convertF16C(const float *src,
                                                      int64_t n,
                                                      uint16_t *dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i + 8), b);
  }
  for (; i < n; ++i)
    dst[i] = kvq::floatToHalf(src[i]);
}
#endif
void convertBaseline(const float *src, int64_t n, uint16_t *dst) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"))
    return convertF16C(src, n, dst);
#endif
  for (int64_t i = 0; i < n; ++i)
    dst[i] = kvq::floatToHalf(src[i]);
}

/// Append throughput through kvq_cache_update: a fresh cache holding 1K
/// tokens (untimed), the LLC evicted, then kRateTokens tokens appended in
/// calls of callTokens from a pool of `dtype` rows. GB/s counts the K and V
/// input as fp16 (2 bytes per element, whatever the dtype). The baseline,
/// timed the same way on the same input: the rows copied (f16) or
/// converted (f32) into a buffer of the same size, call by call.
Report::AppendRateRow appendRate(const Options &o, const CacheKind &kind,
                                 const std::vector<uint16_t> &pool,
                                 int64_t poolTokens, int64_t callTokens,
                                 kvq_dtype dtype) {
  const int64_t C = kChannels, tokens = kRateTokens;
  const size_t elemBytes = dtype == KVQ_DTYPE_F16 ? 2 : 4;
  // Keys from the pool's first half, values from its second; f32 input is
  // the same fp16 values widened.
  const int64_t rows = std::min(poolTokens, tokens);
  std::vector<uint8_t> keys(static_cast<size_t>(rows * C) * elemBytes),
      values(keys.size());
  for (int64_t i = 0; i < rows * C; ++i) {
    const uint16_t hk = pool[static_cast<size_t>(i)];
    const uint16_t hv = pool[static_cast<size_t>(poolTokens * C + i)];
    if (dtype == KVQ_DTYPE_F16) {
      std::memcpy(&keys[static_cast<size_t>(i) * 2], &hk, 2);
      std::memcpy(&values[static_cast<size_t>(i) * 2], &hv, 2);
    } else {
      const float fk = kvq::halfToFloat(hk), fv = kvq::halfToFloat(hv);
      std::memcpy(&keys[static_cast<size_t>(i) * 4], &fk, 4);
      std::memcpy(&values[static_cast<size_t>(i) * 4], &fv, 4);
    }
  }
  auto at = [&](const std::vector<uint8_t> &b, int64_t t) {
    return b.data() + static_cast<size_t>((t % rows) * C) * elemBytes;
  };
  // Calls never wrap around the pool: rows is a multiple of callTokens
  // (both powers of two, callTokens <= 128 <= rows in every mode).
  const int reps = o.smoke ? 1 : (o.quick ? 3 : 5);
  std::vector<double> times, baseTimes;
  std::vector<uint16_t> dstK(static_cast<size_t>(tokens * C)),
      dstV(dstK.size());
  for (int rep = 0; rep < reps; ++rep) {
    kvq_config cfg = cacheConfig(kind);
    kvq_cache_t *cache = nullptr;
    check(kvq_cache_create(&cfg, &cache), "cache_create");
    fill(cache, pool, poolTokens, 1024);
    evictor()();
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t t = 0; t < tokens; t += callTokens)
      check(kvq_cache_update(cache, 0, at(keys, t), at(values, t), callTokens,
                             dtype),
            "cache_update");
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
    kvq_cache_destroy(cache);
    evictor()();
    t0 = std::chrono::steady_clock::now();
    for (int64_t t = 0; t < tokens; t += callTokens) {
      const size_t n = static_cast<size_t>(callTokens * C);
      uint16_t *dk = dstK.data() + t * C, *dv = dstV.data() + t * C;
      if (dtype == KVQ_DTYPE_F16) {
        std::memcpy(dk, at(keys, t), n * 2);
        std::memcpy(dv, at(values, t), n * 2);
      } else {
        convertBaseline(reinterpret_cast<const float *>(at(keys, t)),
                        static_cast<int64_t>(n), dk);
        convertBaseline(reinterpret_cast<const float *>(at(values, t)),
                        static_cast<int64_t>(n), dv);
      }
    }
    baseTimes.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count());
    sink(dstK[static_cast<size_t>(rep)] + dstV[static_cast<size_t>(rep)]);
  }
  const double bytes = static_cast<double>(tokens * C * 2 * 2);
  return {kind.name, dtype == KVQ_DTYPE_F16 ? "f16" : "f32", callTokens,
          bytes / median(times) / 1e9, bytes / median(baseTimes) / 1e9};
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
    r.compileNote =
        "kvq-opt at " + opt + ": --kvq-to-llvm failed on the generated graph";
    return;
  }
  r.compiled = true;
  r.compileSeconds = s;
  o.progress("compile %d layers: %.3f s", o.layers, s);
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

void printHuman(FILE *f, const Report &r, const Options &o) {
  std::fprintf(f, "kvq-bench (%s kernels, one thread%s)\n", kvq::kernels().name,
               o.smoke ? ", smoke sizes" : (o.quick ? ", quick" : ""));
  std::fprintf(f, "load average (1 min): %.2f at start, %.2f at end\n",
               r.run.loadStart, r.run.loadEnd);
  std::fprintf(f, "machine: %s, %ld CPUs, %s; kvq %s\n", r.run.cpu.c_str(),
               r.run.cores, r.run.date.c_str(), r.run.version.c_str());
  std::fprintf(f, "baseline: memcpy %.1f GB/s, read %.1f GB/s (best loop: %s;",
               r.memcpyGbps, r.readGbps, r.readLoop.c_str());
  for (const auto &[name, gbps] : r.readLoops)
    std::fprintf(f, " %s %.1f", name.c_str(), gbps);
  std::fprintf(f, ")\n");
  if (r.readGbpsHugePages > 0)
    std::fprintf(f,
                 "pages: best read %.1f GB/s on 4 KB pages, %.1f GB/s on 2 MB "
                 "pages (%.0f %% of that buffer granted); the bound is the "
                 "better\n",
                 r.readGbpsSmallPages, r.readGbpsHugePages,
                 100 * r.hugePageShare);
  else
    std::fprintf(f,
                 "pages: no 2 MB pages granted; every loop read 4 KB pages\n");
  if (r.llcBytes > 0)
    std::fprintf(f,
                 "cold timings: last-level cache %lld KiB evicted before each "
                 "repetition (%lld KiB written and read)\n\n",
                 static_cast<long long>(r.llcBytes >> 10),
                 static_cast<long long>(r.evictBytes >> 10));
  else
    std::fprintf(f,
                 "cold timings: the system does not report its last-level "
                 "cache (no sysfs cache entries); %lld KiB written and read "
                 "before each repetition\n\n",
                 static_cast<long long>(r.evictBytes >> 10));
  if (!r.readRechecks.empty()) {
    std::fprintf(f,
                 "attention: each row the median of %d rounds (in alternating "
                 "order); the best read loop again before each round:",
                 o.rounds());
    for (double g : r.readRechecks)
      std::fprintf(f, " %.1f", g);
    std::fprintf(f, " GB/s (bound: %.1f GB/s)\n\n", r.readGbps);
  }
  for (int pass = 0; pass < 2; ++pass) {
    const auto &rows = pass ? r.dequant : r.quant;
    std::fprintf(f, "%-10s %-8s %4s %9s %9s %8s %9s %9s\n",
                 pass ? "dequantize" : "quantize", "method", "bits", "GB/s",
                 "vs memcpy", "ref GB/s", "vs ref", "warm GB/s");
    for (const QuantRow &q : rows)
      std::fprintf(f, "%-10s %-8s %4d %9.2f %9.2f %8.2f %8.1fx %9.2f\n", "",
                   q.method.c_str(), q.bits, q.gbps, q.gbps / r.memcpyGbps,
                   q.refGbps, q.gbps / q.refGbps, q.warmGbps);
    std::fprintf(f, "\n");
  }
  std::fprintf(f, "%-15s %7s %4s %9s %11s %9s %8s %8s %9s\n", "attention",
               "tokens", "q/kv", "cold ms", "bytes read", "bound ms",
               "vs bound", "vs fp16", "warm ms");
  // Pre-RoPE rows are labelled cache+rope and compared with the pre-RoPE
  // fp16 cache.
  for (const AttnRow &a : r.attention) {
    double fp16 = 0;
    for (const AttnRow &b : r.attention)
      if (b.cache == "fp16" && b.rope == a.rope && b.tokens == a.tokens &&
          b.qPerKv == a.qPerKv)
        fp16 = b.ms;
    const std::string label = a.rope == "none" ? a.cache : a.cache + "+rope";
    std::fprintf(f, "%-15s %7lld %4d %9.3f %11lld %9.3f %7.2fx %7.2fx %9.3f\n",
                 label.c_str(), static_cast<long long>(a.tokens), a.qPerKv,
                 a.ms, static_cast<long long>(a.bytesRead), a.boundMs,
                 a.ms / a.boundMs, fp16 > 0 ? fp16 / a.ms : 0.0, a.warmMs);
  }
  bool ropeHeader = false;
  for (const AttnRow &a : r.attention) {
    const AttnRow *post =
        a.rope == "none" ? nullptr : postRopeRow(r.attention, a);
    if (!post)
      continue;
    if (!ropeHeader)
      std::fprintf(f,
                   "\npre-RoPE keys (%s) / post-RoPE, same method:\n"
                   "%-15s %7s %4s %9s %9s\n",
                   a.rope.c_str(), "cache", "tokens", "q/kv", "cold", "warm");
    ropeHeader = true;
    std::fprintf(f, "%-15s %7lld %4d %8.2fx %8.2fx\n", a.cache.c_str(),
                 static_cast<long long>(a.tokens), a.qPerKv, a.ms / post->ms,
                 a.warmMs / post->warmMs);
  }
  if (!r.threadRows.empty())
    std::fprintf(f,
                 "\nthreads: attention through a host pool of %d threads, "
                 "cold:\n%-15s %7s %4s %9s %9s %8s\n",
                 o.threads, "cache", "tokens", "q/kv", "1 thread", "N",
                 "speedup");
  for (const Report::ThreadRow &t : r.threadRows)
    std::fprintf(f, "%-15s %7lld %4d %7.3fms %7.3fms %7.2fx\n", t.cache.c_str(),
                 static_cast<long long>(t.tokens), t.qPerKv, t.ms1, t.msN,
                 t.ms1 / t.msN);
  if (r.appendNs1k > 0)
    std::fprintf(f, "\nappend (kivi2): %.0f ns at 1K, %.0f ns at 64K (%.2fx)\n",
                 r.appendNs1k, r.appendNs64k, r.appendNs64k / r.appendNs1k);
  if (!r.appendRows.empty()) {
    std::fprintf(f, "append at 1K, ns per token:");
    for (const Report::AppendRow &a : r.appendRows)
      std::fprintf(f, " %s %.0f", a.cache.c_str(), a.ns);
    std::fprintf(f, "\nslowest single append at 1K, ns:");
    for (const Report::AppendRow &a : r.appendRows)
      std::fprintf(f, " %s %.0f", a.cache.c_str(), a.maxNs);
    std::fprintf(f, "\n");
  }
  if (!r.appendRates.empty())
    std::fprintf(f,
                 "append throughput: %lld tokens after a 1K prefill, cold, "
                 "fp16-equivalent GB/s of K+V input; base = the same rows "
                 "copied (f16) or converted (f32):\n%-12s %5s %6s %8s %8s "
                 "%8s\n",
                 static_cast<long long>(kRateTokens), "cache", "input",
                 "tokens", "GB/s", "base", "vs base");
  for (const Report::AppendRateRow &a : r.appendRates)
    std::fprintf(f, "%-12s %5s %6lld %8.3f %8.3f %8.3f\n", a.cache.c_str(),
                 a.dtype.c_str(), static_cast<long long>(a.callTokens), a.gbps,
                 a.baseGbps, a.gbps / a.baseGbps);
  if (r.compiled)
    std::fprintf(f, "compile: kvq-opt --kvq-to-llvm on %d layers: %.3f s\n",
                 o.layers, r.compileSeconds);
  else
    std::fprintf(f, "compile: %s\n", r.compileNote.c_str());
}

/// The report as one JSON object (keys and their order: docs/PERFORMANCE.md).
/// Each figure keeps the decimals it has always had (json_number.h);
/// strings are escaped by the JSON library, bytes that are not UTF-8
/// replaced.
void printJson(FILE *f, const Report &r, const Options &o) {
  using kvq::cli::fixed;
  using json = nlohmann::ordered_json;
  json doc;
  doc["kernels"] = kvq::kernels().name;
  doc["mode"] = o.smoke ? "smoke" : (o.quick ? "quick" : "full");
  r.run.addTo(doc);
  json loops = json::object();
  for (const auto &[name, gbps] : r.readLoops)
    loops[name] = fixed(gbps, 3);
  json rechecks = json::array();
  for (double g : r.readRechecks)
    rechecks.push_back(fixed(g, 3));
  doc["baseline"] = {{"memcpy_gbps", fixed(r.memcpyGbps, 3)},
                     {"read_gbps", fixed(r.readGbps, 3)},
                     {"read_loop", r.readLoop},
                     {"read_loops", loops},
                     {"read_gbps_small_pages", fixed(r.readGbpsSmallPages, 3)},
                     {"read_gbps_huge_pages", fixed(r.readGbpsHugePages, 3)},
                     {"huge_page_share", fixed(r.hugePageShare, 3)},
                     {"timing", "cold"},
                     {"llc_bytes", r.llcBytes},
                     {"evict_bytes", r.evictBytes},
                     {"read_rechecks", rechecks}};
  doc["rounds"] = o.rounds();
  for (int pass = 0; pass < 2; ++pass) {
    json rows = json::array();
    for (const QuantRow &q : pass ? r.dequant : r.quant)
      rows.push_back({{"method", q.method},
                      {"bits", q.bits},
                      {"gbps", fixed(q.gbps, 3)},
                      {"ref_gbps", fixed(q.refGbps, 3)},
                      {"warm_gbps", fixed(q.warmGbps, 3)}});
    doc[pass ? "dequantize" : "quantize"] = rows;
  }
  json attention = json::array();
  for (const AttnRow &a : r.attention) {
    json row = {{"cache", a.cache},          {"tokens", a.tokens},
                {"q_per_kv", a.qPerKv},      {"ms", fixed(a.ms, 4)},
                {"bytes_read", a.bytesRead}, {"bound_ms", fixed(a.boundMs, 4)},
                {"warm_ms", fixed(a.warmMs, 4)}, {"rope", a.rope}};
    // A pre-RoPE row also carries its time over the post-RoPE row's.
    if (const AttnRow *post =
            a.rope == "none" ? nullptr : postRopeRow(r.attention, a)) {
      row["vs_post_rope"] = fixed(a.ms / post->ms, 4);
      row["warm_vs_post_rope"] = fixed(a.warmMs / post->warmMs, 4);
    }
    json rounds = json::array();
    for (double ms : a.roundMs)
      rounds.push_back(fixed(ms, 4));
    row["round_ms"] = rounds;
    attention.push_back(row);
  }
  doc["attention"] = attention;
  if (r.threadRows.empty()) {
    doc["threads"] = nullptr;
  } else {
    json rows = json::array();
    for (const Report::ThreadRow &t : r.threadRows)
      rows.push_back({{"cache", t.cache},
                      {"tokens", t.tokens},
                      {"q_per_kv", t.qPerKv},
                      {"ms_1", fixed(t.ms1, 4)},
                      {"ms_n", fixed(t.msN, 4)},
                      {"speedup", fixed(t.ms1 / t.msN, 4)}});
    doc["threads"] = {{"workers", o.threads}, {"rows", rows}};
  }
  json caches = json::array(), rates = json::array();
  for (const Report::AppendRow &a : r.appendRows)
    caches.push_back({{"cache", a.cache},
                      {"tokens", 1024},
                      {"ns", fixed(a.ns, 1)},
                      {"max_ns", fixed(a.maxNs, 1)}});
  for (const Report::AppendRateRow &a : r.appendRates)
    rates.push_back({{"cache", a.cache},
                     {"dtype", a.dtype},
                     {"call_tokens", a.callTokens},
                     {"tokens", kRateTokens},
                     {"gbps", fixed(a.gbps, 4)},
                     {"base_gbps", fixed(a.baseGbps, 4)},
                     {"vs_base", fixed(a.gbps / a.baseGbps, 4)}});
  doc["append"] = {{"ns_at_1k", fixed(r.appendNs1k, 1)},
                   {"ns_at_64k", fixed(r.appendNs64k, 1)},
                   {"caches", caches},
                   {"rates", rates}};
  if (r.compiled) {
    doc["compile"] = {{"layers", o.layers},
                      {"seconds", fixed(r.compileSeconds, 4)}};
  } else {
    doc["compile"] = nullptr;
    doc["compile_note"] = r.compileNote;
  }
  std::fprintf(f, "%s\n",
               doc.dump(2, ' ', false, json::error_handler_t::replace).c_str());
}

void usage() {
  std::fprintf(
      stderr, "usage: kvq-bench [--json] [--quick] [--quiet] [--kvq-opt PATH] "
              "[--layers N]\n"
              "                 [--only LIST] [--caches LIST] [--rope STYLE]\n"
              "                 [--contexts LIST] [--threads N] [--rounds N] "
              "[--version]\n"
              "  (every flag also takes --flag=value)\n"
              "  --json         one JSON object on stdout (the table goes "
              "to stderr)\n"
              "  --quick        under a minute: every section, attention at "
              "1K and 8K\n"
              "                 tokens, one round, 5 timed calls per "
              "figure\n"
              "  --kvq-opt=PATH kvq-opt to time (default: next to "
              "kvq-bench, skipped\n"
              "                 if absent; a PATH given must exist)\n"
              "  --layers=N     layers of the generated graph (default 32)\n"
              "  --smoke        tiny sizes, seconds (for the test suite)\n"
              "  --quiet        no progress lines (printed on stderr only "
              "when it is a\n"
              "                 terminal)\n"
              "  --only=LIST    sections to run, of quantize,attention,threads,"
              "append,compile\n"
              "                 (default all; the baseline always runs)\n"
              "  --caches=LIST  attention caches to time, of fp16,kivi2,kivi3,"
              "kivi4,\n"
              "                 kivi_sink2,kvquant2,kvquant3,kvquant4\n"
              "  --rope=STYLE   RoPE of the pre-RoPE key cache rows (up to "
              "32K tokens):\n"
              "                 half (default), interleaved, or none (no "
              "such rows)\n"
              "  --contexts=LIST context lengths of the attention rows "
              "(default:\n"
              "                 1024,8192,32768,131072; --quick 1024,8192)\n"
              "  --threads=N    also time attention through a host pool of N "
              "threads\n"
              "                 (kvq_cache_set_parallel) against one thread, "
              "32K tokens\n"
              "                 unless --contexts (section 'threads')\n"
              "  --rounds=N     time the attention rows of each length in N "
              "rounds,\n"
              "                 alternating their order, and report medians "
              "(default:\n"
              "                 3, --quick and --smoke 1); before each round "
              "of several\n"
              "                 the best read loop is timed again\n");
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  // The shared rules (tools/common/flags.h): --flag value or --flag=value,
  // range-checked integers, one-line errors with exit status 2.
  std::vector<std::string> renamed;
  kvq::cli::renameDeprecatedFlags("kvq-bench", argc, argv, {"--tokens"},
                                  renamed);
  kvq::cli::Parser p("kvq-bench", argc, argv);
  while (p.next()) {
    if (p.is("--json"))
      o.json = p.flag();
    else if (p.is("--quick"))
      o.quick = p.flag();
    else if (p.is("--quiet"))
      o.quiet = p.flag();
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
    else if (p.is("--rope"))
      o.rope = p.value();
    else if (p.is("--threads"))
      o.threads = static_cast<int>(p.intValue(1, KVQ_MAX_WORKERS));
    else if (p.is("--rounds"))
      o.roundsFlag = static_cast<int>(p.intValue(1, 100));
    else if (p.is("--contexts")) {
      for (const std::string &t : p.listValue()) {
        char *end = nullptr;
        const long long n = std::strtoll(t.c_str(), &end, 10);
        if (t.empty() || *end || n < 1 || n > (1 << 20)) {
          std::fprintf(
              stderr, "kvq-bench: --contexts expects integers in [1, 1048576]\n");
          return 2;
        }
        o.tokens.push_back(n);
      }
    } else if (p.is("--help")) {
      usage();
      return 0;
    } else if (p.is("--version")) {
      std::printf("kvq-bench %s\n", kvq::cli::versionString());
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
  auto allCaches = [&] {
    for (const std::string &c : o.caches)
      if (std::none_of(cacheKinds().begin(), cacheKinds().end(),
                       [&](const CacheKind &k) { return c == k.name; })) {
        std::fprintf(stderr, "kvq-bench: unknown cache '%s'\n", c.c_str());
        return false;
      }
    return true;
  };
  if (!allKnown(o.only,
                {"quantize", "attention", "threads", "append", "compile"}) ||
      !allKnown({o.rope}, {"none", "half", "interleaved"}) || !allCaches())
    return 2;
  // A kvq-opt asked for by name must exist: only the default one (next to
  // this executable) may be missing, in a runtime-only build.
  if (!o.kvqOpt.empty() && o.runs("compile") &&
      access(o.kvqOpt.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "kvq-bench: --kvq-opt: no executable at '%s'\n",
                 o.kvqOpt.c_str());
    return 2;
  }
  o.progress = kvq::cli::Progress("kvq-bench", o.quiet);
  Report r;
  r.run = kvq::cli::RunInfo::start();
  r.llcBytes = evictor().llcBytes();
  r.evictBytes = evictor().bufferBytes();
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
  if (o.threads > 1 && o.runs("threads"))
    measureThreads(o, r, k, poolTokens);
  const int64_t big = o.smoke ? 4096 : 65536;
  if (o.runs("append")) {
    const CacheKind kivi2 = {"kivi2", KVQ_METHOD_KIVI, 2};
    for (const CacheKind &kind : cacheKinds())
      if (o.times(kind.name)) {
        const AppendTimes t = appendNs(o, kind, k, poolTokens, 1024);
        r.appendRows.push_back({kind.name, t.ns, t.maxNs});
        o.progress("append %s at 1K: %.0f ns", kind.name, t.ns);
      }
    // kivi2 at 1K is one of the rows unless --caches leaves it out.
    r.appendNs1k = -1;
    for (const Report::AppendRow &a : r.appendRows)
      if (a.cache == kivi2.name)
        r.appendNs1k = a.ns;
    if (r.appendNs1k < 0)
      r.appendNs1k = appendNs(o, kivi2, k, poolTokens, 1024).ns;
    r.appendNs64k = appendNs(o, kivi2, k, poolTokens, big).ns;
    for (const CacheKind &kind : cacheKinds())
      if (o.times(kind.name))
        for (kvq_dtype dtype : {KVQ_DTYPE_F16, KVQ_DTYPE_F32})
          for (int64_t call : {int64_t{1}, int64_t{128}})
          {
            r.appendRates.push_back(
                appendRate(o, kind, k, poolTokens, call, dtype));
            const Report::AppendRateRow &a = r.appendRates.back();
            o.progress("append rate %s %s, %lld per call: %.3f GB/s",
                       a.cache.c_str(), a.dtype.c_str(),
                       static_cast<long long>(a.callTokens), a.gbps);
          }
  }
  if (o.runs("compile"))
    measureCompile(o, r);
  else
    r.compileNote = "not run (--only)";
  r.run.finish();
  if (o.json) {
    printHuman(stderr, r, o);
    printJson(stdout, r, o);
  } else {
    printHuman(stdout, r, o);
  }
  return 0;
}
