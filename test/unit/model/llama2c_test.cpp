//===- llama2c_test.cpp - what the checkpoint reader refuses --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Offsets into stories260K (dim 64, hidden 172, 5 layers, 4 KV heads of 8,
// vocab 512, seq_len 512) are worked out by hand from llama2.c's layout
// (run.c's memory_map_weights), not taken from llama2cLayout.
//
//===----------------------------------------------------------------------===//
#include "llama2c.h"
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using kvq::model::Llama2cCheckpoint;
using namespace kvqtest;

namespace {

// Floats after the header: 512*64 embedding, 5*64 rms_att, 5*64*64 wq,
// 5*32*64 wk and wv, 5*64*64 wo, 5*64 rms_ffn, 3 * 5*172*64 w1/w2/w3,
// 64 rms_final, 512*8 legacy RoPE tables.
constexpr int64_t kWq = 512 * 64 + 5 * 64;
constexpr int64_t kWk = kWq + 5 * 64 * 64;
constexpr int64_t kRmsFinal = kWk + 2 * 5 * 32 * 64 + 5 * 64 * 64 + 5 * 64 +
                              3 * 5 * 172 * 64;
constexpr int64_t kRopeTables = kRmsFinal + 64;
constexpr int64_t kFloats = kRopeTables + 512 * 8;

std::vector<char> stories() {
  std::vector<char> b = readBytes(modelPath("stories260K.bin"));
  EXPECT_EQ(b.size(), size_t(28 + 4 * kFloats)) << "hand-computed layout";
  return b;
}

void setFloat(std::vector<char> &b, int64_t index, float v) {
  std::memcpy(b.data() + 28 + 4 * index, &v, 4);
}

/// open()'s message for `bytes`, failing the test if it opened.
std::string refusal(const std::string &name, const std::vector<char> &bytes) {
  std::string err;
  auto ckpt = Llama2cCheckpoint::open(writeScratch(name, bytes), &err);
  EXPECT_FALSE(ckpt.has_value()) << name << " was accepted";
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

} // namespace

TEST(Llama2cCheckpoint, OpensStories260K) {
  std::string err;
  auto ckpt = Llama2cCheckpoint::open(modelPath("stories260K.bin"), &err);
  ASSERT_TRUE(ckpt) << err;
  EXPECT_EQ(ckpt->layout().total, kFloats);
  EXPECT_EQ(ckpt->layout().wk, kWk);
}

TEST(Llama2cCheckpoint, TrailingBytesAreRefused) {
  std::vector<char> b = stories();
  b.insert(b.end(), {0, 0, 0, 0});
  std::string err = refusal("llama2c-trailing.bin", b);
  EXPECT_NE(err.find("1056544 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("describes exactly 1056540"), std::string::npos) << err;
  EXPECT_NE(err.find(": 4 bytes follow the weights"), std::string::npos) << err;
  // One trailing byte: the weights would not even be whole floats.
  b.resize(b.size() - 3);
  err = refusal("llama2c-trailing1.bin", b);
  EXPECT_NE(err.find(": 1 byte follows the weights"), std::string::npos) << err;
}

TEST(Llama2cCheckpoint, TruncatedFileIsRefused) {
  std::vector<char> b = stories();
  b.resize(b.size() - 4);
  std::string err = refusal("llama2c-short.bin", b);
  EXPECT_NE(err.find("the weights are truncated"), std::string::npos) << err;
}

TEST(Llama2cCheckpoint, NaNWeightIsRefusedNamingItsTensorAndLayer) {
  std::vector<char> b = stories();
  // wk of layer 2 starts 2 * 32 * 64 floats into wk.
  setFloat(b, kWk + 2 * 32 * 64 + 5, std::numeric_limits<float>::quiet_NaN());
  std::string err = refusal("llama2c-nan-wk.bin", b);
  EXPECT_NE(err.find("weight wk of layer 2, element 5 is NaN"),
            std::string::npos)
      << err;
}

TEST(Llama2cCheckpoint, InfiniteWeightIsRefusedNamingItsTensor) {
  std::vector<char> b = stories();
  setFloat(b, 7, -std::numeric_limits<float>::infinity());
  std::string err = refusal("llama2c-inf-emb.bin", b);
  EXPECT_NE(
      err.find("weight token_embedding_table, element 7 is infinite"),
      std::string::npos)
      << err;
  b = stories();
  setFloat(b, kRmsFinal + 63, std::numeric_limits<float>::infinity());
  err = refusal("llama2c-inf-final.bin", b);
  EXPECT_NE(err.find("weight rms_final_weight, element 63 is infinite"),
            std::string::npos)
      << err;
  // The first float of wq is the first of layer 0.
  b = stories();
  setFloat(b, kWq, std::numeric_limits<float>::signaling_NaN());
  err = refusal("llama2c-snan-wq.bin", b);
  EXPECT_NE(err.find("weight wq of layer 0, element 0 is NaN"),
            std::string::npos)
      << err;
}

TEST(Llama2cCheckpoint, NaNInASeparateClassifierIsRefused) {
  std::vector<char> b = withSeparateClassifier(stories());
  // wcls follows the legacy RoPE tables.
  setFloat(b, kFloats + 100, std::numeric_limits<float>::quiet_NaN());
  std::string err = refusal("llama2c-nan-wcls.bin", b);
  EXPECT_NE(err.find("weight wcls, element 100 is NaN"), std::string::npos)
      << err;
}

// llama2.c's legacy RoPE tables are not read by run.c nor by kvq (RoPE is
// recomputed): what they hold does not matter.
TEST(Llama2cCheckpoint, UnreadRopeTablesMayHoldAnything) {
  std::vector<char> b = stories();
  setFloat(b, kRopeTables, std::numeric_limits<float>::quiet_NaN());
  std::string err;
  auto ckpt =
      Llama2cCheckpoint::open(writeScratch("llama2c-nan-rope.bin", b), &err);
  EXPECT_TRUE(ckpt.has_value()) << err;
}
