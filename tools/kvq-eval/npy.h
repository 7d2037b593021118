//===- npy.h - Minimal NumPy .npy reader and writer -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// float16/float32, little-endian, C order, format versions 1.0 to 3.0. Every
// other file is rejected with a one-line reason.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_NPY_H
#define KVQ_TOOLS_KVQ_EVAL_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::npy {

/// A loaded array, converted to float.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
  bool wasHalf = false;
};

/// Read `path`; on failure returns false and sets err to a one-line reason.
bool read(const std::string &path, Array &out, std::string &err);

/// Parse an in-memory .npy image (used by read()).
bool parse(const std::vector<uint8_t> &bytes, Array &out, std::string &err);

/// Write float data as '<f4' (asHalf = false) or '<f2' (rounded to nearest
/// even), version 1.0 header, C order.
bool write(const std::string &path, const std::vector<int64_t> &shape,
           const std::vector<float> &data, bool asHalf, std::string &err);

/// float <-> binary16 (round to nearest even), independent of the runtime.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);

} // namespace kvq::npy

#endif // KVQ_TOOLS_KVQ_EVAL_NPY_H
