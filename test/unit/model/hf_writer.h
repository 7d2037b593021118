//===- hf_writer.h - tiny Hugging Face folders for tests --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Writes Hugging Face model folders (config.json, safetensors, optionally
// sharded with model.safetensors.index.json) of random weights, with its
// own safetensors writer (no project code). Every weight is m * 2^-k with
// |m| < 128, so f32, f16 and bf16 hold it exactly: a test knows the exact
// value the loader must produce whatever the dtype.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_MODEL_HF_WRITER_H
#define KVQ_TEST_UNIT_MODEL_HF_WRITER_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace kvqtest {

struct HfSpec {
  std::string arch = "LlamaForCausalLM";
  int dim = 32, hidden = 48, layers = 2, heads = 4, kvHeads = 2, vocab = 40;
  int context = 64;
  int headDim = 0; ///< 0: not written (dim / heads)
  bool tied = false;
  bool attentionBias = false; ///< Llama's attention_bias (q, k, v and o)
  double eps = 1e-5, theta = 10000;
  std::string ropeScaling; ///< "", "linear" or "llama3"
  double factor = 4, lowFreqFactor = 1, highFreqFactor = 4;
  int originalContext = 16;
  std::string dtype = "F32"; ///< F32, F16 or BF16
  int shards = 1;

  int hd() const { return headDim ? headDim : dim / heads; }
  bool qkvBias() const { return attentionBias || arch == "Qwen2ForCausalLM"; }
  bool outBias() const { return attentionBias; }
};

/// Tensors in the order they are written.
struct HfTensors {
  std::vector<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> values;
  void add(const std::string &name, std::vector<int64_t> shape,
           std::vector<float> v) {
    names.push_back(name);
    shapes[name] = std::move(shape);
    values[name] = std::move(v);
  }
  void remove(const std::string &name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name)
        names.erase(names.begin() + long(i));
    shapes.erase(name);
    values.erase(name);
  }
};

inline std::string hfConfigJson(const HfSpec &s) {
  std::string j = "{\n  \"architectures\": [\"" + s.arch + "\"],\n";
  auto field = [&](const std::string &k, const std::string &v) {
    j += "  \"" + k + "\": " + v + ",\n";
  };
  char buf[64];
  field("hidden_size", std::to_string(s.dim));
  field("intermediate_size", std::to_string(s.hidden));
  field("num_hidden_layers", std::to_string(s.layers));
  field("num_attention_heads", std::to_string(s.heads));
  field("num_key_value_heads", std::to_string(s.kvHeads));
  if (s.headDim)
    field("head_dim", std::to_string(s.headDim));
  field("vocab_size", std::to_string(s.vocab));
  field("max_position_embeddings", std::to_string(s.context));
  std::snprintf(buf, sizeof buf, "%.17g", s.eps);
  field("rms_norm_eps", buf);
  std::snprintf(buf, sizeof buf, "%.17g", s.theta);
  field("rope_theta", buf);
  if (s.ropeScaling == "linear") {
    std::snprintf(buf, sizeof buf, "%.17g", s.factor);
    field("rope_scaling",
          std::string("{\"rope_type\": \"linear\", \"factor\": ") + buf + "}");
  } else if (s.ropeScaling == "llama3") {
    char b[256];
    std::snprintf(b, sizeof b,
                  "{\"rope_type\": \"llama3\", \"factor\": %.17g, "
                  "\"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g, "
                  "\"original_max_position_embeddings\": %d}",
                  s.factor, s.lowFreqFactor, s.highFreqFactor,
                  s.originalContext);
    field("rope_scaling", b);
  } else {
    field("rope_scaling", "null");
  }
  if (s.arch == "LlamaForCausalLM")
    field("attention_bias", s.attentionBias ? "true" : "false");
  field("hidden_act", "\"silu\"");
  field("torch_dtype", "\"float32\"");
  field("bos_token_id", "1");
  field("eos_token_id", "2");
  j += "  \"tie_word_embeddings\": " + std::string(s.tied ? "true" : "false") +
       "\n}\n";
  return j;
}

