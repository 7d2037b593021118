//===- hf.h - Hugging Face model folders ------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A Hugging Face folder of a LlamaForCausalLM, MistralForCausalLM or
// Qwen2ForCausalLM: config.json, then model.safetensors or the shards that
// model.safetensors.index.json names. The weights go into the layout of
// llama2cLayout, q/k/v kept as Hugging Face orders them (the config says
// RopePairs::Half): as f16 / bf16 bits when every matrix is F16 / every one
// BF16 (other vectors rounded to that type), else converted to f32.
// Anything the loader does not understand (an architecture, a config field
// or value, a dtype, a tensor name or shape) is a one-line error naming it;
// the safetensors files are read by kvq-eval's strict reader
// (tools/kvq-eval/tensor_io.h). Plain C++, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_MODEL_HF_H
#define KVQ_TOOLS_MODEL_HF_H

#include "tools/model/llama2c.h"

#include <optional>
#include <string>

namespace kvq::model {

/// The architectures a config.json may name.
constexpr const char *kHfArchitectures[] = {
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};

/// config.json's text as a model config (RopePairs::Half, no legacy
/// tables). On failure returns nullopt and one line naming the field.
std::optional<Llama2cConfig> parseHfConfig(const std::string &json,
                                           std::string *error);

/// The folder `dir` as a model: its config and every weight in f32.
std::optional<Llama2cCheckpoint> openHfFolder(const std::string &dir,
                                              std::string *error);

} // namespace kvq::model

#endif // KVQ_TOOLS_MODEL_HF_H
