//===- fuzz_cache_calls.cpp - libFuzzer target for runtime call sequences -===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// An input is a cache configuration (every method, small shapes, bit widths,
// residual / sink / outlier / refit settings, in and beyond the runtime's
// limits, a counting allocator that may fail once) followed by up to
// kMaxCalls calls on it and on a fork: update (random, constant, huge, NaN
// data, odd and absurd token counts, f32/f16/bad dtype), attend, fetch,
// stats, sink_positions, truncate, fork, save/load. Byte layout:
// decodeConfig() and the switch in LLVMFuzzerTestOneInput; missing bytes
// read as 0, so every byte string is an input. After every call the
// invariants of runtime.h are checked and a violation aborts (a finding):
//  - the status is a kvq_status, and a failure sets a one-line message;
//  - a failed call leaves every cache (length, stats, f32 fetch of every
//    layer, sink positions) and its outputs as they were; a const call
//    leaves the caches as they were whatever it returns;
//  - the bytes live in the allocator equal the sum of the caches'
//    kvq_stats.total_bytes, and every release matches an alloc;
//  - stats partition their tokens and bytes, sinks are ascending positions
//    of cached tokens;
//  - attend's output equals float64 attention over fetch's f32 K/V
//    (attention64 of tools/reference/reference_attention.h, shared with
//    the property test and kvq-eval; tolerance in attendTolerance);
//  - truncate, fork and load give caches equal (fetch, stats, sinks, saved
//    bytes) to the one rebuilt from the update log: truncate to a fresh
//    cache fed the kept part of every update (runtime.h's contract), fork
//    and load to the original.
// Each input is bounded (kMaxCalls calls, <= kMaxElems cached elements per
// layer) so a run takes milliseconds. Seed corpus: corpus/ beside this file,
// written by make_corpus.py; how it runs: test/fuzz/KvqFuzz.cmake.
//
//===----------------------------------------------------------------------===//
#include "kvq/config_limits.h"
#include "kvq/runtime.h"
#include "reference_attention.h" // tools/reference

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

namespace {

using kvq::reference::attention64;

constexpr int kMaxCalls = 48;
constexpr int64_t kMaxElems = int64_t{1} << 14; // tokens * channels per layer
namespace lim = kvq::limits;

[[noreturn]] void finding(const char *what, long long a = 0, long long b = 0) {
  std::fprintf(stderr,
               "fuzz_cache_calls: invariant broken: %s (%lld, %lld); "
               "last error: %s\n",
               what, a, b, kvq_last_error());
  std::abort();
}
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      finding(#cond, ##__VA_ARGS__);                                           \
  } while (0)

/// Input bytes; reads past the end give 0.
struct Bytes {
  const uint8_t *p, *end;
  uint8_t u8() { return p < end ? *p++ : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t{u8()} << (8 * i);
    return v;
  }
  bool done() const { return p >= end; }
};

/// Data generator (splitmix64), seeded from the input.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() {
    return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0;
  }
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform())) *
           std::cos(6.283185307179586 * uniform());
  }
};

template <class T> T pick(Bytes &in, std::initializer_list<T> options) {
  return options.begin()[in.u8() % options.size()];
}

/// Counting allocator; fails the failAt-th alloc (0 = never).
struct Counter {
  std::map<void *, size_t> live;
  int64_t bytes = 0, calls = 0, failAt = 0;
  static void *alloc(void *user, size_t size) {
    auto *c = static_cast<Counter *>(user);
    if (++c->calls == c->failAt)
      return nullptr;
    void *p = std::malloc(size ? size : 1);
    CHECK(p != nullptr);
    c->live[p] = size;
    c->bytes += static_cast<int64_t>(size);
    return p;
  }
  static void release(void *user, void *ptr, size_t size) {
    auto *c = static_cast<Counter *>(user);
    auto it = c->live.find(ptr);
    CHECK(it != c->live.end(), static_cast<long long>(size));
    CHECK(it->second == size, static_cast<long long>(it->second),
          static_cast<long long>(size));
    c->bytes -= static_cast<int64_t>(size);
    c->live.erase(it);
    std::free(ptr);
  }
  kvq_allocator abi() { return {&Counter::alloc, &Counter::release, this}; }
};

