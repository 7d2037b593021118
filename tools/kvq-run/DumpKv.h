//===- DumpKv.h - kvq-run --dump-kv: a run's Q/K/V as kvq-eval reads them -===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// After a run of the plain model (method none) over `tokens`, writes one
// .safetensors file with, per layer, the keys the graph cached (post-RoPE),
// the same keys before RoPE, the values and the queries (post-RoPE), all
// in layout lthd [layers, tokens, heads, head_dim], f32:
//   keys          [L, T, kv_heads, head_dim]  (from the run's cache)
//   values        [L, T, kv_heads, head_dim]  (from the run's cache)
//   keys_pre_rope [L, T, kv_heads, head_dim]
//   queries       [L, T, heads, head_dim]
// Queries and pre-RoPE keys are recomputed by a plain f32 forward pass over
// the weights the graph read; its post-RoPE keys and values must match the
// run's cache, or the dump is refused. __metadata__ records the layout, the
// RoPE (theta, style, scaling) and the shape as strings.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_DUMPKV_H
#define KVQ_TOOLS_KVQ_RUN_DUMPKV_H

#include "tools/kvq-run/CompiledModel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::run {

/// `model` is the plain model (no kvq pass) that has just consumed
/// `tokens` at positions 0, 1, ... One-line error on failure.
bool dumpKv(const CompiledModel &model, const model::Llama2cCheckpoint &ckpt,
            const std::vector<int32_t> &tokens, const std::string &path,
            const std::string &modelName, std::string *error);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_DUMPKV_H
