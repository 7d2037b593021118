//===- hf.cpp - Hugging Face model folders --------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "tools/model/hf.h"

#include "flags.h"
#include "npy.h"
#include "tensor_io.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <sys/stat.h>

using kvq::cli::printable;
using nlohmann::json;

namespace kvq::model {

namespace {

bool fail(std::string *error, const std::string &message) {
  if (error)
    *error = message;
  return false;
}

/// The longest config.json and index file read (far above real ones).
constexpr uint64_t kMaxJsonBytes = 16u << 20;

bool readSmallFile(const std::string &path, std::string &text,
                   std::string *error) {
  tio::FileSource src;
  std::string err;
  if (!src.open(path, err))
    return fail(error, err);
  if (src.size() > kMaxJsonBytes)
    return fail(error, path + ": " + std::to_string(src.size()) +
                           " bytes, more than a model's JSON file can be (" +
                           std::to_string(kMaxJsonBytes) + ")");
  text.assign(size_t(src.size()), '\0');
  if (!src.read(0, text.data(), text.size(), err))
    return fail(error, path + ": " + err);
  return true;
}

enum class Arch { Llama, Mistral, Qwen2 };

/// Fields that do not change the forward pass (token ids, training
/// settings, bookkeeping), accepted and ignored.
const std::set<std::string> &ignoredFields() {
  static const std::set<std::string> s = {
      "_name_or_path",   "attention_dropout", "bos_token_id",
      "dtype",           "eos_token_id",      "initializer_range",
      "model_type",      "output_attentions", "output_hidden_states",
      "pad_token_id",    "pretraining_tp",    "return_dict",
      "tokenizer_class", "torch_dtype",       "transformers_version",
      "use_cache"};
  return s;
}

/// Reads config fields with one-line errors naming them.
class Fields {
public:
  Fields(const json &j, std::string *error) : j_(j), error_(error) {}

