//===- reference_model.cpp - float64 llama2.c forward pass for tests ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Written straight from the checkpoint format and forward pass in
// models/README.md, deliberately plain (loops, no SIMD) so it can be checked
// by reading. Sums run in index order; build with -ffp-contract=off so the
// results do not depend on FMA contraction.
//
//===----------------------------------------------------------------------===//
#include "reference_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kvqtest {

namespace {

bool readAll(const std::string &path, std::vector<unsigned char> &bytes,
             std::string &err) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    bytes.insert(bytes.end(), buf, buf + n);
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed)
    err = "cannot read '" + path + "'";
  return !failed;
}

int32_t readI32(const unsigned char *p) {
  uint32_t v = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
               uint32_t(p[3]) << 24;
  return static_cast<int32_t>(v);
}

double readF32(const unsigned char *p) {
  uint32_t v = static_cast<uint32_t>(readI32(p));
  float f;
  std::memcpy(&f, &v, sizeof(f));
  return f;
}

/// y[o] = sum_i w[o * in + i] * x[i].
void matvec(const double *w, const double *x, double *y, int out, int in) {
  for (int o = 0; o < out; ++o) {
    double s = 0;
    for (int i = 0; i < in; ++i)
      s += w[size_t(o) * in + i] * x[i];
    y[o] = s;
  }
}

void rmsnorm(const double *x, const double *w, double *y, int n) {
  double ss = 0;
  for (int i = 0; i < n; ++i)
    ss += x[i] * x[i];
  double scale = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int i = 0; i < n; ++i)
    y[i] = x[i] * scale * w[i];
}

/// Interleaved pairs: channels (2i, 2i+1) of each head rotate by
/// pos * 10000^(-2i/headDim).
void rope(double *v, int heads, int headDim, int pos) {
  for (int h = 0; h < heads; ++h) {
    double *x = v + size_t(h) * headDim;
    for (int i = 0; i < headDim / 2; ++i) {
      double angle = pos * std::pow(10000.0, -2.0 * i / headDim);
      double c = std::cos(angle), s = std::sin(angle);
      double a = x[2 * i], b = x[2 * i + 1];
      x[2 * i] = a * c - b * s;
      x[2 * i + 1] = a * s + b * c;
    }
  }
}

} // namespace

std::optional<ReferenceModel> ReferenceModel::load(const std::string &path,
                                                   std::string *error) {
  std::string localErr;
  std::string &err = error ? *error : localErr;
  std::vector<unsigned char> bytes;
  if (!readAll(path, bytes, err))
    return std::nullopt;
  auto fail = [&](const std::string &msg) {
    err = "checkpoint '" + path + "': " + msg;
    return std::nullopt;
  };
  if (bytes.size() < 28)
    return fail("shorter than the 28-byte header");

  ReferenceModel m;
  ReferenceConfig &c = m.cfg;
  int32_t h[7];
  for (int i = 0; i < 7; ++i)
    h[i] = readI32(&bytes[4 * i]);
  c.dim = h[0];
  c.hiddenDim = h[1];
  c.nLayers = h[2];
  c.nHeads = h[3];
  c.nKvHeads = h[4];
  c.sharedClassifier = h[5] > 0;
  c.vocabSize = h[5] == INT32_MIN ? 0 : std::abs(h[5]);
  c.seqLen = h[6];
  // Bounds keep every size product below 2^62.
  const int32_t kMax = 1 << 20;
  for (int i = 0; i < 7; ++i) {
    int32_t v = i == 5 ? c.vocabSize : h[i];
    if (v <= 0 || v > kMax)
      return fail("header field " + std::to_string(i) + " = " +
                  std::to_string(h[i]) + " out of range");
  }
  if (c.dim % c.nHeads != 0 || c.nHeads % c.nKvHeads != 0 ||
      (c.dim / c.nHeads) % 2 != 0)
    return fail("dim, n_heads, n_kv_heads do not give whole, even heads");
  c.headDim = c.dim / c.nHeads;

  const int64_t dim = c.dim, hid = c.hiddenDim, L = c.nLayers,
                kvDim = int64_t(c.nKvHeads) * c.headDim, V = c.vocabSize;
  const int64_t counts[] = {V * dim,
                            L * dim,
                            L * dim * dim,
                            L * kvDim * dim,
                            L * kvDim * dim,
                            L * dim * dim,
                            L * dim,
                            L * hid * dim,
                            L * dim * hid,
                            L * hid * dim,
                            dim,
                            int64_t(c.seqLen) * c.headDim,
                            c.sharedClassifier ? 0 : V * dim};
  int64_t floats = 0;
  for (int64_t n : counts) {
    if (n > (int64_t(1) << 40))
      return fail("tensor too large");
    floats += n;
  }
  int64_t expected = 28 + 4 * floats;
  if (int64_t(bytes.size()) != expected)
    return fail("size " + std::to_string(bytes.size()) +
                " bytes, header implies " + std::to_string(expected));

  const unsigned char *p = bytes.data() + 28;
  auto take = [&](std::vector<double> &dst, int64_t n) {
    dst.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i, p += 4)
      dst[size_t(i)] = readF32(p);
  };
  take(m.embedding, counts[0]);
  take(m.attnNorm, counts[1]);
  take(m.wq, counts[2]);
  take(m.wk, counts[3]);
  take(m.wv, counts[4]);
  take(m.wo, counts[5]);
  take(m.ffnNorm, counts[6]);
  take(m.w1, counts[7]);
  take(m.w2, counts[8]);
  take(m.w3, counts[9]);
  take(m.finalNorm, counts[10]);
  p += 4 * counts[11]; // Legacy RoPE tables: recomputed instead.
  if (!c.sharedClassifier)
    take(m.classifier, counts[12]);

  m.keyCache.assign(size_t(L * c.seqLen * kvDim), 0.0);
  m.valueCache.assign(m.keyCache.size(), 0.0);
  return m;
}

