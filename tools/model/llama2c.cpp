//===- llama2c.cpp - llama2.c checkpoints ---------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "tools/model/llama2c.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace kvq::model {

namespace {
// Bounds far above any released llama2.c-format model, low enough that every
// size product below fits int64 with room to spare.
constexpr int32_t kMaxDim = 1 << 16;
constexpr int32_t kMaxHidden = 1 << 18;
constexpr int32_t kMaxLayers = 1 << 10;
constexpr int32_t kMaxVocab = 1 << 21;
constexpr int32_t kMaxSeqLen = 1 << 20;

bool fail(std::string *error, const std::string &message) {
  if (error)
    *error = message;
  return false;
}
} // namespace

bool checkModelShape(const Llama2cConfig &c, const ShapeFieldNames &names,
                     std::string *error) {
  const std::string prefix = names.source + std::string(": ");
  auto range = [&](const char *name, int64_t v, int64_t max) {
    if (v > 0 && v <= max)
      return true;
    return fail(error, prefix + name + " " + std::to_string(v) +
                           " is not in [1, " + std::to_string(max) + "]");
  };
  if (!range(names.dim, c.dim, kMaxDim) ||
      !range(names.hiddenDim, c.hiddenDim, kMaxHidden) ||
      !range(names.layers, c.layers, kMaxLayers) ||
      !range(names.heads, c.heads, c.dim) ||
      !range(names.kvHeads, c.kvHeads, c.heads) ||
      !range(names.vocab, c.vocab, kMaxVocab) ||
      !range(names.seqLen, c.seqLen, kMaxSeqLen))
    return false;
  if (c.explicitHeadDim == 0 && c.dim % c.heads != 0)
    return fail(error, prefix + names.heads + " " + std::to_string(c.heads) +
                           " does not divide " + names.dim + " " +
                           std::to_string(c.dim));
  if (c.explicitHeadDim != 0 && !range("head_dim", c.explicitHeadDim, kMaxDim))
    return false;
  if (int64_t(c.qDim()) > kMaxDim)
    return fail(error, prefix + names.heads + " x head_dim " +
                           std::to_string(int64_t(c.heads) * c.headDim()) +
                           " exceeds " + std::to_string(kMaxDim));
  if (c.heads % c.kvHeads != 0)
    return fail(error, prefix + names.kvHeads + " " +
                           std::to_string(c.kvHeads) + " does not divide " +
                           names.heads + " " + std::to_string(c.heads));
  if (c.headDim() % 2 != 0)
    return fail(error, prefix + "head_dim " + std::to_string(c.headDim()) +
                           " is odd; RoPE rotates channel pairs");
  return true;
}

std::optional<Llama2cConfig> parseLlama2cHeader(const int32_t h[7],
                                                std::string *error) {
  Llama2cConfig c;
  c.dim = h[0];
  c.hiddenDim = h[1];
  c.layers = h[2];
  c.heads = h[3];
  c.kvHeads = h[4];
  c.sharedClassifier = h[5] > 0;
  c.vocab = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.seqLen = h[6];
  static const ShapeFieldNames names = {
      "llama2.c header", "dim",        "hidden_dim", "n_layers",
      "n_heads",         "n_kv_heads", "vocab_size", "seq_len"};
  if (!checkModelShape(c, names, error))
    return std::nullopt;
  return c;
}

