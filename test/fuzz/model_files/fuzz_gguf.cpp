//===- fuzz_gguf.cpp - libFuzzer target for the GGUF reader ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Any bytes opened as a GGUF file (tools/model/gguf.h): either refused with
// a one-line message, or accepted as a model whose config passes
// checkModelShape and whose every weight is finite. The same bytes' embedded
// tokenizer (openGgufTokenizer): absent without an error, refused with one
// line, or a tokenizer whose encoding of a fixed text gives ids inside its
// vocabulary. A crash, a sanitizer report or a broken promise is a finding.
//
//===----------------------------------------------------------------------===//
#include "memfile.h"
#include "tools/model/gguf.h"

#include <cmath>

using namespace kvq::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kvqfuzz::MemFile file(data, size);
  std::string error;
  bool present = false;
  std::optional<Tokenizer> tok =
      openGgufTokenizer(file.path(), 0, &present, &error);
  if (tok) {
    for (int32_t id : tok->encode("Once upon a time, 12 \xC3\xA9t\xC3\xA9s!", true))
      if (id < 0 || id >= tok->vocabSize())
        std::abort();
  } else if (present) {
    kvqfuzz::checkOneLine(error);
  } else if (!error.empty() && error.find('\n') != std::string::npos) {
    std::abort();
  }
  error.clear();
  std::optional<Llama2cCheckpoint> ckpt = openGguf(file.path(), &error);
  if (!ckpt) {
    kvqfuzz::checkOneLine(error);
    return 0;
  }
  const Llama2cConfig &c = ckpt->config();
  static const ShapeFieldNames names = {"fuzz", "a", "b", "c",
                                        "d",    "e", "f", "g"};
  if (!checkModelShape(c, names, &error))
    std::abort();
  const float *w = ckpt->weights();
  for (int64_t i = 0; i < ckpt->layout().total; ++i)
    if (!std::isfinite(w[i]))
      std::abort();
  return 0;
}