  bool has(const char *name) const {
    return j_.contains(name) && !j_[name].is_null();
  }
  bool integer(const char *name, int64_t &out, bool required = true) {
    used_.insert(name);
    if (!has(name)) {
      if (required)
        return fail(error_,
                    std::string("config.json: '") + name + "' is missing");
      return true;
    }
    const json &v = j_[name];
    if (!v.is_number_integer())
      return fail(error_, std::string("config.json: '") + name +
                              "' must be an integer, got " +
                              printable(v.dump(), 40));
    // Far beyond any model size; checkModelShape bounds each field.
    if (v.is_number_unsigned()
            ? v.get<uint64_t>() > (1u << 30)
            : v.get<int64_t>() > (1 << 30) || v.get<int64_t>() < -(1 << 30))
      return fail(error_, std::string("config.json: '") + name + "' " +
                              v.dump() + " is out of range");
    out = v.get<int64_t>();
    return true;
  }
  bool number(const char *name, double &out) {
    used_.insert(name);
    if (!has(name))
      return true;
    const json &v = j_[name];
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return fail(error_, std::string("config.json: '") + name +
                              "' must be a finite number, got " +
                              printable(v.dump(), 40));
    out = v.get<double>();
    return true;
  }
  bool boolean(const char *name, bool &out) {
    used_.insert(name);
    if (!has(name))
      return true;
    if (!j_[name].is_boolean())
      return fail(error_, std::string("config.json: '") + name +
                              "' must be true or false, got " +
                              printable(j_[name].dump(), 40));
    out = j_[name].get<bool>();
    return true;
  }
  bool string(const char *name, std::string &out) {
    used_.insert(name);
    if (!has(name))
      return true;
    if (!j_[name].is_string())
      return fail(error_, std::string("config.json: '") + name +
                              "' must be a string, got " +
                              printable(j_[name].dump(), 40));
    out = j_[name].get<std::string>();
    return true;
  }
  void use(const char *name) { used_.insert(name); }
  /// The first field neither read nor ignorable, if any.
  bool noneLeft() {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!used_.count(it.key()) && !ignoredFields().count(it.key()))
        return fail(error_, "config.json: field '" + printable(it.key(), 60) +
                                "' is not supported (kvq does not know how "
                                "it changes the model)");
    return true;
  }

private:
  const json &j_;
  std::string *error_;
  std::set<std::string> used_;
};

bool parseRopeScaling(const json &s, RopeScaling &out, std::string *error) {
  if (!s.is_object())
    return fail(error, "config.json: 'rope_scaling' must be an object or "
                       "null, got " +
                           printable(s.dump(), 40));
  std::string type;
  for (const char *key : {"rope_type", "type"})
    if (s.contains(key)) {
      if (!s[key].is_string())
        return fail(error, std::string("config.json: rope_scaling.") + key +
                               " must be a string");
      if (!type.empty() && type != s[key].get<std::string>())
        return fail(error, "config.json: rope_scaling.rope_type and "
                           "rope_scaling.type disagree");
      type = s[key].get<std::string>();
    }
  std::set<std::string> allowed = {"rope_type", "type"};
  if (type == "default") {
    out.kind = RopeScaling::Kind::None;
  } else if (type == "linear" || type == "llama3") {
    out.kind = type == "linear" ? RopeScaling::Kind::Linear
                                : RopeScaling::Kind::Llama3;
    auto num = [&](const char *key, double &v) {
      allowed.insert(key);
      if (!s.contains(key) || !s[key].is_number() ||
          !std::isfinite(s[key].get<double>()) || s[key].get<double>() <= 0)
        return fail(error, std::string("config.json: rope_scaling.") + key +
                               " must be a positive number for rope_type '" +
                               type + "'");
      v = s[key].get<double>();
      return true;
    };
    if (!num("factor", out.factor))
      return false;
    if (out.kind == RopeScaling::Kind::Llama3) {
      double original = 0;
      if (!num("low_freq_factor", out.lowFreqFactor) ||
          !num("high_freq_factor", out.highFreqFactor) ||
          !num("original_max_position_embeddings", original))
        return false;
      if (!(out.highFreqFactor > out.lowFreqFactor))
        return fail(error, "config.json: rope_scaling.high_freq_factor must "
                           "exceed low_freq_factor");
      if (original != std::floor(original) || original > (1 << 30))
        return fail(error, "config.json: rope_scaling."
                           "original_max_position_embeddings must be an "
                           "integer");
      out.originalContext = int64_t(original);
    }
  } else {
    return fail(error, "config.json: rope_scaling type '" +
                           printable(type, 40) +
                           "' is not supported (linear, llama3)");
  }
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!allowed.count(it.key()))
      return fail(error, "config.json: rope_scaling." +
                             printable(it.key(), 60) + " is not supported");
  return true;
}

} // namespace

