//===- metal_saveload_test.cpp - Metal save and load vs the CPU -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_metal_cache_save writes the CPU cache's format: for every method
// (some setups with a pre-RoPE key cache), a Metal cache and a CPU cache fed
// the same update calls (two layers, a prefill and decode calls) must save
// the same bytes after every call, but for the backend field and so the
// checksum. Round trips Metal -> Metal, Metal -> CPU and CPU -> Metal must
// give caches equal to their source (fetch bits, every stats field, sinks,
// saved bytes; attention bits when both ends are the same backend, within
// the shim tolerance across backends, and bit for bit against a cache of
// the loading backend fed the same updates) that keep evolving like it. Bad
// files (every prefix, every flipped byte, wrong version, tampered checksum,
// tampered fields with a recomputed checksum) get the CPU loader's verdict and
// no cache. Through the Linux shim.
//
//===----------------------------------------------------------------------===//
#include "metal_test_util.h"
#include "runtime/saved_file_util.h"

#include <memory>
#include <string>

using namespace kvqtest;
using namespace kvqmetaltest;

namespace {

constexpr int kHeads = 2, kDim = 16, kLayers = 2;
constexpr int64_t kTokens = 48;

struct Setup {
  const char *name;
  kvq_config cfg;
  int64_t prefill; ///< the first call; then decode calls of 1, 3, 1, 4, 2
  /// Keys of the first 8 tokens scaled by 8: kivi_sink protects them, so
  /// whole key groups are sinks (groups that store no block).
  bool loudPrefix;
};

void PrintTo(const Setup &s, std::ostream *os) { *os << s.name; }

kvq_config base(kvq_method m) {
  kvq_config c = config(m, kHeads, kDim);
  c.num_layers = kLayers;
  c.group_size = 8;
  c.residual_length = 8;
  return c;
}

std::vector<Setup> setups() {
  std::vector<Setup> s;
  s.push_back({"fp16", base(KVQ_METHOD_FP16), 20, false});
  kvq_config c = base(KVQ_METHOD_KIVI); // 2-bit keys: nibble-major in files
  s.push_back({"kivi2", c, 20, false});
  c.key_bits = 3; // row-major in files
  c.value_bits = 4;
  c.residual_length = 16;
  c.residual_mode = KVQ_RESIDUAL_BLOCK;
  s.push_back({"kivi3_block", c, 20, false});
  c = base(KVQ_METHOD_KIVI);
  c.key_bits = 4;
  c.value_bits = 8;
  c.group_size = 16;
  s.push_back({"kivi4", c, 20, false});
  c = base(KVQ_METHOD_KIVI_SINK);
  c.n_sink_tokens = 3;
  s.push_back({"kivi_sink", c, 20, false});
  c.key_bits = 4;
  c.n_sink_tokens = 12;
  s.push_back({"kivi_sink_all_sink_groups", c, 20, true});
  c = base(KVQ_METHOD_KVQUANT);
  c.refit_interval = 0;
  c.outlier_fraction = 0.05f;
  s.push_back({"kvquant_frozen", c, 20, false});
  c.refit_interval = 8;
  c.kvquant_n_sink = 4;
  s.push_back({"kvquant_refit_sinks_first", c, 3, false}); // 3 sinks, no fit
  c = base(KVQ_METHOD_KVQUANT);
  c.key_bits = 2;
  c.value_bits = 4;
  c.kvquant_n_sink = 0;
  c.refit_interval = 0;
  s.push_back({"kvquant_2bit_one_token_fit", c, 1, false});
  // Pre-RoPE key caches: the configuration's RoPE travels in the file and
  // the loaded cache rotates its keys at the same positions.
  c = base(KVQ_METHOD_FP16);
  c.rope_style = KVQ_ROPE_HALF;
  s.push_back({"fp16_rope_half", c, 20, false});
  c = base(KVQ_METHOD_KIVI_SINK);
  c.n_sink_tokens = 3;
  c.rope_style = KVQ_ROPE_INTERLEAVED;
  c.rope_theta = 500000.0f;
  s.push_back({"kivi_sink_rope_interleaved", c, 20, false});
  c = base(KVQ_METHOD_KVQUANT);
  c.refit_interval = 8;
  c.outlier_fraction = 0.05f;
  c.rope_style = KVQ_ROPE_HALF;
  s.push_back({"kvquant_refit_rope_half", c, 20, false});
  return s;
}

/// The K/V of each layer and the update calls.
struct Source {
  explicit Source(const Setup &s) : setup(s) {
    kv[0] = gaussianKV(31, 2 * kTokens, kHeads, kDim);
    kv[1] = laplaceKV(32, 2 * kTokens, kHeads, kDim);
    if (s.loudPrefix)
      for (KV &x : kv)
        for (int64_t i = 0; i < 8 * x.channels(); ++i)
          x.k[i] *= 8.0f;
    calls.push_back(s.prefill);
    const int64_t steps[] = {1, 3, 1, 4, 2};
    for (int64_t t = s.prefill, i = 0; t < kTokens; ++i) {
      calls.push_back(std::min(steps[i % 5], kTokens - t));
      t += calls.back();
    }
  }
  /// Tokens [from, to) into every layer of the caches that are non-null.
  void feed(kvq_cache_t *cpu, kvq_metal_cache_t *gpu, int64_t from,
            int64_t to) const {
    for (int32_t l = 0; l < setup.cfg.num_layers; ++l) {
      const KV &x = kv[l];
      const float *k = x.k.data() + from * x.channels(),
                  *v = x.v.data() + from * x.channels();
      if (cpu)
        ASSERT_EQ(KVQ_OK,
                  kvq_cache_update(cpu, l, k, v, to - from, KVQ_DTYPE_F32))
            << kvq_last_error();
      if (gpu)
        ASSERT_EQ(KVQ_OK, kvq_metal_cache_update(gpu, l, k, v, to - from,
                                                 KVQ_DTYPE_F32))
            << kvq_last_error();
    }
  }
  const Setup &setup;
  KV kv[kLayers];
  std::vector<int64_t> calls;
};

/// The C entry points of one backend, under one set of names.
struct CpuApi {
  using Cache = kvq_cache_t;
  static constexpr auto length = kvq_cache_length;
  static constexpr auto fetch = kvq_cache_fetch;
  static constexpr auto attend = kvq_cache_attend;
  static constexpr auto stats = kvq_cache_stats;
  static constexpr auto sinks = kvq_cache_sink_positions;
  static constexpr auto save = kvq_cache_save;
};
struct MetalApi {
  using Cache = kvq_metal_cache_t;
  static constexpr auto length = kvq_metal_cache_length;
  static constexpr auto fetch = kvq_metal_cache_fetch;
  static constexpr auto attend = kvq_metal_cache_attend;
  static constexpr auto stats = kvq_metal_cache_stats;
  static constexpr auto sinks = kvq_metal_cache_sink_positions;
  static constexpr auto save = kvq_metal_cache_save;
};

/// Everything a caller can observe of a cache.
struct Observed {
  struct Layer {
    int64_t length = -1;
    std::vector<uint8_t> k16, v16, k32, v32;
    kvq_stats stats{};
    std::vector<int64_t> sinks;
    std::vector<float> attention; ///< the last min(3, length) positions
  };
  std::vector<Layer> layers;
  kvq_stats total{};
  std::vector<uint8_t> saved;
};

template <class Api>
std::vector<uint8_t> savedBytes(const typename Api::Cache *c) {
  int64_t size = 0;
  EXPECT_EQ(KVQ_OK, Api::save(c, nullptr, 0, &size)) << kvq_last_error();
  std::vector<uint8_t> out(static_cast<size_t>(size));
  EXPECT_EQ(KVQ_OK, Api::save(c, out.data(), size, &size)) << kvq_last_error();
  EXPECT_EQ(size, static_cast<int64_t>(out.size()));
  return out;
}

template <class Api> Observed observe(const typename Api::Cache *c) {
  Observed o;
  const int64_t C = kHeads * kDim;
  for (int32_t l = 0; l < kLayers; ++l) {
    Observed::Layer y;
    EXPECT_EQ(KVQ_OK, Api::length(c, l, &y.length));
    const size_t n = static_cast<size_t>(y.length * C);
    y.k16.resize(2 * n), y.v16.resize(2 * n), y.k32.resize(4 * n),
        y.v32.resize(4 * n);
    if (y.length > 0) {
      EXPECT_EQ(KVQ_OK, Api::fetch(c, l, y.k16.data(), y.v16.data(), y.length,
                                   KVQ_DTYPE_F16))
          << kvq_last_error();
      EXPECT_EQ(KVQ_OK, Api::fetch(c, l, y.k32.data(), y.v32.data(), y.length,
                                   KVQ_DTYPE_F32))
          << kvq_last_error();
      const int64_t nq = std::min<int64_t>(3, y.length);
      std::vector<float> q(static_cast<size_t>(nq * 2 * C));
      Rng rng(77 + l);
      for (float &x : q)
        x = static_cast<float>(rng.normal());
      y.attention.resize(q.size());
      EXPECT_EQ(KVQ_OK,
                Api::attend(c, l, q.data(), nq, 2 * kHeads, y.attention.data()))
          << kvq_last_error();
    }
    EXPECT_EQ(KVQ_OK, Api::stats(c, l, &y.stats));
    int64_t count = 0;
    EXPECT_EQ(KVQ_OK, Api::sinks(c, l, nullptr, 0, &count));
    y.sinks.resize(static_cast<size_t>(count));
    if (count > 0)
      EXPECT_EQ(KVQ_OK, Api::sinks(c, l, y.sinks.data(), count, &count));
    o.layers.push_back(std::move(y));
  }
  EXPECT_EQ(KVQ_OK, Api::stats(c, -1, &o.total));
  o.saved = savedBytes<Api>(c);
  return o;
}

/// The same file but for the backend field (the checksum recomputed).
std::vector<uint8_t> withBackend(std::vector<uint8_t> b, kvq_backend backend) {
  put(b, kBackendField, static_cast<uint32_t>(backend), 4);
  reseal(b);
  return b;
}

/// a and b hold the same tokens the same way. Attention is compared bit for
/// bit when both come from the same backend, else within the tolerance of
/// docs/METAL.md (the CPU accumulates in double); saved bytes are compared
/// with the backend field set to the CPU's.
void expectSame(const Observed &a, const Observed &b, bool sameBackend) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    SCOPED_TRACE(testing::Message() << "layer " << l);
    const Observed::Layer &x = a.layers[l], &y = b.layers[l];
    ASSERT_EQ(x.length, y.length);
    EXPECT_EQ(x.k16, y.k16);
    EXPECT_EQ(x.v16, y.v16);
    EXPECT_EQ(x.k32, y.k32);
    EXPECT_EQ(x.v32, y.v32);
    EXPECT_TRUE(sameStats(x.stats, y.stats));
    EXPECT_EQ(x.sinks, y.sinks);
    ASSERT_EQ(x.attention.size(), y.attention.size());
    if (sameBackend) {
      EXPECT_TRUE(x.attention.empty() ||
                  std::memcmp(x.attention.data(), y.attention.data(),
                              4 * x.attention.size()) == 0);
      continue;
    }
    float scale = 1.0f;
    for (float v : x.attention)
      scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < x.attention.size(); ++i)
      ASSERT_NEAR(x.attention[i], y.attention[i], 2e-5f * scale) << i;
  }
  EXPECT_TRUE(sameStats(a.total, b.total));
  EXPECT_EQ(withBackend(a.saved, KVQ_BACKEND_CPU),
            withBackend(b.saved, KVQ_BACKEND_CPU));
}