kvq_config decodeConfig(Bytes &in, Counter &counter) {
  kvq_config c;
  const uint8_t m = in.u8();
  kvq_config_init(&c, static_cast<kvq_method>(m % 4));
  if (m >= 252) // unknown methods
    c.method = pick<int32_t>(in, {4, -1, 0x7fffffff});
  c.key_bits = pick<int32_t>(in, {2, 3, 4, 8, 2, 3, 4, 8, 2, 4, 1, 5, 0, 16});
  c.value_bits = pick<int32_t>(in, {2, 3, 4, 8, 2, 3, 4, 8, 2, 4, 1, 5, 0, -3});
  c.num_kv_heads = pick<int32_t>(in, {1, 1, 2, 3, 1, 2, 0, lim::kKvHeads + 1});
  c.head_dim = pick<int32_t>(in, {4, 8, 16, 3, 5, 6, 10, 32, 1, 2, 12, 0, -1,
                                  lim::kHeadDim, lim::kHeadDim + 1});
  const int32_t d = c.head_dim;
  c.group_size = pick<int32_t>(
      in, {d, d % 2 ? d : d / 2, d % 4 ? d : d / 4, 1, 32, 3, 0, -1, d * 2});
  c.residual_length = pick<int32_t>(
      in, {4, 0, 1, 2, 7, 32, 3, lim::kWaitTokens, lim::kWaitTokens + 1, -1});
  c.residual_mode = pick<int32_t>(in, {0, 1, 0, 1, 2});
  c.n_sink_tokens = pick<int32_t>( // first: the method's default
      in, {c.n_sink_tokens, 2, 0, 1, 5, 3, lim::kSinkTokens,
           lim::kSinkTokens + 1, -1});
  c.outlier_fraction = pick<float>(in, {0.01f, 0.0f, 0.05f, 0.2f, 0.5f, 0.999f,
                                        1.0f, -0.01f, NAN, INFINITY});
  c.lloyd_iters = pick<int32_t>(in, {8, 0, 1, 3, lim::kLloydIters + 1, -1});
  c.refit_interval =
      pick<int32_t>(in, {0, 8, 1, 3, 128, lim::kWaitTokens + 1, -1});
  c.kvquant_n_sink = pick<int32_t>(in, {1, 0, 2, 5, lim::kSinkTokens + 1, -1});
  const uint8_t misc = in.u8();
  c.num_layers =
      std::initializer_list<int32_t>{1, 2, 1, 3, 1, 2, 0, lim::kLayers + 1}
          .begin()[misc % 8];
  if (misc & 0x08)
    c.kvquant_group_size = 16;
  if ((misc & 0x30) == 0x30)
    c.backend = (misc & 0x40) ? KVQ_BACKEND_METAL : 7;
  const uint8_t a = in.u8(); // allocator: counting, failing once, or half set
  c.allocator = counter.abi();
  if (a >= 128)
    counter.failAt = a - 127;
  if (a == 127)
    c.allocator.release = nullptr;
  return c;
}

int64_t channelsOf(const kvq_config &c) {
  return int64_t{c.num_kv_heads} * c.head_dim;
}

/// One successful update, kept to rebuild a cache (truncate's contract).
struct Update {
  int32_t layer;
  int64_t n;
  kvq_dtype dtype;
  std::vector<uint8_t> k, v;
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

/// What is observable of a cache, to compare before/after and between
/// caches.
struct View {
  bool present = false; // taken of a live cache
  std::vector<int64_t> length;
  std::vector<std::vector<float>> k, v;
  std::vector<std::vector<int64_t>> sinks;
  std::vector<kvq_stats> stats; // per layer, then the whole cache
  bool operator==(const View &o) const {
    if (length != o.length || k.size() != o.k.size() || sinks != o.sinks ||
        stats.size() != o.stats.size())
      return false;
    for (size_t i = 0; i < stats.size(); ++i)
      if (std::memcmp(&stats[i], &o.stats[i], sizeof(kvq_stats)) != 0)
        return false;
    // Bitwise: -0 vs 0 is a difference.
    for (size_t l = 0; l < k.size(); ++l)
      if (!sameBits(k[l], o.k[l]) || !sameBits(v[l], o.v[l]))
        return false;
    return true;
  }
};

void checkStats(const kvq_stats &s) {
  CHECK(s.tokens >= 0 && s.compressed_tokens >= 0 && s.sink_tokens >= 0 &&
        s.residual_tokens >= 0);
  CHECK(s.compressed_tokens + s.sink_tokens + s.residual_tokens == s.tokens,
        s.tokens);
  CHECK(s.total_bytes == s.code_bytes + s.scale_zero_bytes +
                             s.level_table_bytes + s.outlier_bytes +
                             s.sink_bytes + s.residual_bytes,
        s.total_bytes);
  CHECK(std::isfinite(s.effective_bits) && s.effective_bits >= 0);
}

View view(const kvq_cache_t *c, const kvq_config &cfg) {
  View w;
  const int64_t ch = channelsOf(cfg);
  kvq_stats total;
  CHECK(kvq_cache_stats(c, -1, &total) == KVQ_OK);
  checkStats(total);
  int64_t tokens = 0, bytes = 0;
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    int64_t n = -1;
    CHECK(kvq_cache_length(c, l, &n) == KVQ_OK && n >= 0 && n * ch <= kMaxElems,
          n);
    w.length.push_back(n);
    std::vector<float> k(static_cast<size_t>(n * ch)), v(k.size());
    if (n > 0)
      CHECK(kvq_cache_fetch(c, l, k.data(), v.data(), n, KVQ_DTYPE_F32) ==
            KVQ_OK);
    for (size_t i = 0; i < k.size(); ++i)
      CHECK(std::isfinite(k[i]) && std::isfinite(v[i]));
    w.k.push_back(std::move(k));
    w.v.push_back(std::move(v));
    kvq_stats s;
    CHECK(kvq_cache_stats(c, l, &s) == KVQ_OK);
    checkStats(s);
    CHECK(s.tokens == n, s.tokens, n);
    CHECK(s.fp16_bytes == n * ch * 4, s.fp16_bytes);
    tokens += s.tokens;
    bytes += s.total_bytes;
    w.stats.push_back(s);
    int64_t count = -1;
    CHECK(kvq_cache_sink_positions(c, l, nullptr, 0, &count) == KVQ_OK &&
          count >= 0 && count <= n);
    std::vector<int64_t> p(static_cast<size_t>(count));
    if (count)
      CHECK(kvq_cache_sink_positions(c, l, p.data(), count, &count) == KVQ_OK);
    for (size_t i = 0; i < p.size(); ++i)
      CHECK(p[i] >= 0 && p[i] < n && (i == 0 || p[i - 1] < p[i]), p[i]);
    w.sinks.push_back(std::move(p));
  }
  CHECK(total.tokens == tokens && total.total_bytes == bytes, total.tokens,
        tokens);
  w.stats.push_back(total);
  return w;
}