std::vector<double> ropeInverseFrequencies(const Llama2cConfig &c) {
  const int64_t d = c.headDim();
  const RopeScaling &s = c.ropeScaling;
  std::vector<double> f(size_t(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    double inv = std::pow(double(c.ropeTheta), -2.0 * double(i) / double(d));
    if (s.kind == RopeScaling::Kind::Linear) {
      inv /= s.factor;
    } else if (s.kind == RopeScaling::Kind::Llama3) {
      // Wavelengths above original / low_freq_factor are divided by the
      // factor, those below original / high_freq_factor kept, and those
      // between interpolated by original / wavelength.
      const double wavelength = 2 * M_PI / inv;
      const double ratio = double(s.originalContext) / wavelength;
      if (ratio < s.lowFreqFactor) {
        inv /= s.factor;
      } else if (ratio <= s.highFreqFactor) {
        double smooth =
            (ratio - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv = (1 - smooth) * inv / s.factor + smooth * inv;
      }
    }
    f[size_t(i)] = inv;
  }
  return f;
}

Llama2cLayout llama2cLayout(const Llama2cConfig &c) {
  const int64_t dim = c.dim, hidden = c.hiddenDim, layers = c.layers;
  const int64_t qDim = c.qDim(), kvDim = c.kvDim(), headDim = c.headDim();
  Llama2cLayout l;
  int64_t at = 0;
  auto take = [&](int64_t floats) {
    int64_t start = at;
    at += floats;
    return start;
  };
  l.embedding = take(int64_t(c.vocab) * dim);
  l.attnNorm = take(layers * dim);
  l.wq = take(layers * qDim * dim);
  l.wk = take(layers * kvDim * dim);
  l.wv = take(layers * kvDim * dim);
  l.wo = take(layers * dim * qDim);
  l.ffnNorm = take(layers * dim);
  l.w1 = take(layers * hidden * dim);
  l.w2 = take(layers * dim * hidden);
  l.w3 = take(layers * hidden * dim);
  l.finalNorm = take(dim);
  if (c.legacyRopeTables)
    take(int64_t(c.seqLen) * headDim); // legacy RoPE tables (cos and sin),
                                       // unused: RoPE is recomputed
  l.classifier =
      c.sharedClassifier ? l.embedding : take(int64_t(c.vocab) * dim);
  if (c.qkvBias) {
    l.bq = take(layers * qDim);
    l.bk = take(layers * kvDim);
    l.bv = take(layers * kvDim);
  }
  if (c.outBias)
    l.bo = take(layers * dim);
  l.total = at;
  return l;
}

std::vector<Llama2cTensor> llama2cTensors(const Llama2cConfig &c,
                                           const Llama2cLayout &l) {
  const int64_t dim = c.dim, hidden = c.hiddenDim, kvDim = c.kvDim();
  const int64_t qDim = c.qDim();
  std::vector<Llama2cTensor> t = {
      {"token_embedding_table", l.embedding, int64_t(c.vocab) * dim, false},
      {"rms_att_weight", l.attnNorm, dim, true},
      {"wq", l.wq, qDim * dim, true},
      {"wk", l.wk, kvDim * dim, true},
      {"wv", l.wv, kvDim * dim, true},
      {"wo", l.wo, dim * qDim, true},
      {"rms_ffn_weight", l.ffnNorm, dim, true},
      {"w1", l.w1, hidden * dim, true},
      {"w2", l.w2, dim * hidden, true},
      {"w3", l.w3, hidden * dim, true},
      {"rms_final_weight", l.finalNorm, dim, false},
  };
  if (!c.sharedClassifier)
    t.push_back({"wcls", l.classifier, int64_t(c.vocab) * dim, false});
  if (c.qkvBias) {
    t.push_back({"bq", l.bq, qDim, true});
    t.push_back({"bk", l.bk, kvDim, true});
    t.push_back({"bv", l.bv, kvDim, true});
  }
  if (c.outBias)
    t.push_back({"bo", l.bo, dim, true});
  return t;
}

std::string findNonFiniteWeight(const Llama2cConfig &config,
                                const Llama2cLayout &layout,
                                const float *weights) {
  for (const Llama2cTensor &t : llama2cTensors(config, layout)) {
    const float *w = weights + t.offset;
    const int64_t n = t.elements * (t.perLayer ? config.layers : 1);
    // One pass over the exponent bits (it vectorizes); the element is
    // looked for only in a tensor that holds one.
    uint32_t exponents = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, w + i, 4);
      exponents = std::max(exponents, bits & 0x7f800000u);
    }
    if (exponents != 0x7f800000u)
      continue;
    int64_t i = 0;
    while (std::isfinite(w[i]))
      ++i;
    std::string where = std::string("weight ") + t.name;
    if (t.perLayer)
      where += " of layer " + std::to_string(i / t.elements) + ", element " +
               std::to_string(i % t.elements);
    else
      where += ", element " + std::to_string(i);
    return where + " is " + (std::isnan(w[i]) ? "NaN" : "infinite") +
           " (every weight must be finite)";
  }
  return "";
}

struct Llama2cCheckpoint::Mapping {
  void *base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base)
      munmap(base, bytes);
  }
};

Llama2cCheckpoint::~Llama2cCheckpoint() = default;
Llama2cCheckpoint::Llama2cCheckpoint(Llama2cCheckpoint &&) = default;
Llama2cCheckpoint &Llama2cCheckpoint::operator=(Llama2cCheckpoint &&) = default;

Llama2cCheckpoint Llama2cCheckpoint::fromWeights(const Llama2cConfig &config,
                                                 std::vector<float> weights) {
  Llama2cCheckpoint ckpt;
  ckpt.config_ = config;
  ckpt.layout_ = llama2cLayout(config);
  ckpt.owned_ = std::move(weights);
  return ckpt;
}

Llama2cCheckpoint
Llama2cCheckpoint::fromNarrowWeights(const Llama2cConfig &config,
                                     std::vector<uint16_t> bits,
                                     Storage storage) {
  Llama2cCheckpoint ckpt;
  ckpt.config_ = config;
  ckpt.layout_ = llama2cLayout(config);
  ckpt.narrow_ = std::move(bits);
  ckpt.storage_ = storage;
  return ckpt;
}

int64_t Llama2cCheckpoint::heldWeightBytes() const {
  int64_t bytes = int64_t(owned_.size()) * 4 + int64_t(narrow_.size()) * 2;
  if (mapping_)
    bytes += layout_.total * 4;
  return bytes;
}

