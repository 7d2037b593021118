//===- DumpKv.cpp - kvq-run --dump-kv -------------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/DumpKv.h"

#include "tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

namespace kvq::run {
namespace {

float halfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof(h));
  return static_cast<float>(h);
}

float bf16ToFloat(uint16_t bits) {
  uint32_t w = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &w, sizeof(f));
  return f;
}

/// The weights the graph read, element i widened to float.
struct Weights {
  const void *data;
  kvq_weight_type type;
  float operator[](int64_t i) const {
    switch (type) {
    case KVQ_WEIGHT_F16:
      return halfToFloat(static_cast<const uint16_t *>(data)[i]);
    case KVQ_WEIGHT_BF16:
      return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
    default:
      return static_cast<const float *>(data)[i];
    }
  }
};

/// out[r] = sum_c W[base + r * cols + c] * x[c] (+ bias[r]), accumulated in
/// double.
void matvec(const Weights &w, int64_t base, int64_t rows, int64_t cols,
            const float *x, float *out, int64_t bias) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += double(w[base + r * cols + c]) * double(x[c]);
    if (bias >= 0)
      s += double(w[bias + r]);
    out[r] = float(s);
  }
}

void rmsnorm(const Weights &w, int64_t base, const float *x, float *out,
             int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i)
    ss += double(x[i]) * double(x[i]);
  double scale = 1.0 / std::sqrt(ss / double(n) + double(eps));
  for (int64_t i = 0; i < n; ++i)
    out[i] = float(double(x[i]) * scale * double(w[base + i]));
}

/// Rotates `heads` rows of `d` channels at position `pos`.
void rope(float *v, int64_t heads, int64_t d, int64_t pos,
          const std::vector<double> &inv, bool half) {
  for (int64_t h = 0; h < heads; ++h) {
    float *row = v + h * d;
    for (int64_t i = 0; i < d / 2; ++i) {
      double a = double(pos) * inv[size_t(i)];
      double c = std::cos(a), s = std::sin(a);
      int64_t i0 = half ? i : 2 * i, i1 = half ? i + d / 2 : 2 * i + 1;
      double x0 = row[i0], x1 = row[i1];
      row[i0] = float(x0 * c - x1 * s);
      row[i1] = float(x0 * s + x1 * c);
    }
  }
}

std::string str(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

} // namespace

