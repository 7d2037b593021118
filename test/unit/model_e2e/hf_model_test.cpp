//===- hf_model_test.cpp - Hugging Face folders through kvq vs float64 ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Tiny random Hugging Face folders (hf_writer.h) are opened, imported,
// compiled and run by CompiledModel; their logits at every position are
// compared with this file's own float64 forward pass of the Hugging Face
// Llama / Mistral / Qwen2 model (half-split RoPE, rope_scaling, biases,
// GQA), computed from the test's tensors, not from anything kvq loaded.
//
//===----------------------------------------------------------------------===//
#include "hf_writer.h"

#include "tools/kvq-run/CompiledModel.h"
#include "tools/model/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>

using kvqtest::HfSpec;
using kvqtest::HfTensors;

namespace {

/// Hugging Face's forward pass in double, one token at a time.
class Reference {
public:
  Reference(const HfSpec &s, const HfTensors &t) : s(s), t(t) {
    const int d = s.hd();
    // transformers' inverse frequencies, then its rope_scaling rules,
    // written in terms of wavelengths as transformers writes them.
    for (int i = 0; i < d / 2; ++i) {
      double inv = 1.0 / std::pow(s.theta, double(2 * i) / d);
      if (s.ropeScaling == "linear")
        inv /= s.factor;
      if (s.ropeScaling == "llama3") {
        double lowWavelen = s.originalContext / s.lowFreqFactor;
        double highWavelen = s.originalContext / s.highFreqFactor;
        double wavelen = 2 * M_PI / inv;
        if (wavelen > lowWavelen) {
          inv = inv / s.factor;
        } else if (wavelen >= highWavelen) {
          double smooth = (s.originalContext / wavelen - s.lowFreqFactor) /
                          (s.highFreqFactor - s.lowFreqFactor);
          inv = (1 - smooth) * inv / s.factor + smooth * inv;
        }
      }
      invFreq.push_back(inv);
    }
    keys.resize(size_t(s.layers));
    values.resize(size_t(s.layers));
  }

  std::vector<double> forward(int token, int pos) {
    const int dim = s.dim, hd = s.hd(), heads = s.heads, kvh = s.kvHeads;
    std::vector<double> x = row("model.embed_tokens.weight", token, dim);
    for (int l = 0; l < s.layers; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<double> h = norm(x, p + "input_layernorm.weight");
      std::vector<double> q = linear(p + "self_attn.q_proj", h, s.qkvBias());
      std::vector<double> k = linear(p + "self_attn.k_proj", h, s.qkvBias());
      std::vector<double> v = linear(p + "self_attn.v_proj", h, s.qkvBias());
      rope(q, heads, pos);
      rope(k, kvh, pos);
      keys[size_t(l)].push_back(k);
      values[size_t(l)].push_back(v);
      std::vector<double> att(size_t(heads * hd), 0.0);
      for (int head = 0; head < heads; ++head) {
        int g = head / (heads / kvh); // repeat_kv
        std::vector<double> score(size_t(pos + 1));
        double mx = -INFINITY;
        for (int j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int c = 0; c < hd; ++c)
            dot += q[size_t(head * hd + c)] *
                   keys[size_t(l)][size_t(j)][size_t(g * hd + c)];
          score[size_t(j)] = dot / std::sqrt(double(hd));
          mx = std::max(mx, score[size_t(j)]);
        }
        double sum = 0;
        for (double &sc : score)
          sum += sc = std::exp(sc - mx);
        for (int j = 0; j <= pos; ++j)
          for (int c = 0; c < hd; ++c)
            att[size_t(head * hd + c)] +=
                score[size_t(j)] / sum *
                values[size_t(l)][size_t(j)][size_t(g * hd + c)];
      }
      std::vector<double> o = linear(p + "self_attn.o_proj", att, s.outBias());
      for (int i = 0; i < dim; ++i)
        x[size_t(i)] += o[size_t(i)];
      std::vector<double> h2 = norm(x, p + "post_attention_layernorm.weight");
      std::vector<double> gate = linear(p + "mlp.gate_proj", h2, false);
      std::vector<double> up = linear(p + "mlp.up_proj", h2, false);
      for (size_t i = 0; i < gate.size(); ++i)
        gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      std::vector<double> down = linear(p + "mlp.down_proj", gate, false);
      for (int i = 0; i < dim; ++i)
        x[size_t(i)] += down[size_t(i)];
    }
    std::vector<double> hf = norm(x, "model.norm.weight");
    return linear(s.tied ? "model.embed_tokens" : "lm_head", hf, false);
  }

private:
  const HfSpec &s;
  const HfTensors &t;
  std::vector<double> invFreq;
  std::vector<std::vector<std::vector<double>>> keys, values;