kvq_metal_cache_t *loadMetal(const std::vector<uint8_t> &b) {
  kvq_metal_cache_t *out = nullptr;
  EXPECT_EQ(KVQ_OK, kvq_metal_cache_load(b.data(),
                                         static_cast<int64_t>(b.size()), &out))
      << kvq_last_error();
  return out;
}

kvq_cache_t *loadCpu(const std::vector<uint8_t> &b) {
  kvq_cache_t *out = nullptr;
  EXPECT_EQ(KVQ_OK, kvq_cache_load(b.data(), static_cast<int64_t>(b.size()),
                                   nullptr, &out))
      << kvq_last_error();
  return out;
}

/// A Metal and a CPU cache fed the first `ncalls` calls of s.
struct Pair {
  Pair(const Source &s, size_t ncalls) : cpu(s.setup.cfg) {
    gpu.h = metalCache(s.setup.cfg);
    int64_t t = 0;
    for (size_t i = 0; i < ncalls && i < s.calls.size(); ++i) {
      s.feed(cpu.h, gpu.h, t, t + s.calls[i]);
      t += s.calls[i];
    }
    tokens = t;
  }
  Cache cpu;
  MetalHandle gpu;
  int64_t tokens = 0;
};

class MetalSaveLoad : public ::testing::TestWithParam<Setup> {};

} // namespace