bool dumpKv(const CompiledModel &compiled,
            const model::Llama2cCheckpoint &ckpt,
            const std::vector<int32_t> &tokens, const std::string &path,
            const std::string &modelName, std::string *error) {
  const model::Llama2cConfig &c = ckpt.config();
  const model::Llama2cLayout &lay = ckpt.layout();
  const Weights w{compiled.weights(), compiled.weightType()};
  const int64_t T = int64_t(tokens.size()), L = c.layers, H = c.heads,
                KV = c.kvHeads, D = c.headDim(), dim = c.dim,
                hidden = c.hiddenDim, qDim = c.qDim(), kvDim = c.kvDim();
  const bool half = c.ropePairs == model::RopePairs::Half;
  const std::vector<double> inv = model::ropeInverseFrequencies(c);

  std::vector<float> keys(size_t(L * T * kvDim)), values(keys.size()),
      pre(keys.size()), queries(size_t(L * T * qDim));
  // The run's cache: post-RoPE keys and values.
  for (int64_t l = 0; l < L; ++l) {
    std::vector<float> k, v;
    int64_t n = T;
    if (!compiled.fetchLayer(l, k, v, &n, error))
      return false;
    if (n != T || int64_t(k.size()) != T * kvDim) {
      *error = "--dump-kv: layer " + std::to_string(l) + " caches " +
               std::to_string(n) + " tokens, expected " + std::to_string(T);
      return false;
    }
    std::copy(k.begin(), k.end(), keys.begin() + l * T * kvDim);
    std::copy(v.begin(), v.end(), values.begin() + l * T * kvDim);
  }

  // The f32 forward pass, all tokens of a layer before the next layer.
  std::vector<float> x(size_t(T * dim));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < dim; ++i)
      x[size_t(t * dim + i)] = w[lay.embedding + int64_t(tokens[t]) * dim + i];
  std::vector<float> xb(dim), q(qDim), kpost(size_t(T * kvDim)),
      vv(size_t(T * kvDim)), att(qDim), o(dim), h1(hidden), h3(hidden);
  std::vector<double> scores(static_cast<size_t>(T));
  const double scale = 1.0 / std::sqrt(double(D));
  double worst = 0, largest = 0;
  for (int64_t l = 0; l < L; ++l) {
    float *Q = queries.data() + l * T * qDim;
    float *Kpre = pre.data() + l * T * kvDim;
    for (int64_t t = 0; t < T; ++t) {
      rmsnorm(w, lay.attnNorm + l * dim, &x[size_t(t * dim)], xb.data(), dim,
              c.normEps);
      matvec(w, lay.wq + l * qDim * dim, qDim, dim, xb.data(), Q + t * qDim,
             c.qkvBias ? lay.bq + l * qDim : -1);
      matvec(w, lay.wk + l * kvDim * dim, kvDim, dim, xb.data(),
             Kpre + t * kvDim, c.qkvBias ? lay.bk + l * kvDim : -1);
      matvec(w, lay.wv + l * kvDim * dim, kvDim, dim, xb.data(),
             &vv[size_t(t * kvDim)], c.qkvBias ? lay.bv + l * kvDim : -1);
      std::copy(Kpre + t * kvDim, Kpre + (t + 1) * kvDim,
                kpost.begin() + t * kvDim);
      rope(Q + t * qDim, H, D, t, inv, half);
      rope(&kpost[size_t(t * kvDim)], KV, D, t, inv, half);
    }
    // The recomputed keys and values against the run's.
    const float *runK = keys.data() + l * T * kvDim;
    const float *runV = values.data() + l * T * kvDim;
    for (int64_t i = 0; i < T * kvDim; ++i) {
      worst = std::max({worst, std::fabs(double(runK[i]) - kpost[size_t(i)]),
                        std::fabs(double(runV[i]) - vv[size_t(i)])});
      largest = std::max({largest, std::fabs(double(runK[i])),
                          std::fabs(double(runV[i]))});
    }
    if (!(worst <= 1e-3 * std::max(1.0, largest))) {
      *error = "--dump-kv: the recomputed keys/values of layer " +
               std::to_string(l) + " differ from the run's cache by " +
               str(worst) + " (largest magnitude " + str(largest) + ")";
      return false;
    }
    if (l + 1 == L)
      break;
    // Attention (causal), output projection, FFN, using the run's cache.
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const float *qh = Q + t * qDim + h * D;
        int64_t g = h / (H / KV);
        double mx = -INFINITY;
        for (int64_t s = 0; s <= t; ++s) {
          const float *kh = runK + s * kvDim + g * D;
          double d = 0;
          for (int64_t i = 0; i < D; ++i)
            d += double(qh[i]) * double(kh[i]);
          scores[size_t(s)] = d * scale;
          mx = std::max(mx, scores[size_t(s)]);
        }
        double sum = 0;
        for (int64_t s = 0; s <= t; ++s)
          sum += scores[size_t(s)] = std::exp(scores[size_t(s)] - mx);
        for (int64_t i = 0; i < D; ++i) {
          double a = 0;
          for (int64_t s = 0; s <= t; ++s)
            a += scores[size_t(s)] * double(runV[s * kvDim + g * D + i]);
          att[size_t(h * D + i)] = float(a / sum);
        }
      }
      matvec(w, lay.wo + l * dim * qDim, dim, qDim, att.data(), o.data(),
             c.outBias ? lay.bo + l * dim : -1);
      float *xt = &x[size_t(t * dim)];
      for (int64_t i = 0; i < dim; ++i)
        xt[i] += o[size_t(i)];
      rmsnorm(w, lay.ffnNorm + l * dim, xt, xb.data(), dim, c.normEps);
      matvec(w, lay.w1 + l * hidden * dim, hidden, dim, xb.data(), h1.data(),
             -1);
      matvec(w, lay.w3 + l * hidden * dim, hidden, dim, xb.data(), h3.data(),
             -1);
      for (int64_t i = 0; i < hidden; ++i) {
        double g = h1[size_t(i)];
        h1[size_t(i)] = float(g / (1.0 + std::exp(-g)) * double(h3[size_t(i)]));
      }
      matvec(w, lay.w2 + l * dim * hidden, dim, hidden, h1.data(), o.data(),
             -1);
      for (int64_t i = 0; i < dim; ++i)
        xt[i] += o[size_t(i)];
    }
  }

  using tio::StTensor;
  std::vector<StTensor> tensors = {
      {"keys", {L, T, KV, D}, std::move(keys), tio::DType::F32},
      {"values", {L, T, KV, D}, std::move(values), tio::DType::F32},
      {"keys_pre_rope", {L, T, KV, D}, std::move(pre), tio::DType::F32},
      {"queries", {L, T, H, D}, std::move(queries), tio::DType::F32}};
  const char *scaling =
      c.ropeScaling.kind == model::RopeScaling::Kind::None     ? "none"
      : c.ropeScaling.kind == model::RopeScaling::Kind::Linear ? "linear"
                                                               : "llama3";
  std::string ids;
  for (int32_t t : tokens)
    ids += (ids.empty() ? "" : " ") + std::to_string(t);
  std::vector<std::pair<std::string, std::string>> meta = {
      {"kvq", "dump-kv"},
      {"layout", "lthd"},
      {"model", modelName},
      {"layers", std::to_string(L)},
      {"tokens", std::to_string(T)},
      {"heads", std::to_string(H)},
      {"kv_heads", std::to_string(KV)},
      {"head_dim", std::to_string(D)},
      {"rope_theta", str(c.ropeTheta)},
      {"rope_style", half ? "half" : "interleaved"},
      {"rope_scaling", scaling},
      {"token_ids", ids}};
  if (!tio::writeFile(path, tio::safetensorsImage(tensors, meta), *error)) {
    *error = "--dump-kv: " + *error;
    return false;
  }
  return true;
}

} // namespace kvq::run