  std::vector<double> row(const std::string &name, int r, int n) const {
    const std::vector<float> &w = t.values.at(name);
    return std::vector<double>(w.begin() + r * n, w.begin() + (r + 1) * n);
  }
  std::vector<double> norm(const std::vector<double> &x,
                           const std::string &name) const {
    double ss = 0;
    for (double v : x)
      ss += v * v;
    double r = 1 / std::sqrt(ss / double(x.size()) + s.eps);
    const std::vector<float> &g = t.values.at(name);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] * r * g[i];
    return y;
  }
  /// nn.Linear: W [out, in], y = W x (+ b).
  std::vector<double> linear(const std::string &name,
                             const std::vector<double> &x, bool bias) const {
    const std::vector<float> &w = t.values.at(name + ".weight");
    size_t out = w.size() / x.size();
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i)
        y[o] += double(w[o * x.size() + i]) * x[i];
      if (bias)
        y[o] += t.values.at(name + ".bias")[o];
    }
    return y;
  }
  /// rotate_half: channel c pairs with c + head_dim / 2.
  void rope(std::vector<double> &v, int heads, int pos) const {
    const int hd = s.hd();
    for (int h = 0; h < heads; ++h)
      for (int c = 0; c < hd / 2; ++c) {
        double a = v[size_t(h * hd + c)], b = v[size_t(h * hd + c + hd / 2)];
        double angle = pos * invFreq[size_t(c)];
        v[size_t(h * hd + c)] = a * std::cos(angle) - b * std::sin(angle);
        v[size_t(h * hd + c + hd / 2)] =
            b * std::cos(angle) + a * std::sin(angle);
      }
  }
};

