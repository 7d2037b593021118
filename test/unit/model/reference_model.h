//===- reference_model.h - float64 llama2.c forward pass -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// An independent reference for tests only: reads a llama2.c checkpoint by
// itself (no project code), widens every weight to double and runs the
// forward pass one token at a time with its own double KV cache. MHA or GQA,
// shared or separate classifier, interleaved-pair RoPE.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TEST_UNIT_MODEL_REFERENCE_MODEL_H
#define KVQ_TEST_UNIT_MODEL_REFERENCE_MODEL_H

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kvqtest {

struct ReferenceConfig {
  int dim = 0, hiddenDim = 0, nLayers = 0, nHeads = 0, nKvHeads = 0;
  int vocabSize = 0; // Always positive; see sharedClassifier.
  int seqLen = 0;
  int headDim = 0;              // dim / nHeads.
  bool sharedClassifier = true; // False when the header's vocab_size < 0.
};

class ReferenceModel {
public:
  /// Reads the checkpoint; the file size must match the header exactly. On
  /// failure returns std::nullopt and sets *error (if non-null).
  static std::optional<ReferenceModel> load(const std::string &path,
                                            std::string *error = nullptr);

  const ReferenceConfig &config() const { return cfg; }

  /// Runs `token` at `pos` and returns the vocabSize logits. Positions must
  /// come in order from 0 (or repeat one already run, which overwrites it and
  /// everything after is forgotten); a bad token, a position past the next
  /// one, or pos >= seqLen returns an empty vector.
  std::vector<double> forward(int token, int pos);

  /// Forgets every cached position.
  void reset() { filled = 0; }

  /// Number of positions in the cache (the next pos forward() accepts).
  int cachedPositions() const { return filled; }

  /// Post-RoPE key / value cached for (layer, pos): nKvHeads * headDim
  /// values, KV head major. Empty if (layer, pos) is not cached.
  std::vector<double> key(int layer, int pos) const;
  std::vector<double> value(int layer, int pos) const;

private:
  ReferenceModel() = default;
  /// Start of (layer, pos) in keyCache / valueCache.
  size_t kvOffset(int layer, int pos) const;

  ReferenceConfig cfg;
  // Weights, row-major [out][in] as stored.
  std::vector<double> embedding, attnNorm, wq, wk, wv, wo, ffnNorm, w1, w2, w3,
      finalNorm;
  std::vector<double> classifier; // Empty when shared with the embedding.
  // [layer][pos][kvHeads * headDim].
  std::vector<double> keyCache, valueCache;
  int filled = 0;
};

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_MODEL_REFERENCE_MODEL_H
