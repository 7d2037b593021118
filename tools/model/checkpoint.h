//===- checkpoint.h - a model file or folder, whatever its format -*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What kvq-import and kvq-run open: a Hugging Face folder (hf.h), a GGUF
// file (gguf.h) or a llama2.c checkpoint (llama2c.h), as one
// Llama2cCheckpoint.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_MODEL_CHECKPOINT_H
#define KVQ_TOOLS_MODEL_CHECKPOINT_H

#include "tools/model/llama2c.h"

#include <optional>
#include <string>

namespace kvq::model {

bool isDirectory(const std::string &path);

/// A directory is read as a Hugging Face folder, a file starting with
/// "GGUF" as GGUF (gguf.h), any other path as a llama2.c checkpoint. On failure
/// returns nullopt and one line.
std::optional<Llama2cCheckpoint> openCheckpoint(const std::string &path,
                                                std::string *error);

} // namespace kvq::model

#endif // KVQ_TOOLS_MODEL_CHECKPOINT_H
