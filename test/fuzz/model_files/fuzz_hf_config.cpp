//===- fuzz_hf_config.cpp - libFuzzer target for config.json --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Any bytes parsed as a Hugging Face config.json (tools/model/hf.h): either
// refused with a one-line message, or accepted as a config whose shape
// passes checkModelShape, with a finite positive eps and theta and a
// layout that fits int64. (The safetensors files of a folder are read by
// kvq-eval's reader, fuzzed by fuzz_tensor_io.)
//
//===----------------------------------------------------------------------===//
#include "memfile.h"
#include "tools/model/hf.h"

#include <cmath>

using namespace kvq::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::optional<Llama2cConfig> c = parseHfConfig(
      std::string(reinterpret_cast<const char *>(data), size), &error);
  if (!c) {
    kvqfuzz::checkOneLine(error);
    return 0;
  }
  static const ShapeFieldNames names = {"fuzz", "a", "b", "c",
                                        "d",    "e", "f", "g"};
  if (!checkModelShape(*c, names, &error) || !(c->normEps > 0) ||
      !std::isfinite(c->ropeTheta) || !(c->ropeTheta > 1))
    std::abort();
  if (llama2cLayout(*c).total <= 0)
    std::abort();
  for (double f : ropeInverseFrequencies(*c))
    if (!std::isfinite(f) || f <= 0)
      std::abort();
  return 0;
}
