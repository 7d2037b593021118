//===- gguf_test.cpp - GGUF files: dequantization and refusals ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Tiny GGUF files written by this test's own writer; expected weights are
// computed here from the blocks written (scale times code).
//
//===----------------------------------------------------------------------===//
#include "gguf_bytes.h"
#include "tools/model/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

using namespace kvq::model;

namespace {

constexpr int kDim = 32, kHidden = 64, kHeads = 4, kKvHeads = 2, kVocab = 8,
              kContext = 16;

struct Tensor {
  std::string name;
  std::vector<uint64_t> dims; // innermost first
  uint32_t type;
  std::string data;
};

using kvq::test::put;
using kvq::test::putString;

/// A GGUF image: u32 metadata (plus the architecture and epsilon), then
/// the tensors 32-byte aligned.
std::string gguf(const std::vector<std::pair<std::string, uint32_t>> &u32s,
                 const std::vector<Tensor> &tensors,
                 const std::string &arch = "llama") {
  std::string b = "GGUF";
  put<uint32_t>(b, 3);
  put<uint64_t>(b, tensors.size());
  put<uint64_t>(b, u32s.size() + 2);
  putString(b, "general.architecture");
  put<uint32_t>(b, 8);
  putString(b, arch);
  putString(b, arch + ".attention.layer_norm_rms_epsilon");
  put<uint32_t>(b, 6);
  put<float>(b, 1e-5f);
  for (const auto &[k, v] : u32s) {
    putString(b, k);
    put<uint32_t>(b, 4);
    put<uint32_t>(b, v);
  }
  uint64_t at = 0;
  std::string data;
  for (const Tensor &t : tensors) {
    putString(b, t.name);
    put<uint32_t>(b, uint32_t(t.dims.size()));
    for (uint64_t d : t.dims)
      put<uint64_t>(b, d);
    put<uint32_t>(b, t.type);
    put<uint64_t>(b, at);
    data += t.data;
    data.append((32 - data.size() % 32) % 32, '\0');
    at = data.size();
  }
  b.append((32 - b.size() % 32) % 32, '\0');
  return b + data;
}

std::vector<std::pair<std::string, uint32_t>> shapeKeys() {
  return {{"llama.context_length", kContext},
          {"llama.embedding_length", kDim},
          {"llama.block_count", 1},
          {"llama.feed_forward_length", kHidden},
          {"llama.attention.head_count", kHeads},
          {"llama.attention.head_count_kv", kKvHeads}};
}

std::string f32s(size_t n, float v) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    put<float>(s, v + float(i % 7) * 0.125f);
  return s;
}

/// Q8_0 blocks: scale 2^-4 (exact in f16), codes i - 16 for element i.
std::string q8(size_t n) {
  std::string s;
  for (size_t b = 0; b < n / 32; ++b) {
    put<uint16_t>(s, 0x2C00); // 0.0625
    for (int j = 0; j < 32; ++j)
      put<int8_t>(s, int8_t(j - 16));
  }
  return s;
}
/// Q4_0 blocks: scale 0.5 (f16 0x3800), byte j = code j | code j+16 << 4
/// with code(k) = k % 16.
std::string q4(size_t n) {
  std::string s;
  for (size_t b = 0; b < n / 32; ++b) {
    put<uint16_t>(s, 0x3800);
    for (int j = 0; j < 16; ++j)
      put<uint8_t>(s, uint8_t(j | ((j + 16) % 16) << 4));
  }
  return s;
}

std::vector<Tensor> modelTensors() {
  const uint64_t d = kDim, h = kHidden, kv = kDim / kHeads * kKvHeads;
  return {
      {"token_embd.weight", {d, kVocab}, 0, f32s(d * kVocab, 0.5f)},
      {"output_norm.weight", {d}, 0, f32s(d, 1.0f)},
      {"blk.0.attn_norm.weight", {d}, 0, f32s(d, 1.0f)},
      {"blk.0.attn_q.weight", {d, d}, 8, q8(d * d)},
      {"blk.0.attn_k.weight", {d, kv}, 2, q4(d * kv)},
      {"blk.0.attn_v.weight", {d, kv}, 0, f32s(d * kv, 0.25f)},
      {"blk.0.attn_output.weight", {d, d}, 0, f32s(d * d, 0.25f)},
      {"blk.0.ffn_norm.weight", {d}, 0, f32s(d, 1.0f)},
      {"blk.0.ffn_gate.weight", {d, h}, 0, f32s(d * h, 0.25f)},
      {"blk.0.ffn_down.weight", {h, d}, 0, f32s(d * h, 0.25f)},
      {"blk.0.ffn_up.weight", {d, h}, 0, f32s(d * h, 0.25f)},
  };
}

