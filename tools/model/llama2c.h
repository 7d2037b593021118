//===- llama2c.h - llama2.c checkpoints: header, weight layout, mapping ---===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A llama2.c checkpoint is 7 int32 (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len; a negative vocab_size means the
// classifier has its own weights) followed by float32 weight arrays back to
// back. kvq-import emits a module that takes those floats as one argument
// and slices each weight at the offsets computed here; kvq-run maps the file
// and passes them. Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_MODEL_LLAMA2C_H
#define KVQ_TOOLS_MODEL_LLAMA2C_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvq::model {

/// How RoPE pairs the channels of a head: (2i, 2i+1) as llama2.c, or
/// (i, i + head_dim/2) as Hugging Face's Llama, Mistral and Qwen2.
enum class RopePairs { Interleaved, Half };

/// RoPE's frequency scaling (config.json's rope_scaling): none; linear
/// (every inverse frequency divided by `factor`); llama3 (Llama 3.1's
/// wavelength-dependent division by `factor`, smoothed between the low-
/// and high-frequency wavelengths of `originalContext`).
struct RopeScaling {
  enum class Kind { None, Linear, Llama3 } kind = Kind::None;
  double factor = 1, lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalContext = 0;
};

/// The model of a llama2.c checkpoint, and of the Hugging Face and GGUF
/// models of the same architecture (tools/model/checkpoint.h): the fields
/// after the header's seven are what a llama2.c file cannot say, with
/// llama2.c's values as defaults.
struct Llama2cConfig {
  int32_t dim = 0;
  int32_t hiddenDim = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kvHeads = 0;
  int32_t vocab = 0;
  int32_t seqLen = 0;
  /// The classifier is the token embedding table (vocab_size > 0 on disk).
  bool sharedClassifier = true;
  /// Channels per head; 0 means dim / heads (llama2.c's rule).
  int32_t explicitHeadDim = 0;
  float normEps = 1e-5f;
  float ropeTheta = 10000.0f;
  RopePairs ropePairs = RopePairs::Interleaved;
  RopeScaling ropeScaling;
  /// q, k and v projections have biases (Qwen2; Llama's attention_bias).
  bool qkvBias = false;
  /// The output projection has a bias (Llama's attention_bias).
  bool outBias = false;
  /// The file holds llama2.c's two unused RoPE tables before the classifier.
  bool legacyRopeTables = true;

  int32_t headDim() const {
    return explicitHeadDim > 0 ? explicitHeadDim : dim / heads;
  }
  int32_t qDim() const { return heads * headDim(); }
  int32_t kvDim() const { return kvHeads * headDim(); }
};

/// The inverse frequency f_i of each RoPE pair i < head_dim/2 (the angle at
/// position p is p * f_i), rope_scaling applied, in double.
std::vector<double> ropeInverseFrequencies(const Llama2cConfig &config);

/// Offsets, in floats from the first weight, of each weight array. Per-layer
/// arrays are stacked: layer l of wq starts at wq + l * dim * dim.
struct Llama2cLayout {
  int64_t embedding = 0, attnNorm = 0, wq = 0, wk = 0, wv = 0, wo = 0;
  int64_t ffnNorm = 0, w1 = 0, w2 = 0, w3 = 0, finalNorm = 0;
  int64_t classifier = 0;
  /// Biases (stacked per layer), when the config has them; else 0.
  int64_t bq = 0, bk = 0, bv = 0, bo = 0;
  /// Floats the checkpoint holds after the header.
  int64_t total = 0;
};

constexpr int64_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);

/// How a format names the shape fields (for messages).
struct ShapeFieldNames {
  const char *source; ///< "llama2.c header", "config.json", ...
  const char *dim, *hiddenDim, *layers, *heads, *kvHeads, *vocab, *seqLen;
};

/// Checks a config's shape: positive sizes within bounds that keep every
/// size product far from overflow, heads dividing dim (unless head_dim is
/// explicit), KV heads dividing heads, an even head_dim for RoPE. On
/// failure returns false and a one-line message naming the field.
bool checkModelShape(const Llama2cConfig &config, const ShapeFieldNames &names,
                     std::string *error);