std::vector<uint8_t> saved(const kvq_cache_t *c) {
  int64_t size = -1;
  kvq_status st = kvq_cache_save(c, nullptr, 0, &size);
  if (st != KVQ_OK)
    return {};
  CHECK(size > 0, size);
  std::vector<uint8_t> b(static_cast<size_t>(size));
  int64_t again = -1;
  CHECK(kvq_cache_save(c, b.data(), size, &again) == KVQ_OK && again == size,
        again, size);
  return b;
}

/// Allowed |attend - attention64| for one query head. The property test's
/// rule (test/unit/runtime/attend_fetch_property_test.cpp), 1e-4 * (1 +
/// max|v|), covers float sums, exp and accumulation for scores of O(10) and
/// <= 48 tokens. Fuzzed queries reach 2^64, keys 65504 and layers
/// thousands of tokens, so two terms are added:
///  - scores: attend's float score of d products errs by at most
///    ~(d + 4) * 2^-24 of its magnitude bound `mag` (it may expand a KIVI
///    key as code * scale + zero, |scale * code| + |zero| <= 3 max|k|, so
///    mag = 3 max|k| * sum |q_c| / sqrt(d)); a score error e scales each
///    softmax weight by a factor within exp(+-2e), which moves the output (a
///    convex combination of values) by at most (exp(2e) - 1) * max|v|;
///  - accumulation over `tokens` rows: at most tokens * 2^-22 * max|v|.
/// Both are doubled for margin; exp(2e) is capped where the bound is
/// vacuous anyway (the output is also checked to be a convex combination).
double attendTolerance(double mag, int d, int64_t tokens, double vmax) {
  const double e = 2.0 * (d + 4) * std::ldexp(mag, -24);
  return 1e-4 * (1.0 + vmax) + std::expm1(std::min(2.0 * e, 40.0)) * vmax +
         2.0 * static_cast<double>(tokens) * std::ldexp(vmax, -22);
}

struct Harness {
  kvq_config cfg;
  Counter counter;
  // Slot 0: the cache the input creates; slot 1: a fork or a loaded copy.
  kvq_cache_t *cache[2] = {nullptr, nullptr};
  std::vector<Update> log[2];
  Rng rng{0};
  // KVQ_FUZZ_TRACE=1 prints every call and its status (to read a finding).
  const bool trace = std::getenv("KVQ_FUZZ_TRACE") != nullptr;

  ~Harness() {
    kvq_cache_destroy(cache[0]);
    kvq_cache_destroy(cache[1]);
  }

  void checkStatus(kvq_status st) {
    if (trace)
      std::fprintf(stderr, "  -> %s %s\n", kvq_status_string(st),
                   st ? kvq_last_error() : "");
    CHECK(st >= KVQ_OK && st <= KVQ_ERR_NOT_EXACT, st);
    if (st != KVQ_OK) {
      const char *msg = kvq_last_error();
      CHECK(msg && *msg && !std::strchr(msg, '\n'), st);
    }
  }