size_t ReferenceModel::kvOffset(int layer, int pos) const {
  size_t kvDim = size_t(cfg.nKvHeads) * cfg.headDim;
  return (size_t(layer) * cfg.seqLen + pos) * kvDim;
}

std::vector<double> ReferenceModel::key(int layer, int pos) const {
  if (layer < 0 || layer >= cfg.nLayers || pos < 0 || pos >= filled)
    return {};
  const double *r = keyCache.data() + kvOffset(layer, pos);
  return {r, r + size_t(cfg.nKvHeads) * cfg.headDim};
}

std::vector<double> ReferenceModel::value(int layer, int pos) const {
  if (layer < 0 || layer >= cfg.nLayers || pos < 0 || pos >= filled)
    return {};
  const double *r = valueCache.data() + kvOffset(layer, pos);
  return {r, r + size_t(cfg.nKvHeads) * cfg.headDim};
}

std::vector<double> ReferenceModel::forward(int token, int pos) {
  if (token < 0 || token >= cfg.vocabSize || pos < 0 || pos >= cfg.seqLen ||
      pos > filled)
    return {};
  const int dim = cfg.dim, hd = cfg.headDim, H = cfg.nHeads, KV = cfg.nKvHeads,
            hid = cfg.hiddenDim;
  const int kvDim = KV * hd, group = H / KV;

  std::vector<double> x(embedding.begin() + size_t(token) * dim,
                        embedding.begin() + size_t(token + 1) * dim);
  std::vector<double> h(dim), q(dim), att(dim), o(dim), scores(pos + 1), g(hid),
      u(hid);
  for (int l = 0; l < cfg.nLayers; ++l) {
    rmsnorm(x.data(), &attnNorm[size_t(l) * dim], h.data(), dim);
    double *k = keyCache.data() + kvOffset(l, pos);
    double *v = valueCache.data() + kvOffset(l, pos);
    matvec(&wq[size_t(l) * dim * dim], h.data(), q.data(), dim, dim);
    matvec(&wk[size_t(l) * kvDim * dim], h.data(), k, kvDim, dim);
    matvec(&wv[size_t(l) * kvDim * dim], h.data(), v, kvDim, dim);
    rope(q.data(), H, hd, pos);
    rope(k, KV, hd, pos);

    // Query head qh reads KV head qh / group, causally over 0..pos.
    for (int qh = 0; qh < H; ++qh) {
      const double *qv = &q[size_t(qh) * hd];
      int kh = qh / group;
      double mx = -INFINITY;
      for (int t = 0; t <= pos; ++t) {
        const double *kt = (keyCache.data() + kvOffset(l, t)) + size_t(kh) * hd;
        double s = 0;
        for (int i = 0; i < hd; ++i)
          s += qv[i] * kt[i];
        scores[t] = s / std::sqrt(double(hd));
        mx = std::max(mx, scores[t]);
      }
      double sum = 0;
      for (int t = 0; t <= pos; ++t)
        sum += scores[t] = std::exp(scores[t] - mx);
      double *out = &att[size_t(qh) * hd];
      for (int i = 0; i < hd; ++i)
        out[i] = 0;
      for (int t = 0; t <= pos; ++t) {
        const double *vt =
            (valueCache.data() + kvOffset(l, t)) + size_t(kh) * hd;
        double w = scores[t] / sum;
        for (int i = 0; i < hd; ++i)
          out[i] += w * vt[i];
      }
    }
    matvec(&wo[size_t(l) * dim * dim], att.data(), o.data(), dim, dim);
    for (int i = 0; i < dim; ++i)
      x[i] += o[i];

    rmsnorm(x.data(), &ffnNorm[size_t(l) * dim], h.data(), dim);
    matvec(&w1[size_t(l) * hid * dim], h.data(), g.data(), hid, dim);
    matvec(&w3[size_t(l) * hid * dim], h.data(), u.data(), hid, dim);
    for (int i = 0; i < hid; ++i)
      g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i]; // silu(w1 h) * (w3 h)
    matvec(&w2[size_t(l) * dim * hid], g.data(), o.data(), dim, hid);
    for (int i = 0; i < dim; ++i)
      x[i] += o[i];
  }
  filled = pos + 1;

  rmsnorm(x.data(), finalNorm.data(), h.data(), dim);
  std::vector<double> logits(cfg.vocabSize);
  const std::vector<double> &cls =
      cfg.sharedClassifier ? embedding : classifier;
  matvec(cls.data(), h.data(), logits.data(), cfg.vocabSize, dim);
  return logits;
}

} // namespace kvqtest