/// A header's config, checked by checkModelShape. On failure returns
/// nullopt and a one-line message.
std::optional<Llama2cConfig> parseLlama2cHeader(const int32_t header[7],
                                                std::string *error);

/// Where each weight lives; the config must have passed parseLlama2cHeader.
Llama2cLayout llama2cLayout(const Llama2cConfig &config);

/// One weight array of a checkpoint, as llama2.c names it. A per-layer
/// tensor is `elements` floats per layer, stacked over the layers.
struct Llama2cTensor {
  const char *name;
  int64_t offset;
  int64_t elements;
  bool perLayer;
};

/// Every weight array the model reads, in file order (not the legacy RoPE
/// tables between rms_final_weight and wcls, which nothing reads).
std::vector<Llama2cTensor> llama2cTensors(const Llama2cConfig &config,
                                          const Llama2cLayout &layout);

/// "" if every weight the model reads is finite, else a one-line message
/// naming the first tensor (and layer and element) holding a NaN or an
/// infinity.
std::string findNonFiniteWeight(const Llama2cConfig &config,
                                const Llama2cLayout &layout,
                                const float *weights);

/// A checkpoint file mapped read-only. open() refuses a file whose size is
/// not exactly the header plus the weights its header describes, and one
/// whose weights hold a NaN or an infinity (findNonFiniteWeight).
class Llama2cCheckpoint {
public:
  static std::optional<Llama2cCheckpoint> open(const std::string &path,
                                               std::string *error);
  /// A model converted in memory from another format: `weights` holds
  /// llama2cLayout(config).total floats at that layout's offsets.
  static Llama2cCheckpoint fromWeights(const Llama2cConfig &config,
                                       std::vector<float> weights);
  /// The type the weights are held in: f32, or the f16 / bf16 of a file
  /// whose weights are in that type (kept as they are, not widened).
  enum class Storage { F32, F16, BF16 };
  /// A model whose weights are held as f16 or bf16 bits (`storage` not
  /// F32), llama2cLayout(config).total of them at that layout's offsets.
  static Llama2cCheckpoint fromNarrowWeights(const Llama2cConfig &config,
                                             std::vector<uint16_t> bits,
                                             Storage storage);
  // Defined where Mapping is complete.
  Llama2cCheckpoint(Llama2cCheckpoint &&);
  Llama2cCheckpoint &operator=(Llama2cCheckpoint &&);
  ~Llama2cCheckpoint();

  const Llama2cConfig &config() const { return config_; }
  const Llama2cLayout &layout() const { return layout_; }
  /// The layout().total floats after the header (4-byte aligned: the header
  /// is 28 bytes and the mapping is page aligned). For f16 / bf16 storage a
  /// widened f32 copy made on the first call and kept (not thread-safe).
  const float *weights() const;
  Storage storage() const { return storage_; }
  /// The f16 / bf16 bits (storage() not F32), else null.
  const uint16_t *narrowWeights() const {
    return storage_ == Storage::F32 ? nullptr : narrow_.data();
  }
  /// Bytes of weights this object holds now: the mapped or converted f32,
  /// the f16 / bf16 bits, plus a widened copy if weights() made one.
  int64_t heldWeightBytes() const;

private:
  Llama2cCheckpoint() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_; // a llama2.c file
  mutable std::vector<float> owned_; // or converted (or widened) weights
  std::vector<uint16_t> narrow_;      // or f16 / bf16 bits
  Storage storage_ = Storage::F32;
  Llama2cConfig config_;
  Llama2cLayout layout_;
};

/// Writes a checkpoint with `config` and weights drawn uniformly from
/// [-scale, scale] (RMSNorm weights 1), deterministic in `seed`: benchmarks
/// make realistic shapes without shipping weights.
bool writeRandomLlama2c(const std::string &path, const Llama2cConfig &config,
                        uint64_t seed, float scale, std::string *error);

} // namespace kvq::model

#endif // KVQ_TOOLS_MODEL_LLAMA2C_H