/// m * 2^-k weights from a seeded xorshift: |m| < 128.
inline HfTensors hfRandomTensors(const HfSpec &s, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 7;
  auto next = [&]() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  };
  auto weights = [&](int64_t n, double scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto &x : v)
      x = float(double(int64_t(next() >> 57) - 64) / 64.0 * scale);
    return v;
  };
  auto norms = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto &x : v)
      x = float(double(48 + int64_t(next() >> 59)) / 64.0); // [0.75, 1.23]
    return v;
  };
  const int64_t d = s.dim, q = int64_t(s.heads) * s.hd(),
                kv = int64_t(s.kvHeads) * s.hd(), h = s.hidden;
  HfTensors t;
  t.add("model.embed_tokens.weight", {s.vocab, d}, weights(s.vocab * d, 1.0));
  for (int l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    t.add(p + "input_layernorm.weight", {d}, norms(d));
    t.add(p + "self_attn.q_proj.weight", {q, d}, weights(q * d, 0.5));
    t.add(p + "self_attn.k_proj.weight", {kv, d}, weights(kv * d, 0.5));
    t.add(p + "self_attn.v_proj.weight", {kv, d}, weights(kv * d, 0.5));
    t.add(p + "self_attn.o_proj.weight", {d, q}, weights(d * q, 0.25));
    if (s.qkvBias()) {
      t.add(p + "self_attn.q_proj.bias", {q}, weights(q, 0.5));
      t.add(p + "self_attn.k_proj.bias", {kv}, weights(kv, 0.5));
      t.add(p + "self_attn.v_proj.bias", {kv}, weights(kv, 0.5));
    }
    if (s.outBias())
      t.add(p + "self_attn.o_proj.bias", {d}, weights(d, 0.25));
    t.add(p + "post_attention_layernorm.weight", {d}, norms(d));
    t.add(p + "mlp.gate_proj.weight", {h, d}, weights(h * d, 0.5));
    t.add(p + "mlp.up_proj.weight", {h, d}, weights(h * d, 0.5));
    t.add(p + "mlp.down_proj.weight", {d, h}, weights(d * h, 0.25));
  }
  t.add("model.norm.weight", {d}, norms(d));
  if (!s.tied)
    t.add("lm_head.weight", {s.vocab, d}, weights(s.vocab * d, 1.0));
  return t;
}

/// IEEE binary16 bits of a float that f16 holds exactly (a normal or 0).
inline uint16_t hfExactHalf(float f) {
  if (f == 0)
    return std::signbit(f) ? 0x8000 : 0;
  int e;
  double m = std::frexp(std::fabs(double(f)), &e); // [0.5, 1)
  uint16_t bits =
      uint16_t((e - 1 + 15) << 10) | uint16_t(std::lround((m * 2 - 1) * 1024));
  return f < 0 ? uint16_t(bits | 0x8000) : bits;
}

/// One safetensors file of `names` (dtype F32, F16 or BF16).
inline bool hfWriteSafetensors(const std::string &path, const HfTensors &t,
                               const std::vector<std::string> &names,
                               const std::string &dtype) {
  std::string header = "{";
  std::string data;
  for (const std::string &n : names) {
    const std::vector<float> &v = t.values.at(n);
    size_t begin = data.size();
    for (float x : v) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      if (dtype == "F32") {
        data.append(reinterpret_cast<const char *>(&u), 4);
      } else {
        uint16_t h = dtype == "F16" ? hfExactHalf(x) : uint16_t(u >> 16);
        data.append(reinterpret_cast<const char *>(&h), 2);
      }
    }
    std::string shape;
    for (int64_t dim : t.shapes.at(n))
      shape += (shape.empty() ? "" : ",") + std::to_string(dim);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + n +
              "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  uint64_t n = header.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), 1, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

inline bool hfWriteText(const std::string &path, const std::string &text) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

/// The folder `dir` (created; files in it overwritten): config.json as
/// given, the tensors in `shards` files (one: model.safetensors).
inline bool hfWriteFolder(const std::string &dir, const std::string &config,
                          const HfTensors &t, const std::string &dtype,
                          int shards) {
  ::mkdir(dir.c_str(), 0755);
  std::remove((dir + "/model.safetensors").c_str());
  std::remove((dir + "/model.safetensors.index.json").c_str());
  if (!hfWriteText(dir + "/config.json", config))
    return false;
  if (shards <= 1)
    return hfWriteSafetensors(dir + "/model.safetensors", t, t.names, dtype);
  std::string map;
  size_t per = (t.names.size() + size_t(shards) - 1) / size_t(shards);
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1,
                  shards);
    std::vector<std::string> part;
    for (size_t i = size_t(s) * per; i < t.names.size() && i < (s + 1) * per;
         ++i) {
      part.push_back(t.names[i]);
      map += (map.empty() ? "" : ",\n    ") + std::string("\"") + t.names[i] +
             "\": \"" + name + "\"";
    }
    if (!hfWriteSafetensors(dir + "/" + name, t, part, dtype))
      return false;
  }
  return hfWriteText(dir + "/model.safetensors.index.json",
                     "{\"metadata\": {\"total_size\": 0},\n  \"weight_map\": "
                     "{\n    " +
                         map + "\n  }\n}\n");
}

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_MODEL_HF_WRITER_H