  View snapshot(int s) {
    View w = view(cache[s], cfg);
    w.present = true;
    return w;
  }

  void checkAccounting() {
    int64_t bytes = 0;
    for (kvq_cache_t *c : cache)
      if (c) {
        kvq_stats s;
        CHECK(kvq_cache_stats(c, -1, &s) == KVQ_OK);
        bytes += s.total_bytes;
      }
    CHECK(bytes == counter.bytes, bytes, counter.bytes);
  }

  /// A fresh cache fed `updates`, each cut to the first `keep` tokens of
  /// its layer (the state kvq_cache_truncate must reproduce).
  kvq_cache_t *rebuild(const std::vector<Update> &updates, int64_t keep,
                       Counter &alloc) {
    kvq_config c = cfg;
    c.allocator = alloc.abi();
    kvq_cache_t *fresh = nullptr;
    CHECK(kvq_cache_create(&c, &fresh) == KVQ_OK);
    std::vector<int64_t> held(static_cast<size_t>(cfg.num_layers), 0);
    for (const Update &u : updates) {
      int64_t &h = held[static_cast<size_t>(u.layer)];
      const int64_t n = std::min(u.n, keep - h);
      if (n <= 0)
        continue;
      const kvq_status st =
          kvq_cache_update(fresh, u.layer, u.k.data(), u.v.data(), n, u.dtype);
      // The kept part of data the cache accepted is accepted too: a refusal
      // means the truncated state is not one a fresh cache can reach.
      CHECK(st == KVQ_OK, st, n);
      h += n;
    }
    return fresh;
  }

  void expectSame(const kvq_cache_t *a, const kvq_cache_t *b,
                  const char *what) {
    if (!(view(a, cfg) == view(b, cfg)))
      finding(what);
    const std::vector<uint8_t> sa = saved(a), sb = saved(b);
    if (sa != sb)
      finding(what, static_cast<long long>(sa.size()),
              static_cast<long long>(sb.size()));
  }

  // Each call returns the mask of slots it changed (only on success).
  int update(Bytes &in, int slot, const View &before);
  int attend(Bytes &in, int slot, const View &before);
  int fetch(Bytes &in, int slot, const View &before);
  int stats(Bytes &in, int slot);
  int sinks(Bytes &in, int slot, const View &before);
  int truncate(Bytes &in, int slot, const View &before);
  int fork(int slot);
  int saveLoad(int slot);
};

int32_t pickLayer(Bytes &in, int32_t layers) {
  const uint8_t b = in.u8();
  if (b < 240)
    return layers > 0 ? b % layers : 0;
  return std::initializer_list<int32_t>{-1, layers,    layers + 1,
                                        -2, INT32_MIN, INT32_MAX}
      .begin()[b % 6];
}

void fill(Rng &rng, uint8_t kind, std::vector<float> &x) {
  const double scale =
      std::initializer_list<double>{1, 0.01, 100, 1e4, 3e4, 1e-6, 1, 1}
          .begin()[kind % 8];
  for (float &e : x)
    e = static_cast<float>(rng.normal() * scale);
  if (x.empty())
    return;
  switch (kind / 8 % 8) {
  case 1: // constant: zero-width quantization groups
    std::fill(x.begin(), x.end(), static_cast<float>(rng.normal()));
    break;
  case 2: // one non-finite element
    x[rng.next() % x.size()] = (rng.next() & 1) ? NAN : -INFINITY;
    break;
  case 3: // beyond fp16
    x[rng.next() % x.size()] = 70000.0f;
    break;
  case 4: // fp16 extremes: a KIVI group spanning [-65504, 65504]
    for (float &e : x)
      e = (rng.next() & 1) ? 65504.0f : -65504.0f;
    break;
  case 5: // a planted sink-like token
    for (size_t i = 0; i < std::min<size_t>(x.size(), 64); ++i)
      x[i] *= 40.0f;
    break;
  default:
    break;
  }
}

/// Round-to-nearest-even f32 -> fp16 bits, written here (not the
/// runtime's): f16 inputs, and what an f16 fetch must return.
uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (x >> 16) & 0x8000;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f))
    return sign | 0x7e00;
  if (a >= 65520.0)
    return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14))
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0));
  int e;
  std::frexp(a, &e);
  const double q = std::nearbyint(std::ldexp(a, 11 - e));
  // q in [1024, 2048]; 2048 carries into the exponent.
  const uint32_t bits = (static_cast<uint32_t>(e - 1 + 15) << 10) +
                        (static_cast<uint32_t>(q) - 1024);
  return sign | static_cast<uint16_t>(bits);
}