std::optional<Llama2cConfig> parseHfConfig(const std::string &text,
                                           std::string *error) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail(error, "config.json is not a JSON object");
    return std::nullopt;
  }
  Fields f(j, error);
  // The architecture.
  f.use("architectures");
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].size() != 1 || !j["architectures"][0].is_string()) {
    fail(error, "config.json: 'architectures' must list exactly one "
                "architecture");
    return std::nullopt;
  }
  const std::string archName = j["architectures"][0].get<std::string>();
  Arch arch;
  if (archName == kHfArchitectures[0])
    arch = Arch::Llama;
  else if (archName == kHfArchitectures[1])
    arch = Arch::Mistral;
  else if (archName == kHfArchitectures[2])
    arch = Arch::Qwen2;
  else {
    std::string known;
    for (const char *a : kHfArchitectures)
      known += (known.empty() ? "" : ", ") + std::string(a);
    fail(error, "config.json: architecture '" + printable(archName, 60) +
                    "' is not supported (" + known + ")");
    return std::nullopt;
  }

  Llama2cConfig c;
  c.ropePairs = RopePairs::Half;
  c.legacyRopeTables = false;
  int64_t dim = 0, hidden = 0, layers = 0, heads = 0, kvHeads = -1, vocab = 0,
          context = 0, headDim = 0;
  if (!f.integer("hidden_size", dim) ||
      !f.integer("intermediate_size", hidden) ||
      !f.integer("num_hidden_layers", layers) ||
      !f.integer("num_attention_heads", heads) ||
      !f.integer("num_key_value_heads", kvHeads, false) ||
      !f.integer("vocab_size", vocab) ||
      !f.integer("max_position_embeddings", context) ||
      !f.integer("head_dim", headDim, false))
    return std::nullopt;
  c.dim = int32_t(dim);
  c.hiddenDim = int32_t(hidden);
  c.layers = int32_t(layers);
  c.heads = int32_t(heads);
  c.kvHeads = int32_t(kvHeads == -1 ? heads : kvHeads); // HF's default: MHA
  c.vocab = int32_t(vocab);
  c.seqLen = int32_t(context);
  // An explicit head_dim equal to dim / heads is the default spelled out.
  c.explicitHeadDim = headDim > 0 && !(heads > 0 && headDim * heads == dim)
                          ? int32_t(headDim)
                          : 0;
  if (f.has("head_dim") && headDim <= 0) {
    fail(error, "config.json: head_dim " + std::to_string(headDim) +
                    " is not positive");
    return std::nullopt;
  }
  static const ShapeFieldNames names = {
      "config.json",         "hidden_size",
      "intermediate_size",   "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads",
      "vocab_size",          "max_position_embeddings"};
  if (!checkModelShape(c, names, error))
    return std::nullopt;

  // The class defaults of transformers for fields left out.
  double eps = 1e-6, theta = 10000;
  if (!f.number("rms_norm_eps", eps) || !f.number("rope_theta", theta))
    return std::nullopt;
  // The graph adds eps in f32: it must be a normal f32 too.
  if (!(eps < 1 && float(eps) >= std::numeric_limits<float>::min())) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", eps);
    fail(error, std::string("config.json: rms_norm_eps ") + text +
                    " is not in [1.2e-38, 1) (a positive normal f32)");
    return std::nullopt;
  }
  if (!(theta > 1 && theta < 1e12)) {
    fail(error, "config.json: rope_theta " + std::to_string(theta) +
                    " is not in (1, 1e12)");
    return std::nullopt;
  }
  c.normEps = float(eps);
  c.ropeTheta = float(theta);
  f.use("rope_scaling");
  if (f.has("rope_scaling") &&
      !parseRopeScaling(j["rope_scaling"], c.ropeScaling, error))
    return std::nullopt;

  std::string act = "silu";
  if (!f.string("hidden_act", act))
    return std::nullopt;
  if (act != "silu") {
    fail(error, "config.json: hidden_act '" + printable(act, 40) +
                    "' is not supported (silu)");
    return std::nullopt;
  }
  bool tied = false, attentionBias = false, mlpBias = false;
  if (!f.boolean("tie_word_embeddings", tied) ||
      !f.boolean("attention_bias", attentionBias) ||
      !f.boolean("mlp_bias", mlpBias))
    return std::nullopt;
  c.sharedClassifier = tied;
  if (mlpBias) {
    fail(error, "config.json: mlp_bias true is not supported (the MLP "
                "projections have no bias)");
    return std::nullopt;
  }
  if (arch == Arch::Qwen2) {
    // Qwen2's q/k/v projections always have biases, its o_proj none.
    if (attentionBias) {
      fail(error, "config.json: attention_bias true is not Qwen2's "
                  "attention (biases on q, k and v only)");
      return std::nullopt;
    }
    c.qkvBias = true;
  } else if (attentionBias) {
    if (arch == Arch::Mistral) {
      fail(error, "config.json: attention_bias true is not supported for "
                  "MistralForCausalLM");
      return std::nullopt;
    }
    c.qkvBias = c.outBias = true;
  }

  // Sliding-window attention: kvq attends over every cached token, which
  // is the same model only when the window covers the whole context.
  int64_t window = 0, maxWindowLayers = 0;
  bool useWindow = arch == Arch::Mistral;
  if (arch == Arch::Llama) {
    // LlamaForCausalLM has no sliding window: such a field is unknown.
  } else {
    if (!f.integer("sliding_window", window, false))
      return std::nullopt;
    if (arch == Arch::Qwen2 &&
        (!f.boolean("use_sliding_window", useWindow) ||
         !f.integer("max_window_layers", maxWindowLayers, false)))
      return std::nullopt;
    if (arch == Arch::Qwen2 && useWindow && maxWindowLayers >= layers)
      useWindow = false; // no layer uses the window
    if (useWindow && f.has("sliding_window") && window < context) {
      fail(error, "config.json: sliding_window " + std::to_string(window) +
                      " is shorter than max_position_embeddings " +
                      std::to_string(context) +
                      ": sliding-window attention is not supported");
      return std::nullopt;
    }
  }
  f.use("layer_types");
  if (f.has("layer_types")) {
    bool full = j["layer_types"].is_array();
    for (const json &t : j["layer_types"])
      full = full && t.is_string() && t.get<std::string>() == "full_attention";
    if (!full) {
      fail(error, "config.json: layer_types other than full_attention "
                  "(sliding-window attention) are not supported");
      return std::nullopt;
    }
  }
  if (!f.noneLeft())
    return std::nullopt;
  return c;
}