TEST_P(MetalSaveLoad, SavedBytesEqualTheCpuCacheAfterEveryCall) {
  Source src(GetParam());
  Cache cpu(src.setup.cfg);
  MetalHandle gpu;
  gpu.h = metalCache(src.setup.cfg);
  int64_t t = 0;
  for (size_t i = 0; i <= src.calls.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "after " << t << " tokens");
    const std::vector<uint8_t> c = saveBytes(cpu.h),
                               m = savedBytes<MetalApi>(gpu.h);
    ASSERT_EQ(c.size(), m.size());
    uint32_t backend = 0;
    std::memcpy(&backend, m.data() + kBackendField, 4);
    EXPECT_EQ(backend, static_cast<uint32_t>(KVQ_BACKEND_METAL));
    EXPECT_EQ(withBackend(m, KVQ_BACKEND_CPU), c);
    if (i == src.calls.size())
      break;
    src.feed(cpu.h, gpu.h, t, t + src.calls[i]);
    t += src.calls[i];
  }
}

TEST_P(MetalSaveLoad, MetalToMetalEqualsTheSourceAndEvolvesLikeIt) {
  Source src(GetParam());
  for (size_t ncalls : {size_t{1}, size_t{6}, src.calls.size()}) {
    SCOPED_TRACE(testing::Message() << ncalls << " calls");
    Pair p(src, ncalls);
    MetalHandle loaded;
    loaded.h = loadMetal(savedBytes<MetalApi>(p.gpu.h));
    ASSERT_NE(loaded.h, nullptr);
    expectSame(observe<MetalApi>(p.gpu.h), observe<MetalApi>(loaded.h), true);
    // The rest of the tokens, one call, then a single token.
    for (int64_t end : {2 * kTokens - 1, 2 * kTokens}) {
      src.feed(nullptr, p.gpu.h, p.tokens, end);
      src.feed(nullptr, loaded.h, p.tokens, end);
      p.tokens = end;
      expectSame(observe<MetalApi>(p.gpu.h), observe<MetalApi>(loaded.h), true);
    }
  }
}