int Harness::update(Bytes &in, int slot, const View &before) {
  kvq_cache_t *c = cache[slot];
  const int32_t layer = pickLayer(in, cfg.num_layers);
  const uint8_t nb = in.u8();
  const int64_t ch = channelsOf(cfg);
  int64_t n = nb % 24 < 17 ? nb % 24 + 1 : 1 + nb % 3;
  bool absurd = false; // rejected before any data is read
  if (nb >= 232) {
    n =
        std::initializer_list<int64_t>{
            0,         -1,  lim::kLayerTokens + 1, INT64_MAX,
            INT64_MIN, -17, lim::kLayerTokens * 4, 0}
            .begin()[nb % 8];
    absurd = true;
  }
  // Keep the cache within kMaxElems per layer.
  if (!absurd && layer >= 0 && layer < cfg.num_layers) {
    const int64_t room = kMaxElems / std::max<int64_t>(ch, 1) -
                         before.length[static_cast<size_t>(layer)];
    if (room <= 0)
      return 0;
    n = std::min(n, room);
  }
  const uint8_t kind = in.u8(), flags = in.u8();
  kvq_dtype dtype = (flags & 3) == 2 ? KVQ_DTYPE_F16 : KVQ_DTYPE_F32;
  const int64_t elems = absurd ? ch : n * ch;
  std::vector<float> k(static_cast<size_t>(std::max<int64_t>(elems, 1))),
      v(k.size());
  fill(rng, kind, k);
  fill(rng, static_cast<uint8_t>(kind ^ (flags & 0xf8)), v);
  std::vector<uint8_t> kb, vb;
  if (dtype == KVQ_DTYPE_F16) {
    std::vector<uint16_t> kh(k.size()), vh(v.size());
    for (size_t i = 0; i < k.size(); ++i) {
      kh[i] = toHalf(k[i]);
      vh[i] = toHalf(v[i]);
    }
    kb.assign(reinterpret_cast<uint8_t *>(kh.data()),
              reinterpret_cast<uint8_t *>(kh.data() + kh.size()));
    vb.assign(reinterpret_cast<uint8_t *>(vh.data()),
              reinterpret_cast<uint8_t *>(vh.data() + vh.size()));
  } else {
    kb.assign(reinterpret_cast<uint8_t *>(k.data()),
              reinterpret_cast<uint8_t *>(k.data() + k.size()));
    vb.assign(reinterpret_cast<uint8_t *>(v.data()),
              reinterpret_cast<uint8_t *>(v.data() + v.size()));
  }
  const kvq_dtype passed =
      (flags & 3) == 3 ? static_cast<kvq_dtype>(2 + (flags >> 7)) : dtype;
  const void *kp = (flags & 0x0c) == 0x0c ? nullptr : kb.data();
  const kvq_status st = kvq_cache_update(c, layer, kp, vb.data(), n, passed);
  checkStatus(st);
  if (st != KVQ_OK)
    return 0;
  CHECK(!absurd && kp && passed == dtype && layer >= 0 &&
            layer < cfg.num_layers,
        n, layer);
  kb.resize(static_cast<size_t>(elems) * (dtype == KVQ_DTYPE_F16 ? 2 : 4));
  vb.resize(kb.size());
  log[slot].push_back({layer, n, dtype, std::move(kb), std::move(vb)});
  int64_t len = -1;
  CHECK(kvq_cache_length(c, layer, &len) == KVQ_OK &&
            len == before.length[static_cast<size_t>(layer)] + n,
        len, n);
  return 1 << slot;
}