namespace {

/// A tensor of the folder: which file holds it and where.
struct Located {
  size_t file;
  tio::Entry entry;
};

std::string shapeText(const std::vector<int64_t> &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace

std::optional<Llama2cCheckpoint> openHfFolder(const std::string &dirIn,
                                              std::string *error) {
  std::string dir = dirIn;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  std::string text;
  if (!readSmallFile(dir + "/config.json", text, error))
    return std::nullopt;
  std::optional<Llama2cConfig> config = parseHfConfig(text, error);
  if (!config) {
    if (error)
      *error = dir + "/" + *error;
    return std::nullopt;
  }
  const Llama2cConfig &c = *config;

  // The files and, for a sharded model, which tensor each holds.
  std::vector<std::string> files;
  std::map<std::string, std::string> weightMap; // tensor -> file
  const std::string index = dir + "/model.safetensors.index.json";
  if (exists(index)) {
    if (!readSmallFile(index, text, error))
      return std::nullopt;
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      fail(error, index + ": not a JSON object with a 'weight_map' object");
      return std::nullopt;
    }
    std::set<std::string> seen;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      const json &v = it.value();
      std::string file = v.is_string() ? v.get<std::string>() : "";
      // A shard is a file of the folder, nothing else.
      if (file.empty() || file.find('/') != std::string::npos || file == "." ||
          file == "..") {
        fail(error, index + ": tensor '" + printable(it.key(), 60) +
                        "' maps to '" + printable(v.dump(), 60) +
                        "', not a file name of the folder");
        return std::nullopt;
      }
      weightMap[it.key()] = file;
      if (seen.insert(file).second)
        files.push_back(file);
    }
    if (files.empty()) {
      fail(error, index + ": the weight_map is empty");
      return std::nullopt;
    }
  } else if (exists(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    fail(error, dir + ": neither model.safetensors nor "
                      "model.safetensors.index.json (kvq reads safetensors "
                      "weights only)");
    return std::nullopt;
  }

  // Every file's header, checked in full before any weight is read.
  std::vector<std::unique_ptr<tio::FileSource>> sources;
  std::map<std::string, Located> tensors;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = dir + "/" + files[i];
    auto src = std::make_unique<tio::FileSource>();
    std::vector<tio::Entry> entries;
    std::string err;
    if (!src->open(path, err)) {
      fail(error, err); // names the file
      return std::nullopt;
    }
    if (!tio::list(*src, tio::Format::Safetensors, entries, err)) {
      fail(error, path + ": " + err);
      return std::nullopt;
    }
    for (tio::Entry &e : entries) {
      if (tensors.count(e.name)) {
        fail(error, path + ": tensor '" + printable(e.name, 60) +
                        "' is also in " + files[tensors[e.name].file]);
        return std::nullopt;
      }
      if (!weightMap.empty()) {
        auto m = weightMap.find(e.name);
        if (m == weightMap.end() || m->second != files[i]) {
          fail(error,
               path + ": tensor '" + printable(e.name, 60) + "' " +
                   (m == weightMap.end()
                        ? std::string("is not in the index's weight_map")
                        : "is mapped to " + m->second + " by the index"));
          return std::nullopt;
        }
      }
      const std::string name = e.name;
      tensors[name] = {i, std::move(e)};
    }
    sources.push_back(std::move(src));
  }
  for (const auto &[name, file] : weightMap)
    if (!tensors.count(name)) {
      fail(error, dir + "/" + file + ": lacks tensor '" + printable(name, 60) +
                      "' that the index maps to it");
      return std::nullopt;
    }

