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

  int32_t headDim() const { return dim / heads; }
  int32_t kvDim() const { return kvHeads * headDim(); }
};

/// Offsets, in floats from the first weight, of each weight array. Per-layer
/// arrays are stacked: layer l of wq starts at wq + l * dim * dim.
struct Llama2cLayout {
  int64_t embedding = 0, attnNorm = 0, wq = 0, wk = 0, wv = 0, wo = 0;
  int64_t ffnNorm = 0, w1 = 0, w2 = 0, w3 = 0, finalNorm = 0;
  int64_t classifier = 0;
  /// Floats the checkpoint holds after the header.
  int64_t total = 0;
};

constexpr int64_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);

/// Checks a header's values (positive sizes, heads dividing dim, KV heads
/// dividing heads, an even head_dim for RoPE, bounds that keep every size
/// product far from overflow). On failure returns nullopt and a one-line
/// message.
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
  // Defined where Mapping is complete.
  Llama2cCheckpoint(Llama2cCheckpoint &&);
  Llama2cCheckpoint &operator=(Llama2cCheckpoint &&);
  ~Llama2cCheckpoint();

  const Llama2cConfig &config() const { return config_; }
  const Llama2cLayout &layout() const { return layout_; }
  /// The layout().total floats after the header (4-byte aligned: the header
  /// is 28 bytes and the mapping is page aligned).
  const float *weights() const;

private:
  Llama2cCheckpoint() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
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