int Harness::attend(Bytes &in, int slot, const View &before) {
  const int32_t layer = pickLayer(in, cfg.num_layers);
  const uint8_t nb = in.u8(), hb = in.u8(), kind = in.u8();
  int64_t nq = nb % 8 + 1;
  bool absurd = false;
  if (nb >= 240) {
    nq = std::initializer_list<int64_t>{0, -1, INT64_MAX, INT64_MIN}
             .begin()[nb % 4];
    absurd = true;
  }
  const int32_t kvh = cfg.num_kv_heads, d = cfg.head_dim;
  int32_t qh = kvh * (hb % 3 + 1);
  if (hb >= 240) {
    qh = std::initializer_list<int32_t>{0, -1, kvh + 1, lim::kQHeads + kvh,
                                        INT32_MAX}
             .begin()[hb % 5];
    absurd = absurd || qh > lim::kQHeads || qh <= 0;
  }
  const int64_t elems = absurd ? int64_t{kvh} * d : nq * qh * d;
  if (elems > kMaxElems * 4)
    return 0;
  std::vector<float> q(static_cast<size_t>(std::max<int64_t>(elems, 1)));
  fill(rng, kind, q);
  if (kind >= 248) // beyond the query bound, or just inside it
    q[0] = kind & 1 ? 1e20f : 9e18f;
  // Sentinel output: a failed call must leave it as it is.
  std::vector<float> out(q.size(), 12345.0f);
  const kvq_status st =
      kvq_cache_attend(cache[slot], layer, q.data(), nq, qh, out.data());
  checkStatus(st);
  if (st != KVQ_OK) {
    for (float o : out)
      CHECK(o == 12345.0f);
    return 0;
  }
  CHECK(!absurd && layer >= 0 && layer < cfg.num_layers, nq, qh);
  const size_t l = static_cast<size_t>(layer);
  const int64_t len = before.length[l];
  CHECK(nq >= 1 && nq <= len && qh % kvh == 0, nq, len);
  const std::vector<float> &K = before.k[l], &V = before.v[l];
  double vmax = 0.0, kmax = 0.0;
  for (float x : V)
    vmax = std::max(vmax, std::fabs(static_cast<double>(x)));
  for (float x : K)
    kmax = std::max(kmax, std::fabs(static_cast<double>(x)));
  const std::vector<double> want = attention64(K, V, len, kvh, d, q, nq, qh);
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(std::isfinite(out[i]));
    // A convex combination of the values, whatever the scores.
    CHECK(std::fabs(out[i]) <=
              vmax * (1 + static_cast<double>(len) * std::ldexp(1.0, -21)),
          static_cast<long long>(i));
    const float *qrow = q.data() + i / static_cast<size_t>(d) * d;
    double qsum = 0.0;
    for (int c = 0; c < d; ++c)
      qsum += std::fabs(static_cast<double>(qrow[c]));
    const double mag = 3.0 * kmax * qsum / std::sqrt(static_cast<double>(d));
    const double tol = attendTolerance(mag, d, len, vmax);
    if (!(std::fabs(out[i] - want[i]) <= tol)) {
      std::fprintf(stderr, "attend %g vs float64 %g (tolerance %g)\n", out[i],
                   want[i], tol);
      finding("attend == float64 attention over fetch", layer,
              static_cast<long long>(i));
    }
  }
  return 0;
}

int Harness::fetch(Bytes &in, int slot, const View &before) {
  const int32_t layer = pickLayer(in, cfg.num_layers);
  const uint8_t b = in.u8();
  const bool ok = layer >= 0 && layer < cfg.num_layers;
  const int64_t len = ok ? before.length[static_cast<size_t>(layer)] : 0;
  const int64_t capacity =
      std::initializer_list<int64_t>{len, len + 1, len - 1, 0, -1, len}
          .begin()[b % 6];
  const kvq_dtype dtype =
      std::initializer_list<kvq_dtype>{KVQ_DTYPE_F32, KVQ_DTYPE_F32,
                                       KVQ_DTYPE_F16, static_cast<kvq_dtype>(5)}
          .begin()[b >> 6];
  const size_t rows = static_cast<size_t>(std::max<int64_t>(capacity, 0));
  std::vector<float> k(rows * static_cast<size_t>(channelsOf(cfg)) + 1, 777.0f),
      v(k);
  const kvq_status st =
      kvq_cache_fetch(cache[slot], layer, k.data(), v.data(), capacity, dtype);
  checkStatus(st);
  if (st != KVQ_OK) {
    for (size_t i = 0; i < k.size(); ++i)
      CHECK(k[i] == 777.0f && v[i] == 777.0f);
    return 0;
  }
  CHECK(ok && capacity >= len && dtype != 5, capacity, len);
  const std::vector<float> &K = before.k[static_cast<size_t>(layer)],
                           &V = before.v[static_cast<size_t>(layer)];
  const size_t n = K.size();
  if (dtype == KVQ_DTYPE_F32) {
    CHECK(n == 0 || (std::memcmp(k.data(), K.data(), n * 4) == 0 &&
                     std::memcmp(v.data(), V.data(), n * 4) == 0));
  } else {
    // f16 output is the f32 value rounded to fp16.
    const uint16_t *kh = reinterpret_cast<const uint16_t *>(k.data());
    const uint16_t *vh = reinterpret_cast<const uint16_t *>(v.data());
    for (size_t i = 0; i < n; ++i)
      CHECK(kh[i] == toHalf(K[i]) && vh[i] == toHalf(V[i]),
            static_cast<long long>(i));
  }
  // Nothing written past the first `len` rows.
  for (size_t i = dtype == KVQ_DTYPE_F32 ? n : (n + 1) / 2; i < k.size(); ++i)
    CHECK(k[i] == 777.0f && v[i] == 777.0f, static_cast<long long>(i));
  return 0;
}

