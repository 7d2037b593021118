//===- checkpoint.cpp - a model file or folder, whatever its format -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "tools/model/checkpoint.h"
#include "tools/model/gguf.h"
#include "tools/model/hf.h"

#include <sys/stat.h>

namespace kvq::model {

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<Llama2cCheckpoint> openCheckpoint(const std::string &path,
                                                std::string *error) {
  if (isDirectory(path))
    return openHfFolder(path, error);
  if (isGguf(path))
    return openGguf(path, error);
  return Llama2cCheckpoint::open(path, error);
}

} // namespace kvq::model
