//===- model_test_util.h - Paths and scratch files for tests -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#ifndef KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H
#define KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kvqtest {

inline std::string modelPath(const std::string &file) {
  return std::string(KVQ_MODEL_DIR) + "/" + file;
}

inline std::vector<char> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes bytes to a scratch file named after the caller (tests run as
/// separate processes, possibly in parallel) and returns its path.
inline std::string writeScratch(const std::string &name,
                                const std::vector<char> &bytes) {
  std::string path = std::string(KVQ_MODEL_TEST_TMP) + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  return path;
}

template <typename T> void appendRaw(std::vector<char> &out, T v) {
  const char *p = reinterpret_cast<const char *>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

/// The seven int32 of a llama2.c header.
struct Llama2cHeader {
  int32_t dim, hidden, layers, heads, kvHeads, vocab, seqLen;
};

inline Llama2cHeader headerOf(const std::vector<char> &b) {
  Llama2cHeader h;
  std::memcpy(&h, b.data(), sizeof(h));
  return h;
}

/// The same model with a separate classifier: negative vocab_size and the
/// embedding appended as the classifier.
inline std::vector<char> withSeparateClassifier(std::vector<char> b) {
  Llama2cHeader h = headerOf(b);
  size_t embBytes = size_t(h.vocab) * h.dim * 4;
  b.insert(b.end(), b.begin() + 28, b.begin() + 28 + embBytes);
  int32_t negVocab = -h.vocab;
  std::memcpy(b.data() + 5 * 4, &negVocab, 4);
  return b;
}

/// The same model as multi-head attention: the wk and wv rows of KV head kh
/// copied for each query head of its group.
inline std::vector<char> asMultiHead(const std::vector<char> &b) {
  Llama2cHeader h = headerOf(b);
  const size_t hd = h.dim / h.heads, group = h.heads / h.kvHeads;
  const size_t f = 4, rowBytes = h.dim * f;
  const size_t embB = size_t(h.vocab) * h.dim * f, normB = h.layers * h.dim * f;
  const size_t wqB = size_t(h.layers) * h.dim * h.dim * f;
  const size_t kvB = size_t(h.layers) * h.kvHeads * hd * h.dim * f;
  const char *wk = b.data() + 28 + embB + normB + wqB, *wv = wk + kvB;
  auto widen = [&](const char *w) {
    std::vector<char> out;
    for (int l = 0; l < h.layers; ++l)
      for (int qh = 0; qh < h.heads; ++qh) {
        const char *src =
            w + (size_t(l) * h.kvHeads + qh / group) * hd * rowBytes;
        out.insert(out.end(), src, src + hd * rowBytes);
      }
    return out;
  };
  std::vector<char> mha(b.begin(), b.begin() + (wk - b.data()));
  std::vector<char> k = widen(wk), v = widen(wv);
  mha.insert(mha.end(), k.begin(), k.end());
  mha.insert(mha.end(), v.begin(), v.end());
  mha.insert(mha.end(), wv + kvB, b.data() + b.size());
  std::memcpy(mha.data() + 4 * 4, &h.heads, 4); // n_kv_heads = n_heads
  return mha;
}

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H