int Harness::stats(Bytes &in, int slot) {
  const int32_t layer = pickLayer(in, cfg.num_layers);
  kvq_stats s, sentinel;
  std::memset(&s, 0x5a, sizeof(s));
  sentinel = s;
  const kvq_status st = kvq_cache_stats(cache[slot], layer, &s);
  checkStatus(st);
  if (st == KVQ_OK)
    CHECK(layer >= -1 && layer < cfg.num_layers, layer);
  else
    CHECK(std::memcmp(&s, &sentinel, sizeof(s)) == 0, st);
  return 0;
}

int Harness::sinks(Bytes &in, int slot, const View &before) {
  const int32_t layer = pickLayer(in, cfg.num_layers);
  const int64_t cap = in.u8() % 8 - 1;
  std::vector<int64_t> p(8, -7);
  int64_t count = -7;
  const kvq_status st = kvq_cache_sink_positions(
      cache[slot], layer, cap >= 0 ? p.data() : nullptr, cap, &count);
  checkStatus(st);
  if (st != KVQ_OK) {
    CHECK(count == -7 && std::count(p.begin(), p.end(), -7) == 8, st);
    return 0;
  }
  CHECK(layer >= 0 && layer < cfg.num_layers, layer);
  const std::vector<int64_t> &want = before.sinks[static_cast<size_t>(layer)];
  CHECK(count == static_cast<int64_t>(want.size()), count);
  for (int64_t i = 0; i < 8; ++i)
    CHECK(p[i] == (i < std::min(cap, count) ? want[i] : -7), i);
  return 0;
}

int Harness::truncate(Bytes &in, int slot, const View &before) {
  const uint8_t b = in.u8();
  int64_t most = 0;
  for (int64_t n : before.length)
    most = std::max(most, n);
  const int64_t n =
      std::initializer_list<int64_t>{most - 1,  most - 2, most / 2, 0,
                                     most,      most + 1, -1,       INT64_MAX,
                                     INT64_MIN, most - 5, 1,        most - 3}
          .begin()[b % 12];
  const kvq_status st = kvq_cache_truncate(cache[slot], n);
  checkStatus(st);
  if (st != KVQ_OK)
    return 0;
  CHECK(n >= 0, n);
  for (size_t l = 0; l < before.length.size(); ++l) {
    int64_t len = -1;
    CHECK(kvq_cache_length(cache[slot], static_cast<int32_t>(l), &len) ==
                  KVQ_OK &&
              len == std::min(n, before.length[l]),
          len, n);
  }
  // Bit for bit the cache fed the kept part of every update.
  Counter scratch;
  kvq_cache_t *fresh = rebuild(log[slot], n, scratch);
  expectSame(cache[slot], fresh, "truncate == rebuild of the kept tokens");
  kvq_cache_destroy(fresh);
  CHECK(scratch.bytes == 0, scratch.bytes);
  std::vector<Update> kept;
  std::vector<int64_t> held(before.length.size(), 0);
  for (Update &u : log[slot]) {
    int64_t &h = held[static_cast<size_t>(u.layer)];
    const int64_t take = std::min(u.n, n - h);
    if (take <= 0)
      continue;
    const size_t per = u.k.size() / static_cast<size_t>(u.n);
    u.k.resize(per * static_cast<size_t>(take));
    u.v.resize(u.k.size());
    u.n = take;
    h += take;
    kept.push_back(std::move(u));
  }
  log[slot] = std::move(kept);
  return 1 << slot;
}

int Harness::fork(int slot) {
  kvq_cache_t *out = reinterpret_cast<kvq_cache_t *>(&out); // sentinel
  const kvq_status st = kvq_cache_fork(cache[slot], &out);
  checkStatus(st);
  if (st != KVQ_OK) {
    CHECK(out == reinterpret_cast<kvq_cache_t *>(&out));
    return 0;
  }
  CHECK(out != nullptr && out != cache[slot]);
  kvq_cache_destroy(cache[1 - slot]);
  cache[1 - slot] = out;
  log[1 - slot] = log[slot];
  expectSame(cache[slot], out, "fork == original");
  return 1 << (1 - slot);
}

