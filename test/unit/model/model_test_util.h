//===- model_test_util.h - Paths and scratch files for tests -*- C++ -*-===//
#ifndef KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H
#define KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H

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

} // namespace kvqtest

#endif // KVQ_TEST_UNIT_MODEL_MODEL_TEST_UTIL_H
