//===- hf_test.cpp - Hugging Face folders: config, tensors, refusals ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Folders written by hf_writer.h (its own safetensors writer); every
// expected value comes from the test's tensors, never from the loader.
//
//===----------------------------------------------------------------------===//
#include "hf_writer.h"

#include "tools/model/checkpoint.h"
#include "tools/model/hf.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace kvq::model;
using kvqtest::HfSpec;
using kvqtest::HfTensors;

namespace {

std::string tmpDir(const std::string &name) {
  return std::string(KVQ_MODEL_TEST_TMP) + "/hf_" + name;
}

std::string replaced(std::string s, const std::string &from,
                     const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

/// Writes the folder and opens it; the error (empty on success).
std::string openError(const std::string &name, const std::string &config,
                      const HfTensors &t, const std::string &dtype = "F32",
                      int shards = 1) {
  std::string dir = tmpDir(name);
  EXPECT_TRUE(kvqtest::hfWriteFolder(dir, config, t, dtype, shards));
  std::string error;
  auto ckpt = openCheckpoint(dir, &error);
  EXPECT_EQ(ckpt.has_value(), error.empty());
  return error;
}

/// Where the loader must put each Hugging Face tensor (llama2.c roles).
void expectLoaded(const HfSpec &s, const HfTensors &t,
                  const Llama2cCheckpoint &ckpt) {
  const Llama2cLayout &l = ckpt.layout();
  const float *w = ckpt.weights();
  const int64_t d = s.dim, q = int64_t(s.heads) * s.hd(),
                kv = int64_t(s.kvHeads) * s.hd(), h = s.hidden;
  auto same = [&](const std::string &name, int64_t offset) {
    const std::vector<float> &v = t.values.at(name);
    for (size_t i = 0; i < v.size(); ++i)
      if (w[offset + int64_t(i)] != v[i]) {
        ADD_FAILURE() << name << " element " << i << ": "
                      << w[offset + int64_t(i)] << " != " << v[i];
        return;
      }
  };
  same("model.embed_tokens.weight", l.embedding);
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    same(p + "input_layernorm.weight", l.attnNorm + i * d);
    same(p + "self_attn.q_proj.weight", l.wq + i * q * d);
    same(p + "self_attn.k_proj.weight", l.wk + i * kv * d);
    same(p + "self_attn.v_proj.weight", l.wv + i * kv * d);
    same(p + "self_attn.o_proj.weight", l.wo + i * d * q);
    same(p + "post_attention_layernorm.weight", l.ffnNorm + i * d);
    same(p + "mlp.gate_proj.weight", l.w1 + i * h * d);
    same(p + "mlp.down_proj.weight", l.w2 + i * d * h);
    same(p + "mlp.up_proj.weight", l.w3 + i * h * d);
    if (s.qkvBias()) {
      same(p + "self_attn.q_proj.bias", l.bq + i * q);
      same(p + "self_attn.k_proj.bias", l.bk + i * kv);
      same(p + "self_attn.v_proj.bias", l.bv + i * kv);
    }
    if (s.outBias())
      same(p + "self_attn.o_proj.bias", l.bo + i * d);
  }
  same("model.norm.weight", l.finalNorm);
  if (s.tied)
    EXPECT_EQ(l.classifier, l.embedding);
  else
    same("lm_head.weight", l.classifier);
}

struct LoadCase {
  const char *name;
  HfSpec spec;
};

void PrintTo(const LoadCase &c, std::ostream *os) { *os << c.name; }

class HfLoad : public ::testing::TestWithParam<LoadCase> {};

TEST_P(HfLoad, EveryTensorLandsAtItsOffset) {
  const HfSpec &s = GetParam().spec;
  HfTensors t = kvqtest::hfRandomTensors(s, 3);
  std::string dir = tmpDir(GetParam().name);
  ASSERT_TRUE(kvqtest::hfWriteFolder(dir, kvqtest::hfConfigJson(s), t, s.dtype,
                                     s.shards));
  std::string error;
  auto ckpt = openCheckpoint(dir, &error);
  ASSERT_TRUE(ckpt) << error;
  const Llama2cConfig &c = ckpt->config();
  EXPECT_EQ(c.dim, s.dim);
  EXPECT_EQ(c.hiddenDim, s.hidden);
  EXPECT_EQ(c.layers, s.layers);
  EXPECT_EQ(c.heads, s.heads);
  EXPECT_EQ(c.kvHeads, s.kvHeads);
  EXPECT_EQ(c.headDim(), s.hd());
  EXPECT_EQ(c.vocab, s.vocab);
  EXPECT_EQ(c.seqLen, s.context);
  EXPECT_EQ(c.sharedClassifier, s.tied);
  EXPECT_EQ(c.qkvBias, s.qkvBias());
  EXPECT_EQ(c.outBias, s.outBias());
  EXPECT_EQ(c.normEps, float(s.eps));
  EXPECT_EQ(c.ropeTheta, float(s.theta));
  EXPECT_TRUE(c.ropePairs == RopePairs::Half);
  expectLoaded(s, t, *ckpt);
}

HfSpec spec(void (*edit)(HfSpec &)) {
  HfSpec s;
  edit(s);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Folders, HfLoad,
    ::testing::Values(LoadCase{"llama_f32", spec([](HfSpec &) {})},
                      LoadCase{"llama_f16_tied", spec([](HfSpec &s) {
                                 s.dtype = "F16";
                                 s.tied = true;
                               })},
                      LoadCase{"llama_bf16_sharded", spec([](HfSpec &s) {
                                 s.dtype = "BF16";
                                 s.shards = 3;
                               })},
                      LoadCase{"llama_bias_headdim", spec([](HfSpec &s) {
                                 s.attentionBias = true;
                                 s.headDim =
                                     16; // 4 heads x 16 != hidden_size 32
                               })},
                      LoadCase{"qwen2", spec([](HfSpec &s) {
                                 s.arch = "Qwen2ForCausalLM";
                                 s.theta = 1000000;
                                 s.eps = 1e-6;
                               })},
                      LoadCase{"mistral_mha", spec([](HfSpec &s) {
                                 s.arch = "MistralForCausalLM";
                                 s.kvHeads = 4;
                               })}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(HfConfig, RopeScalingIsRead) {
  HfSpec s;
  s.ropeScaling = "llama3";
  s.factor = 8;
  s.lowFreqFactor = 1;
  s.highFreqFactor = 4;
  s.originalContext = 16;
  std::string error;
  auto c = parseHfConfig(kvqtest::hfConfigJson(s), &error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(c->ropeScaling.kind == RopeScaling::Kind::Llama3);
  EXPECT_EQ(c->ropeScaling.factor, 8);
  EXPECT_EQ(c->ropeScaling.originalContext, 16);
  s.ropeScaling = "linear";
  c = parseHfConfig(kvqtest::hfConfigJson(s), &error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(c->ropeScaling.kind == RopeScaling::Kind::Linear);
}

TEST(HfConfig, DefaultsAreTransformers) {
  // Only the required fields: MHA, eps 1e-6, theta 10000, untied.
  std::string error;
  auto c = parseHfConfig(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32,
          "intermediate_size": 48, "num_hidden_layers": 1,
          "num_attention_heads": 4, "vocab_size": 40,
          "max_position_embeddings": 64})",
      &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->kvHeads, 4);
  EXPECT_EQ(c->normEps, 1e-6f);
  EXPECT_EQ(c->ropeTheta, 10000.0f);
  EXPECT_FALSE(c->sharedClassifier);
  EXPECT_FALSE(c->qkvBias);
}

/// Each refusal names what it refuses.
struct Refusal {
  const char *name;
  const char *from, *to; ///< an edit of the default config.json
  const char *message;   ///< a part of the one-line error
};

void PrintTo(const Refusal &r, std::ostream *os) { *os << r.name; }

class HfConfigRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(HfConfigRefusal, NamesTheField) {
  const Refusal &r = GetParam();
  HfSpec s;
  std::string config = replaced(kvqtest::hfConfigJson(s), r.from, r.to);
  std::string error;
  EXPECT_FALSE(parseHfConfig(config, &error));
  EXPECT_NE(error.find(r.message), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(
    Config, HfConfigRefusal,
    ::testing::Values(
        Refusal{"architecture", "LlamaForCausalLM", "GemmaForCausalLM",
                "architecture 'GemmaForCausalLM' is not supported"},
        Refusal{"unknown_field", "\"hidden_act\"",
                "\"use_qk_norm\": true, \"hidden_act\"",
                "field 'use_qk_norm' is not supported"},
        Refusal{"activation", "\"silu\"", "\"gelu\"",
                "hidden_act 'gelu' is not supported"},
        Refusal{"missing", "\"intermediate_size\": 48,", "",
                "'intermediate_size' is missing"},
        Refusal{"not_integer", "\"num_hidden_layers\": 2",
                "\"num_hidden_layers\": 2.5",
                "'num_hidden_layers' must be an integer"},
        Refusal{"heads_divide", "\"num_key_value_heads\": 2",
                "\"num_key_value_heads\": 3",
                "num_key_value_heads 3 does not divide num_attention_heads 4"},
        Refusal{"tiny_eps", "\"rms_norm_eps\": 1.0000000000000001e-05",
                "\"rms_norm_eps\": 1e-50",
                "rms_norm_eps 1e-50 is not in [1.2e-38, 1)"},
        Refusal{"rope_type", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}",
                "rope_scaling type 'yarn' is not supported"},
        Refusal{"rope_key", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4, "
                "\"beta\": 1}",
                "rope_scaling.beta is not supported"},
        Refusal{"mlp_bias", "\"hidden_act\"",
                "\"mlp_bias\": true, \"hidden_act\"",
                "mlp_bias true is not supported"},
        Refusal{"llama_window", "\"hidden_act\"",
                "\"sliding_window\": 16, \"hidden_act\"",
                "field 'sliding_window' is not supported"},
        Refusal{"mistral_window", "\"LlamaForCausalLM\"],",
                "\"MistralForCausalLM\"], \"sliding_window\": 16,",
                "sliding_window 16 is shorter than max_position_embeddings "
                "64"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(HfConfig, WindowCoveringTheContextIsTheFullModel) {
  HfSpec s;
  std::string config =
      replaced(kvqtest::hfConfigJson(s), "\"LlamaForCausalLM\"],",
               "\"MistralForCausalLM\"], \"sliding_window\": 64,");
  std::string error;
  EXPECT_TRUE(parseHfConfig(config, &error)) << error;
  // Qwen2 uses its window only with use_sliding_window.
  s.arch = "Qwen2ForCausalLM";
  config = replaced(kvqtest::hfConfigJson(s), "\"Qwen2ForCausalLM\"],",
                    "\"Qwen2ForCausalLM\"], \"sliding_window\": 16, "
                    "\"use_sliding_window\": false, \"max_window_layers\": 1,");
  EXPECT_TRUE(parseHfConfig(config, &error)) << error;
  config = replaced(config, "\"use_sliding_window\": false",
                    "\"use_sliding_window\": true");
  EXPECT_FALSE(parseHfConfig(config, &error));
  EXPECT_NE(error.find("sliding_window 16"), std::string::npos) << error;
}

TEST(HfFolder, TensorRefusals) {
  HfSpec s;
  const std::string config = kvqtest::hfConfigJson(s);
  HfTensors t = kvqtest::hfRandomTensors(s, 5);

  HfTensors missing = t;
  missing.remove("model.layers.1.mlp.up_proj.weight");
  std::string e = openError("missing", config, missing);
  EXPECT_NE(e.find("tensor 'model.layers.1.mlp.up_proj.weight' is missing"),
            std::string::npos)
      << e;

  HfTensors extra = t;
  extra.add("model.layers.0.self_attn.q_norm.weight", {8},
            std::vector<float>(8));
  e = openError("extra", config, extra);
  EXPECT_NE(e.find("tensor 'model.layers.0.self_attn.q_norm.weight' is not "
                   "part of the model"),
            std::string::npos)
      << e;

  HfTensors shape = t;
  shape.shapes["model.norm.weight"] = {4, 8};
  e = openError("shape", config, shape);
  EXPECT_NE(e.find("tensor 'model.norm.weight' has shape [4, 8], the config "
                   "gives [32]"),
            std::string::npos)
      << e;

  HfTensors nan = t;
  nan.values["model.layers.0.self_attn.k_proj.weight"][5] = NAN;
  e = openError("nan", config, nan);
  EXPECT_NE(e.find("tensor 'model.layers.0.self_attn.k_proj.weight', element "
                   "5 is NaN"),
            std::string::npos)
      << e;

  // Tied: a saved lm_head is ignored, as transformers ties it.
  HfSpec tied = s;
  tied.tied = true;
  HfTensors withHead = kvqtest::hfRandomTensors(tied, 5);
  withHead.add("lm_head.weight", {s.vocab, s.dim},
               std::vector<float>(size_t(s.vocab * s.dim), 0.5f));
  EXPECT_EQ(openError("tied_head", kvqtest::hfConfigJson(tied), withHead), "");
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void writeFile(const std::string &path, const std::string &bytes) {
  ASSERT_TRUE(kvqtest::hfWriteText(path, bytes));
}

TEST(HfFolder, FileRefusals) {
  HfSpec s;
  const std::string config = kvqtest::hfConfigJson(s);
  HfTensors t = kvqtest::hfRandomTensors(s, 6);
  std::string dir = tmpDir("files");
  std::string error;

  // An unsupported dtype: the header spells I32 (same width as F32).
  ASSERT_TRUE(kvqtest::hfWriteFolder(dir, config, t, "F32", 1));
  std::string bytes = readFile(dir + "/model.safetensors");
  size_t at = bytes.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "\"I32\"");
  writeFile(dir + "/model.safetensors", bytes);
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("has dtype 'I32'"), std::string::npos) << error;

  // Truncated data.
  ASSERT_TRUE(kvqtest::hfWriteFolder(dir, config, t, "F32", 1));
  bytes = readFile(dir + "/model.safetensors");
  writeFile(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 4));
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("model.safetensors: .safetensors"), std::string::npos)
      << error;

  // No weights at all.
  std::remove((dir + "/model.safetensors").c_str());
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("neither model.safetensors nor"), std::string::npos)
      << error;

  // Shards: the index must name files of the folder, and agree with them.
  ASSERT_TRUE(kvqtest::hfWriteFolder(dir, config, t, "F32", 2));
  std::string index = readFile(dir + "/model.safetensors.index.json");
  writeFile(dir + "/model.safetensors.index.json",
            replaced(index, "\"model-00001-of-00002.safetensors\"",
                     "\"../model-00001-of-00002.safetensors\""));
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("not a file name of the folder"), std::string::npos)
      << error;
  // The first tensor said to be in the second shard.
  writeFile(dir + "/model.safetensors.index.json",
            replaced(index,
                     "\"model.embed_tokens.weight\": "
                     "\"model-00001-of-00002.safetensors\"",
                     "\"model.embed_tokens.weight\": "
                     "\"model-00002-of-00002.safetensors\""));
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("tensor 'model.embed_tokens.weight' is mapped to "
                       "model-00002-of-00002.safetensors"),
            std::string::npos)
      << error;
  writeFile(dir + "/model.safetensors.index.json", "{\"weight_map\": 3}");
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("'weight_map' object"), std::string::npos) << error;

  std::remove((dir + "/config.json").c_str());
  EXPECT_FALSE(openCheckpoint(dir, &error));
  EXPECT_NE(error.find("config.json"), std::string::npos) << error;
}

} // namespace