TEST_P(MetalSaveLoad, MetalToCpuEqualsTheSourceAndEvolvesLikeIt) {
  Source src(GetParam());
  for (size_t ncalls : {size_t{1}, size_t{6}, src.calls.size()}) {
    SCOPED_TRACE(testing::Message() << ncalls << " calls");
    Pair p(src, ncalls);
    std::unique_ptr<kvq_cache_t, void (*)(kvq_cache_t *)> owner(
        loadCpu(savedBytes<MetalApi>(p.gpu.h)), kvq_cache_destroy);
    kvq_cache_t *loaded = owner.get();
    ASSERT_NE(loaded, nullptr);
    // Against the Metal source, and bit for bit against the CPU cache fed
    // the same calls (attention included).
    expectSame(observe<MetalApi>(p.gpu.h), observe<CpuApi>(loaded), false);
    expectSame(observe<CpuApi>(p.cpu.h), observe<CpuApi>(loaded), true);
    for (int64_t end : {2 * kTokens - 1, 2 * kTokens}) {
      src.feed(p.cpu.h, p.gpu.h, p.tokens, end);
      src.feed(loaded, nullptr, p.tokens, end);
      p.tokens = end;
      expectSame(observe<CpuApi>(p.cpu.h), observe<CpuApi>(loaded), true);
    }
  }
}