  // What the model reads: Hugging Face name, shape, destination offset.
  struct Want {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset;
  };
  const Llama2cLayout l = llama2cLayout(c);
  const int64_t dim = c.dim, hid = c.hiddenDim, qDim = c.qDim(),
                kvDim = c.kvDim();
  std::vector<Want> want = {
      {"model.embed_tokens.weight", {c.vocab, dim}, l.embedding}};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    want.push_back({p + "input_layernorm.weight", {dim}, l.attnNorm + i * dim});
    want.push_back(
        {p + "self_attn.q_proj.weight", {qDim, dim}, l.wq + i * qDim * dim});
    want.push_back(
        {p + "self_attn.k_proj.weight", {kvDim, dim}, l.wk + i * kvDim * dim});
    want.push_back(
        {p + "self_attn.v_proj.weight", {kvDim, dim}, l.wv + i * kvDim * dim});
    want.push_back(
        {p + "self_attn.o_proj.weight", {dim, qDim}, l.wo + i * dim * qDim});
    if (c.qkvBias) {
      want.push_back({p + "self_attn.q_proj.bias", {qDim}, l.bq + i * qDim});
      want.push_back({p + "self_attn.k_proj.bias", {kvDim}, l.bk + i * kvDim});
      want.push_back({p + "self_attn.v_proj.bias", {kvDim}, l.bv + i * kvDim});
    }
    if (c.outBias)
      want.push_back({p + "self_attn.o_proj.bias", {dim}, l.bo + i * dim});
    want.push_back(
        {p + "post_attention_layernorm.weight", {dim}, l.ffnNorm + i * dim});
    want.push_back(
        {p + "mlp.gate_proj.weight", {hid, dim}, l.w1 + i * hid * dim});
    want.push_back(
        {p + "mlp.down_proj.weight", {dim, hid}, l.w2 + i * dim * hid});
    want.push_back(
        {p + "mlp.up_proj.weight", {hid, dim}, l.w3 + i * hid * dim});
  }
  want.push_back({"model.norm.weight", {dim}, l.finalNorm});
  if (!c.sharedClassifier)
    want.push_back({"lm_head.weight", {c.vocab, dim}, l.classifier});

  std::set<std::string> wanted;
  for (const Want &w : want)
    wanted.insert(w.name);
  for (const auto &[name, at] : tensors) {
    if (wanted.count(name))
      continue;
    // Left over by older conversions (RoPE is recomputed), or a tied
    // classifier saved anyway (transformers ties it to the embedding).
    bool rotary = name.size() > 21 && name.compare(name.size() - 21, 21,
                                                   ".rotary_emb.inv_freq") == 0;
    if (rotary || (c.sharedClassifier && name == "lm_head.weight"))
      continue;
    fail(error, dir + "/" + files[at.file] + ": tensor '" +
                    printable(name, 80) + "' is not part of the " +
                    "model kvq reads (an unsupported variant?)");
    return std::nullopt;
  }
  for (const Want &w : want) {
    auto it = tensors.find(w.name);
    if (it == tensors.end()) {
      fail(error,
           dir + ": tensor '" + w.name + "' is missing" +
               (w.name == "lm_head.weight" ? " (tie_word_embeddings is false)"
                                           : ""));
      return std::nullopt;
    }
    const tio::Entry &e = it->second.entry;
    const std::string where =
        dir + "/" + files[it->second.file] + ": tensor '" + w.name + "'";
    if (!e.problem.empty()) {
      fail(error, dir + "/" + files[it->second.file] + ": " + e.problem);
      return std::nullopt;
    }
    if (e.shape != w.shape) {
      fail(error, where + " has shape " + shapeText(e.shape) +
                      ", the config gives " + shapeText(w.shape));
      return std::nullopt;
    }
  }

  // Every header agrees with the config. When every matrix is F16 (or
  // every one BF16) the weights are kept in that type, any vector of
  // another dtype rounded to it; else they are widened to f32.
  Llama2cCheckpoint::Storage storage = Llama2cCheckpoint::Storage::F32;
  {
    bool allF16 = true, allBf16 = true;
    for (const Want &w : want)
      if (w.shape.size() == 2) {
        tio::DType d = tensors[w.name].entry.dtype;
        allF16 = allF16 && d == tio::DType::F16;
        allBf16 = allBf16 && d == tio::DType::BF16;
      }
    storage = allF16    ? Llama2cCheckpoint::Storage::F16
              : allBf16 ? Llama2cCheckpoint::Storage::BF16
                        : Llama2cCheckpoint::Storage::F32;
  }
  if (storage != Llama2cCheckpoint::Storage::F32) {
    const bool bf16 = storage == Llama2cCheckpoint::Storage::BF16;
    const tio::DType kept = bf16 ? tio::DType::BF16 : tio::DType::F16;
    std::vector<uint16_t> bits(size_t(l.total), 0);
    std::vector<float> data;
    for (const Want &w : want) {
      const Located &at = tensors[w.name];
      const std::string where =
          dir + "/" + files[at.file] + ": tensor '" + w.name + "'";
      std::string err;
      uint16_t *out = bits.data() + w.offset;
      const size_t n = size_t(at.entry.bytes / tio::dtypeSize(at.entry.dtype));
      if (at.entry.dtype == kept) {
        if (!sources[at.file]->read(at.entry.offset, out, n * 2, err)) {
          fail(error, where + ": " + err);
          return std::nullopt;
        }
      } else {
        if (!tio::readData(*sources[at.file], at.entry, data, err)) {
          fail(error, where + ": " + err);
          return std::nullopt;
        }
        for (size_t i = 0; i < n; ++i)
          out[i] = bf16 ? tio::floatToBf16(data[i])
                        : npy::floatToHalf(data[i]);
      }
      const uint16_t expMask = bf16 ? 0x7f80 : 0x7c00;
      for (size_t i = 0; i < n; ++i)
        if ((out[i] & expMask) == expMask) {
          fail(error, where + ", element " + std::to_string(i) + " is " +
                          ((out[i] & (bf16 ? 0x7f : 0x3ff)) ? "NaN"
                                                            : "infinite") +
                          " in " + (bf16 ? "bf16" : "f16") +
                          " (every weight must be finite)");
          return std::nullopt;
        }
    }
    return Llama2cCheckpoint::fromNarrowWeights(c, std::move(bits), storage);
  }
  std::vector<float> weights(size_t(l.total), 0.0f), data;
  for (const Want &w : want) {
    const Located &at = tensors[w.name];
    std::string err;
    if (!tio::readData(*sources[at.file], at.entry, data, err)) {
      fail(error,
           dir + "/" + files[at.file] + ": tensor '" + w.name + "': " + err);
      return std::nullopt;
    }
    for (size_t i = 0; i < data.size(); ++i)
      if (!std::isfinite(data[i])) {
        fail(error, dir + "/" + files[at.file] + ": tensor '" + w.name +
                        "', element " + std::to_string(i) + " is " +
                        (std::isnan(data[i]) ? "NaN" : "infinite") +
                        " (every weight must be finite)");
        return std::nullopt;
      }
    std::memcpy(weights.data() + w.offset, data.data(),
                data.size() * sizeof(float));
  }
  return Llama2cCheckpoint::fromWeights(c, std::move(weights));
}

} // namespace kvq::model