int Harness::saveLoad(int slot) {
  const std::vector<uint8_t> bytes = saved(cache[slot]);
  if (bytes.empty())
    return 0;
  int64_t size = -1; // a buffer one byte short: refused, size still set
  std::vector<uint8_t> shortBuf(bytes.size(), 0xa5);
  const kvq_status tooSmall =
      kvq_cache_save(cache[slot], shortBuf.data(),
                     static_cast<int64_t>(bytes.size()) - 1, &size);
  checkStatus(tooSmall);
  CHECK(tooSmall == KVQ_ERR_BUFFER_TOO_SMALL &&
            size == static_cast<int64_t>(bytes.size()),
        tooSmall, size);
  for (uint8_t x : shortBuf)
    CHECK(x == 0xa5);
  kvq_allocator a = counter.abi();
  kvq_cache_t *out = nullptr;
  const kvq_status st = kvq_cache_load(
      bytes.data(), static_cast<int64_t>(bytes.size()), &a, &out);
  checkStatus(st);
  if (st != KVQ_OK) {
    // Only the allocator may refuse a cache the runtime itself saved.
    CHECK(st == KVQ_ERR_OUT_OF_MEMORY && out == nullptr, st);
    return 0;
  }
  kvq_cache_destroy(cache[1 - slot]);
  cache[1 - slot] = out;
  log[1 - slot] = log[slot];
  expectSame(cache[slot], out, "load(save) == original");
  return 1 << (1 - slot);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Bytes in{data, data + size};
  Harness h;
  h.cfg = decodeConfig(in, h.counter);
  h.rng.s = in.u32();
  kvq_cache_t *out = reinterpret_cast<kvq_cache_t *>(&h); // sentinel
  if (h.trace)
    std::fprintf(stderr,
                 "create: method %d bits %d/%d heads %d dim %d group %d "
                 "residual %d/%d sinks %d outliers %g lloyd %d refit %d "
                 "kvquant sinks %d layers %d backend %d, alloc fails at %lld\n",
                 h.cfg.method, h.cfg.key_bits, h.cfg.value_bits,
                 h.cfg.num_kv_heads, h.cfg.head_dim, h.cfg.group_size,
                 h.cfg.residual_length, h.cfg.residual_mode,
                 h.cfg.n_sink_tokens, h.cfg.outlier_fraction, h.cfg.lloyd_iters,
                 h.cfg.refit_interval, h.cfg.kvquant_n_sink, h.cfg.num_layers,
                 h.cfg.backend, static_cast<long long>(h.counter.failAt));
  const kvq_status created = kvq_cache_create(&h.cfg, &out);
  h.checkStatus(created);
  if (created != KVQ_OK) {
    CHECK(out == reinterpret_cast<kvq_cache_t *>(&h));
    CHECK(h.counter.bytes == 0, h.counter.bytes);
    return 0;
  }
  h.cache[0] = out;
  CHECK(kvq_config_validate(&h.cfg) == KVQ_OK);
  // Shapes past the harness bounds are valid but not fuzzed further.
  if (channelsOf(h.cfg) > kMaxElems || h.cfg.num_layers > 4)
    return 0;
  for (int call = 0; call < kMaxCalls && !in.done(); ++call) {
    const uint8_t op = in.u8();
    const int slot = (op & 0x80) && h.cache[1] ? 1 : 0;
    if (h.trace)
      std::fprintf(stderr, "call %d: %s on cache %d\n", call,
                   std::initializer_list<const char *>{
                       "update", "update", "update", "attend", "fetch", "stats",
                       "sink_positions", "truncate", "fork", "save/load"}
                       .begin()[op % 10],
                   slot);
    View before[2];
    for (int s = 0; s < 2; ++s)
      if (h.cache[s])
        before[s] = h.snapshot(s);
    int changed = 0;
    switch (op % 10) {
    case 0:
    case 1:
    case 2:
      changed = h.update(in, slot, before[slot]);
      break;
    case 3:
      changed = h.attend(in, slot, before[slot]);
      break;
    case 4:
      changed = h.fetch(in, slot, before[slot]);
      break;
    case 5:
      changed = h.stats(in, slot);
      break;
    case 6:
      changed = h.sinks(in, slot, before[slot]);
      break;
    case 7:
      changed = h.truncate(in, slot, before[slot]);
      break;
    case 8:
      changed = h.fork(slot);
      break;
    case 9:
      changed = h.saveLoad(slot);
      break;
    }
    // Failed calls and const calls change nothing.
    for (int s = 0; s < 2; ++s)
      if (before[s].present && !(changed & (1 << s)))
        CHECK(h.snapshot(s) == before[s], s, op);
    h.checkAccounting();
  }
  kvq_cache_destroy(h.cache[0]);
  kvq_cache_destroy(h.cache[1]);
  h.cache[0] = h.cache[1] = nullptr;
  CHECK(h.counter.bytes == 0 && h.counter.live.empty(), h.counter.bytes);
  return 0;
}