TEST_P(MetalSaveLoad, CpuToMetalEqualsTheSourceAndEvolvesLikeIt) {
  Source src(GetParam());
  for (size_t ncalls : {size_t{1}, size_t{6}, src.calls.size()}) {
    SCOPED_TRACE(testing::Message() << ncalls << " calls");
    Pair p(src, ncalls);
    MetalHandle loaded;
    loaded.h = loadMetal(saveBytes(p.cpu.h));
    ASSERT_NE(loaded.h, nullptr);
    // Against the CPU source, and bit for bit against the Metal cache fed
    // the same calls (attention included).
    expectSame(observe<CpuApi>(p.cpu.h), observe<MetalApi>(loaded.h), false);
    expectSame(observe<MetalApi>(p.gpu.h), observe<MetalApi>(loaded.h), true);
    for (int64_t end : {2 * kTokens - 1, 2 * kTokens}) {
      src.feed(p.cpu.h, p.gpu.h, p.tokens, end);
      src.feed(nullptr, loaded.h, p.tokens, end);
      p.tokens = end;
      expectSame(observe<MetalApi>(p.gpu.h), observe<MetalApi>(loaded.h), true);
    }
  }
}

TEST_P(MetalSaveLoad, LoadedCacheTruncatesAndForksLikeTheSource) {
  Source src(GetParam());
  Pair p(src, src.calls.size());
  const std::vector<uint8_t> file = savedBytes<MetalApi>(p.gpu.h);
  // Cuts deep in the quantized tokens (refused, or for fp16 taken) and
  // every cut among the last tokens (fp16 window, tokens awaiting a refit).
  std::vector<int64_t> cuts = {0, 1, 7, 20};
  for (int64_t n = p.tokens - 12; n <= p.tokens; ++n)
    cuts.push_back(n);
  int taken = 0;
  for (int64_t n : cuts) {
    SCOPED_TRACE(testing::Message() << "cut " << n);
    MetalHandle a, b, fork;
    a.h = loadMetal(file);
    b.h = loadMetal(file);
    ASSERT_NE(a.h, nullptr);
    ASSERT_EQ(KVQ_OK, kvq_metal_cache_fork(p.gpu.h, &fork.h));
    const kvq_status sa = kvq_metal_cache_truncate(a.h, n),
                     sf = kvq_metal_cache_truncate(fork.h, n);
    ASSERT_EQ(sa, sf) << kvq_last_error();
    if (sa != KVQ_OK)
      expectSame(observe<MetalApi>(b.h), observe<MetalApi>(a.h), true);
    else
      expectSame(observe<MetalApi>(fork.h), observe<MetalApi>(a.h), true);
    taken += sa == KVQ_OK;
  }
  EXPECT_GE(taken, 2); // at least 0 and the length
}

std::string setupName(const ::testing::TestParamInfo<Setup> &i) {
  return i.param.name;
}

INSTANTIATE_TEST_SUITE_P(Methods, MetalSaveLoad, ::testing::ValuesIn(setups()),
                         setupName);

//===----------------------------------------------------------------------===//
// Bad files
//===----------------------------------------------------------------------===//