const float *Llama2cCheckpoint::weights() const {
  if (storage_ != Storage::F32 && owned_.size() != narrow_.size()) {
    owned_.resize(narrow_.size());
    for (size_t i = 0; i < narrow_.size(); ++i) {
      if (storage_ == Storage::BF16) {
        uint32_t u = uint32_t(narrow_[i]) << 16;
        std::memcpy(&owned_[i], &u, 4);
      } else {
        // IEEE half: sign, 5-bit exponent (bias 15), 10-bit mantissa.
        const uint16_t h = narrow_[i];
        const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        float v = e == 0    ? std::ldexp(float(m), -24)
                  : e == 31 ? (m ? NAN : INFINITY)
                            : std::ldexp(float(m | 0x400), e - 25);
        owned_[i] = (h & 0x8000) ? -v : v;
      }
    }
  }
  if (!mapping_)
    return owned_.data();
  return reinterpret_cast<const float *>(
      static_cast<const char *>(mapping_->base) + kLlama2cHeaderBytes);
}

std::optional<Llama2cCheckpoint>
Llama2cCheckpoint::open(const std::string &path, std::string *error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(error, path + ": " + std::strerror(errno));
    return std::nullopt;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(error, path + ": not a regular file");
    return std::nullopt;
  }
  int32_t header[7];
  if (st.st_size < kLlama2cHeaderBytes ||
      pread(fd, header, sizeof(header), 0) != ssize_t(sizeof(header))) {
    ::close(fd);
    fail(error, path + ": shorter than the 28-byte llama2.c header");
    return std::nullopt;
  }
  std::string why;
  std::optional<Llama2cConfig> config = parseLlama2cHeader(header, &why);
  if (!config) {
    ::close(fd);
    fail(error, path + ": " + why);
    return std::nullopt;
  }
  Llama2cLayout layout = llama2cLayout(*config);
  int64_t need = kLlama2cHeaderBytes + layout.total * int64_t(sizeof(float));
  if (st.st_size != need) {
    ::close(fd);
    // Extra bytes are refused too: a file that is not exactly what its
    // header describes was written for another shape.
    fail(error, path + ": " + std::to_string(st.st_size) +
                    " bytes, but its header describes exactly " +
                    std::to_string(need) +
                    (st.st_size > need
                         ? ": " + std::to_string(st.st_size - need) +
                               (st.st_size - need == 1 ? " byte follows"
                                                       : " bytes follow") +
                               " the weights"
                         : std::string(": the weights are truncated")));
    return std::nullopt;
  }
  void *base = mmap(nullptr, size_t(need), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    fail(error, path + ": mmap: " + std::strerror(errno));
    return std::nullopt;
  }
  Llama2cCheckpoint ckpt;
  ckpt.mapping_ = std::make_unique<Mapping>();
  ckpt.mapping_->base = base;
  ckpt.mapping_->bytes = size_t(need);
  ckpt.config_ = *config;
  ckpt.layout_ = layout;
  std::string bad = findNonFiniteWeight(*config, layout, ckpt.weights());
  if (!bad.empty()) {
    fail(error, path + ": " + bad);
    return std::nullopt;
  }
  return ckpt;
}

bool writeRandomLlama2c(const std::string &path, const Llama2cConfig &config,
                        uint64_t seed, float scale, std::string *error) {
  Llama2cLayout layout = llama2cLayout(config);
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return fail(error, path + ": " + std::strerror(errno));
  int32_t header[7] = {
      config.dim,     config.hiddenDim,
      config.layers,  config.heads,
      config.kvHeads, config.sharedClassifier ? config.vocab : -config.vocab,
      config.seqLen};
  bool ok = std::fwrite(header, sizeof(header), 1, f) == 1;
  // Norm weights are 1 so activations keep a realistic scale.
  auto isNorm = [&](int64_t i) {
    return (i >= layout.attnNorm && i < layout.wq) ||
           (i >= layout.ffnNorm && i < layout.w1) ||
           (i >= layout.finalNorm && i < layout.finalNorm + config.dim);
  };
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<float> chunk(1 << 16);
  for (int64_t i = 0; ok && i < layout.total;) {
    size_t n =
        size_t(std::min<int64_t>(int64_t(chunk.size()), layout.total - i));
    for (size_t j = 0; j < n; ++j, ++i) {
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      uint64_t r = state * 0x2545F4914F6CDD1Dull;
      float u = float(r >> 40) * (1.0f / 16777216.0f); // [0, 1)
      chunk[j] = isNorm(i) ? 1.0f : (2.0f * u - 1.0f) * scale;
    }
    ok = std::fwrite(chunk.data(), sizeof(float), n, f) == n;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok)
    return fail(error, path + ": write failed");
  return true;
}

} // namespace kvq::model
