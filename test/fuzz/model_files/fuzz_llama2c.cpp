//===- fuzz_llama2c.cpp - libFuzzer target for the checkpoint reader ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Any bytes opened as a llama2.c checkpoint (tools/model/llama2c.h): either
// refused with a one-line message, or accepted with a size that is exactly
// the header plus the weights its header describes, every weight the model
// reads finite, and every tensor inside the weights. A crash, a sanitizer
// report or a broken promise is a finding.
//
//===----------------------------------------------------------------------===//
#include "memfile.h"
#include "tools/model/llama2c.h"

#include <cmath>

using namespace kvq::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kvqfuzz::MemFile file(data, size);
  std::string error;
  std::optional<Llama2cCheckpoint> ckpt =
      Llama2cCheckpoint::open(file.path(), &error);
  if (!ckpt) {
    kvqfuzz::checkOneLine(error);
    return 0;
  }
  const Llama2cConfig &c = ckpt->config();
  const Llama2cLayout &l = ckpt->layout();
  if (int64_t(size) != kLlama2cHeaderBytes + 4 * l.total)
    std::abort();
  if (c.dim % c.heads != 0 || c.heads % c.kvHeads != 0 || c.headDim() % 2)
    std::abort();
  const float *w = ckpt->weights();
  for (const Llama2cTensor &t : llama2cTensors(c, l)) {
    const int64_t n = t.elements * (t.perLayer ? c.layers : 1);
    if (t.offset < 0 || n < 0 || t.offset + n > l.total)
      std::abort();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(w[t.offset + i]))
        std::abort();
  }
  return 0;
}