namespace {

/// A small Metal file of each method: one layer, 20 tokens, some of them
/// quantized.
std::vector<std::vector<uint8_t>> smallFiles() {
  std::vector<std::vector<uint8_t>> files;
  for (const Setup &s : setups()) {
    Setup one = s;
    one.cfg.num_layers = 1;
    Source src(one);
    MetalHandle m;
    m.h = metalCache(one.cfg);
    src.feed(nullptr, m.h, 0, 12);
    src.feed(nullptr, m.h, 12, 20);
    files.push_back(savedBytes<MetalApi>(m.h));
  }
  return files;
}

kvq_status metalLoad(const std::vector<uint8_t> &b, kvq_metal_cache_t **out) {
  // An exact-size copy, so that a read past the end is an ASan error.
  std::vector<uint8_t> copy(b);
  return kvq_metal_cache_load(copy.empty() ? nullptr : copy.data(),
                              static_cast<int64_t>(copy.size()), out);
}

/// Offset of the configuration's head_dim field (the 15th).
constexpr size_t kHeadDimField = 20 + 4 * 14;

void expectCorrupt(const std::vector<uint8_t> &b, const char *needle) {
  kvq_metal_cache_t *out = nullptr;
  EXPECT_EQ(KVQ_ERR_CORRUPT_DATA, metalLoad(b, &out));
  EXPECT_EQ(out, nullptr);
  const std::string msg = kvq_last_error();
  EXPECT_NE(msg.find("kvq_metal_cache_load"), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  kvq_metal_cache_destroy(out);
}

} // namespace

TEST(MetalSaveLoadBadFile, EveryPrefixIsRejected) {
  for (const std::vector<uint8_t> &file : smallFiles())
    for (size_t n = 0; n < file.size(); ++n) {
      kvq_metal_cache_t *out = nullptr;
      ASSERT_EQ(
          KVQ_ERR_CORRUPT_DATA,
          metalLoad(std::vector<uint8_t>(file.begin(), file.begin() + (long)n),
                    &out))
          << "prefix " << n;
      ASSERT_EQ(out, nullptr);
    }
}

TEST(MetalSaveLoadBadFile, HeaderVersionAndChecksum) {
  const std::vector<uint8_t> file = smallFiles()[1];
  struct Case {
    const char *needle;
    size_t at;
    uint64_t value;
    int bytes;
    bool resealed;
  } cases[] = {
      {"magic", 0, 'X', 1, false},
      {"format version 3", 8, 3, 4, true},
      {"checksum", file.size() - 1, file.back() ^ 1u, 1, false},
      {"checksum", 200, file[200] ^ 4u, 1, false}, // payload, old checksum
      {"backend", kBackendField, 7, 4, true},
      {"layer 1", 20 + 4 * 12, 3, 4, true}, // layers the file does not hold
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.needle);
    std::vector<uint8_t> b = file;
    put(b, c.at, c.value, c.bytes);
    if (c.resealed)
      reseal(b);
    expectCorrupt(b, c.needle);
  }
  std::vector<uint8_t> longer = file;
  longer.push_back(0);
  expectCorrupt(longer, "truncated or extended");
}