std::string writeTemp(const std::string &name, const std::string &bytes) {
  std::string path = std::string(KVQ_MODEL_TEST_TMP) + "/" + name + ".gguf";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

TEST(Gguf, DequantizesEachTypeIntoItsPlace) {
  std::string error;
  auto ckpt = openCheckpoint(writeTemp("ok", gguf(shapeKeys(), modelTensors())),
                             &error);
  ASSERT_TRUE(ckpt) << error;
  const Llama2cConfig &c = ckpt->config();
  EXPECT_EQ(c.dim, kDim);
  EXPECT_EQ(c.kvHeads, kKvHeads);
  EXPECT_EQ(c.vocab, kVocab); // from token_embd's rows
  EXPECT_EQ(c.seqLen, kContext);
  EXPECT_TRUE(c.sharedClassifier); // no output.weight
  EXPECT_TRUE(c.ropePairs == RopePairs::Interleaved);
  const float *w = ckpt->weights();
  const Llama2cLayout &l = ckpt->layout();
  for (int i = 0; i < kDim * kDim; ++i) // Q8_0: 2^-4 * (i % 32 - 16)
    ASSERT_EQ(w[l.wq + i], 0.0625f * float(i % 32 - 16)) << i;
  for (int i = 0; i < kDim * 16; ++i) // Q4_0: 0.5 * (i % 16 - 8)
    ASSERT_EQ(w[l.wk + i], 0.5f * float(i % 16 - 8)) << i;
  EXPECT_EQ(w[l.embedding + 3], 0.5f + 3 * 0.125f);
  EXPECT_EQ(w[l.wv + 9], 0.25f + 2 * 0.125f);
}

struct Refusal {
  const char *name;
  std::function<std::string()> image;
  const char *message;
};

TEST(Gguf, RefusalsNameWhatTheyRefuse) {
  auto keys = shapeKeys();
  auto withKey = keys;
  withKey.push_back({"llama.expert_count", 8});
  auto noHeads = keys;
  noHeads.erase(noHeads.begin() + 4);
  std::vector<Refusal> cases = {
      {"arch", [&] { return gguf(keys, modelTensors(), "gemma"); },
       "general.architecture 'gemma' is not supported"},
      {"key", [&] { return gguf(withKey, modelTensors()); },
       "metadata key 'llama.expert_count' is not supported"},
      {"missing_key", [&] { return gguf(noHeads, modelTensors()); },
       "metadata key 'llama.attention.head_count' is missing"},
      {"type",
       [&] {
         auto t = modelTensors();
         t[3].type = 12; // Q4_K
         return gguf(keys, t);
       },
       "tensor 'blk.0.attn_q.weight' has type 12"},
      {"dims",
       [&] {
         auto t = modelTensors();
         t[5].dims = {16, 32};
         t[5].data.resize(16 * 32 * 4);
         return gguf(keys, t);
       },
       "tensor 'blk.0.attn_v.weight' has dims [16, 32], the metadata gives "
       "[32, 16]"},
      {"extra",
       [&] {
         auto t = modelTensors();
         t.push_back({"rope_freqs.weight", {4}, 0, f32s(4, 1)});
         return gguf(keys, t);
       },
       "tensor 'rope_freqs.weight' is not part of the model kvq reads "
       "(llama3 RoPE scaling"},
      {"missing",
       [&] {
         auto t = modelTensors();
         t.pop_back();
         return gguf(keys, t);
       },
       "tensor 'blk.0.ffn_up.weight' is missing"},
      {"truncated",
       [&] {
         std::string s = gguf(keys, modelTensors());
         return s.substr(0, s.size() - 40);
       },
       "outside the"},
      {"header", [&] { return gguf(keys, modelTensors()).substr(0, 60); },
       "metadata entry"},
      {"version",
       [&] {
         std::string s = gguf(keys, modelTensors());
         s[4] = 9;
         return s;
       },
       "GGUF version 9 is not supported"},
      {"nan",
       [&] {
         auto t = modelTensors();
         float nan = NAN;
         std::memcpy(&t[0].data[4 * 5], &nan, 4);
         return gguf(keys, t);
       },
       "tensor 'token_embd.weight', element 5 is NaN"},
  };
  for (const Refusal &r : cases) {
    std::string error;
    EXPECT_FALSE(openCheckpoint(writeTemp(r.name, r.image()), &error))
        << r.name;
    EXPECT_NE(error.find(r.message), std::string::npos)
        << r.name << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

} // namespace