struct Case {
  const char *name;
  HfSpec spec;
  const char *passOptions; ///< "" : the plain f32 graph
  double tolerance;        ///< of max |logit difference| / max |logit|
  /// Run on the weights in the folder's own f16 / bf16 (kvq-run's default)
  /// instead of an f32 copy.
  bool keepType = false;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class HfModel : public ::testing::TestWithParam<Case> {};

TEST_P(HfModel, LogitsMatchAFloat64HuggingFaceForwardPass) {
  const Case &tc = GetParam();
  const HfSpec &s = tc.spec;
  HfTensors t = kvqtest::hfRandomTensors(s, 11);
  std::string dir = std::string(KVQ_MODEL_TEST_TMP) + "/hf_e2e_" + tc.name;
  ASSERT_TRUE(kvqtest::hfWriteFolder(dir, kvqtest::hfConfigJson(s), t, s.dtype,
                                     s.shards));
  std::string error;
  auto ckpt = kvq::model::openCheckpoint(dir, &error);
  ASSERT_TRUE(ckpt) << error;
  const int prefill = 5, total = 24;
  using Storage = kvq::model::Llama2cCheckpoint::Storage;
  const Storage stored = s.dtype == "F16"    ? Storage::F16
                         : s.dtype == "BF16" ? Storage::BF16
                                             : Storage::F32;
  EXPECT_TRUE(ckpt->storage() == stored) << s.dtype;
  // What the loader holds: the file's 2-byte weights, not an f32 copy.
  const int64_t total16 = ckpt->layout().total * 2;
  if (stored != Storage::F32)
    EXPECT_EQ(ckpt->heldWeightBytes(), total16);
  kvq::import::ImportOptions spelling;
  if (tc.keepType)
    spelling.weightType = kvq::import::storedWeightType(*ckpt);
  auto model = kvq::run::CompiledModel::compile(*ckpt, prefill, tc.passOptions,
                                                &error, spelling);
  ASSERT_TRUE(model) << error;
  if (tc.keepType) {
    EXPECT_EQ(model->weightType(),
              stored == Storage::F16 ? KVQ_WEIGHT_F16 : KVQ_WEIGHT_BF16);
    EXPECT_EQ(model->weights(), static_cast<const void *>(ckpt->narrowWeights()));
    EXPECT_EQ(model->ownWeightBytes(), 0);
    EXPECT_EQ(ckpt->heldWeightBytes(), total16);
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < total; ++i)
    tokens.push_back(int32_t((i * 7 + 3) % s.vocab));
  Reference ref(s, t);
  std::vector<double> expected;
  for (int i = 0; i < prefill; ++i)
    expected = ref.forward(tokens[size_t(i)], i);
  const float *logits = model->prefill(tokens.data(), 0);
  for (int pos = prefill - 1; pos < total; ++pos) {
    ASSERT_TRUE(logits) << model->error();
    double worst = 0, scale = 0;
    for (int v = 0; v < s.vocab; ++v) {
      worst =
          std::max(worst, std::fabs(double(logits[v]) - expected[size_t(v)]));
      scale = std::max(scale, std::fabs(expected[size_t(v)]));
    }
    ASSERT_GT(scale, 0.5) << "logits too flat to test anything";
    EXPECT_LE(worst, tc.tolerance * scale) << "position " << pos;
    if (pos + 1 < total) {
      expected = ref.forward(tokens[size_t(pos + 1)], pos + 1);
      logits = model->decode(tokens[size_t(pos + 1)], pos + 1);
    }
  }
}

HfSpec spec(void (*edit)(HfSpec &)) {
  HfSpec s;
  edit(s);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Folders, HfModel,
    ::testing::Values(Case{"llama_gqa", spec([](HfSpec &) {}), "", 1e-4},
                      Case{"llama_tied_f16", spec([](HfSpec &s) {
                             s.tied = true;
                             s.dtype = "F16";
                           }),
                           "", 1e-4},
                      Case{"qwen2_bf16", spec([](HfSpec &s) {
                             s.arch = "Qwen2ForCausalLM";
                             s.dtype = "BF16";
                             s.theta = 1000000;
                             s.eps = 1e-6;
                           }),
                           "", 1e-4},
                      // The same folders read in their own type: the
                      // weights are exact in it, so only f32 arithmetic
                      // differs from the float64 reference.
                      Case{"llama_tied_f16_kept", spec([](HfSpec &s) {
                             s.tied = true;
                             s.dtype = "F16";
                           }),
                           "", 1e-4, true},
                      Case{"qwen2_bf16_kept", spec([](HfSpec &s) {
                             s.arch = "Qwen2ForCausalLM";
                             s.dtype = "BF16";
                             s.theta = 1000000;
                             s.eps = 1e-6;
                           }),
                           "", 1e-4, true},
                      Case{"llama_bias_bf16_kept_fp16", spec([](HfSpec &s) {
                             s.dtype = "BF16";
                             s.attentionBias = true;
                           }),
                           "method=fp16", 5e-3, true},
                      Case{"llama_bias_headdim", spec([](HfSpec &s) {
                             s.attentionBias = true;
                             s.headDim = 16;
                             s.heads = 4;
                             s.kvHeads = 1;
                           }),
                           "", 1e-4},
                      Case{"llama3_scaling", spec([](HfSpec &s) {
                             s.ropeScaling = "llama3";
                             s.factor = 8;
                           }),
                           "", 1e-4},
                      Case{"linear_scaling_sharded", spec([](HfSpec &s) {
                             s.ropeScaling = "linear";
                             s.factor = 2;
                             s.shards = 3;
                           }),
                           "", 1e-4},
                      Case{"mistral_mha", spec([](HfSpec &s) {
                             s.arch = "MistralForCausalLM";
                             s.kvHeads = 4;
                           }),
                           "", 1e-4},
                      // Through the kvq cache: fp16 K/V, keys stored before the
                      // half-split RoPE (the pass must recognise it) or after.
                      Case{"qwen2_fp16_pre_rope",
                           spec([](HfSpec &s) { s.arch = "Qwen2ForCausalLM"; }),
                           "method=fp16 pre-rope=true", 5e-3},
                      Case{"llama3_fp16", spec([](HfSpec &s) {
                             s.ropeScaling = "llama3";
                             s.factor = 8;
                           }),
                           "method=fp16", 5e-3}),
    [](const auto &info) { return std::string(info.param.name); });

} // namespace