// Every byte flipped (two bits each) and re-sealed, so that the semantic
// checks decide: the Metal loader gives the CPU loader's status and
// message, and a file both accept re-saves to itself from either backend.
TEST(MetalSaveLoadBadFile, EveryResealedFlipGetsTheCpuLoadersVerdict) {
  int accepted = 0, rejected = 0;
  for (const std::vector<uint8_t> &file : smallFiles())
    for (size_t i = 0; i + 8 < file.size(); ++i) {
      if (i >= 12 && i < 18)
        continue; // the writer's kvq version: informational, not re-saved
      for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::vector<uint8_t> b = file;
        b[i] ^= bit;
        reseal(b);
        kvq_cache_t *cpu = nullptr;
        const kvq_status sc =
            kvq_cache_load(b.data(), (int64_t)b.size(), nullptr, &cpu);
        const std::string cpuMsg = kvq_last_error();
        kvq_metal_cache_t *gpu = nullptr;
        const kvq_status sg = metalLoad(b, &gpu);
        const std::string gpuMsg = kvq_last_error();
        if (i >= kHeadDimField && i < kHeadDimField + 4 &&
            sg == KVQ_ERR_INVALID_ARGUMENT) {
          // A head_dim past the Metal kernel's is refused before the
          // layers are read (documented), whatever the CPU says of them.
          ASSERT_NE(gpuMsg.find("head_dim <= 256"), std::string::npos);
          ASSERT_EQ(gpu, nullptr);
          kvq_cache_destroy(cpu);
          ++rejected;
          continue;
        }
        ASSERT_EQ(sc, sg) << "byte " << i << ": " << gpuMsg;
        if (sc != KVQ_OK) {
          ++rejected;
          ASSERT_EQ(gpu, nullptr);
          ASSERT_EQ(cpuMsg.substr(cpuMsg.find(':')),
                    gpuMsg.substr(gpuMsg.find(':')))
              << "byte " << i;
          continue;
        }
        ++accepted;
        const std::vector<uint8_t> again = savedBytes<MetalApi>(gpu);
        ASSERT_EQ(withBackend(again, KVQ_BACKEND_METAL),
                  withBackend(b, KVQ_BACKEND_METAL))
            << "byte " << i;
        ASSERT_EQ(withBackend(saveBytes(cpu), KVQ_BACKEND_METAL),
                  withBackend(b, KVQ_BACKEND_METAL))
            << "byte " << i;
        kvq_cache_destroy(cpu);
        kvq_metal_cache_destroy(gpu);
      }
    }
  // Both kinds occur (codes flip freely; counts and fp16 rows do not).
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

TEST(MetalSaveLoadErrors, ArgumentsAndBufferConventions) {
  const std::vector<uint8_t> file = smallFiles()[1];
  kvq_metal_cache_t *out = nullptr;
  EXPECT_EQ(KVQ_ERR_NULL_POINTER,
            kvq_metal_cache_load(file.data(), (int64_t)file.size(), nullptr));
  EXPECT_EQ(KVQ_ERR_NULL_POINTER, kvq_metal_cache_load(nullptr, 4, &out));
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT,
            kvq_metal_cache_load(file.data(), -1, &out));
  EXPECT_EQ(KVQ_ERR_CORRUPT_DATA, kvq_metal_cache_load(nullptr, 0, &out));
  EXPECT_EQ(out, nullptr);
  MetalHandle m;
  m.h = loadMetal(file);
  int64_t size = 0;
  EXPECT_EQ(KVQ_ERR_NULL_POINTER,
            kvq_metal_cache_save(nullptr, nullptr, 0, &size));
  EXPECT_EQ(KVQ_ERR_NULL_POINTER,
            kvq_metal_cache_save(m.h, nullptr, 0, nullptr));
  ASSERT_EQ(KVQ_OK, kvq_metal_cache_save(m.h, nullptr, 12345, &size));
  EXPECT_EQ(size, static_cast<int64_t>(file.size()));
  std::vector<uint8_t> small(file.size() - 1, 0xa5);
  size = 0;
  EXPECT_EQ(KVQ_ERR_BUFFER_TOO_SMALL,
            kvq_metal_cache_save(m.h, small.data(),
                                 static_cast<int64_t>(small.size()), &size));
  EXPECT_EQ(size, static_cast<int64_t>(file.size()));
  EXPECT_EQ(small, std::vector<uint8_t>(file.size() - 1, 0xa5));
}

TEST(MetalSaveLoadErrors, HeadDimBeyondTheMetalKernelIsInvalid) {
  kvq_config cfg = config(KVQ_METHOD_KIVI, 1, 512);
  Cache cpu(cfg);
  KV kv = gaussianKV(3, 4, 1, 512);
  ASSERT_EQ(KVQ_OK, append(cpu.h, kv, 0, 4));
  const std::vector<uint8_t> file = saveBytes(cpu.h);
  kvq_metal_cache_t *out = nullptr;
  EXPECT_EQ(KVQ_ERR_INVALID_ARGUMENT, metalLoad(file, &out));
  EXPECT_EQ(out, nullptr);
  EXPECT_NE(std::string(kvq_last_error()).find("head_dim"), std::string::npos);
}
