//===- gguf.h - GGUF model files (llama.cpp's format) -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A GGUF file (versions 2 and 3) of architecture "llama" (Llama, Mistral)
// or "qwen2", as one Llama2cCheckpoint: the config from the `ARCH.*`
// metadata, the weights into llama2cLayout: kept as f16 / bf16 bits when
// every matrix is F16 / every one BF16 (other vectors rounded to that
// type), else widened or dequantized to f32 (F32, F16, BF16, Q8_0, Q4_0). llama.cpp stores llama's q/k rows in
// interleaved-pair order (its conversion undoes Hugging Face's
// permutation) and Qwen2's as Hugging Face does, so the config says
// RopePairs::Interleaved or Half. The whole header (metadata, tensor
// table, offsets, alignment, sizes) is checked before any weight is read;
// anything not understood is one error naming it. Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_MODEL_GGUF_H
#define KVQ_TOOLS_MODEL_GGUF_H

#include "tools/model/llama2c.h"
#include "tools/model/tokenizer.h"

#include <optional>
#include <string>

namespace kvq::model {

/// True when the file starts with GGUF's magic.
bool isGguf(const std::string &path);

std::optional<Llama2cCheckpoint> openGguf(const std::string &path,
                                          std::string *error);

/// The tokenizer the file embeds (tokenizer.ggml.*, Tokenizer::fromTables).
/// Without tokenizer.ggml.model: nullopt, *present false and no error;
/// else *present is true and a malformed vocabulary is nullopt with one
/// line in *error.
std::optional<Tokenizer> openGgufTokenizer(const std::string &path,
                                          int32_t modelVocab, bool *present,
                                          std::string *error);

} // namespace kvq::model

#endif // KVQ_TOOLS_MODEL_GGUF_H
