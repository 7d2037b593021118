//===- eval_configs.h - The configurations kvq-eval evaluates ----*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every method and width asked for, times every combination of the listed
// method flags' values (and with --rope-compare each one's post-RoPE twin).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_CONFIGS_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_CONFIGS_H

#include "eval_common.h"
#include "eval_inputs.h"
#include "eval_options.h"
#include "kvq/runtime.h"

#include <string>
#include <vector>

namespace kvq::eval {

/// One evaluated configuration.
struct Config {
  std::string method;
  kvq_config cfg;
  int keyBits = 16, valueBits = 16;
  std::string swept; ///< values of the listed flags, e.g. " G=32 R=128"
  /// With --pre-rope: " pre-RoPE" (the cache stores the keys before RoPE)
  /// or " post-RoPE" (--rope-compare: it stores them rotated).
  std::string rope;
  bool preRope() const { return cfg.rope_style != KVQ_ROPE_NONE; }
  std::string label() const {
    return (method == "fp16"
                ? method
                : method + " " + std::to_string(keyBits) + "-bit") +
           swept + rope;
  }
};

/// The configurations of the options for these inputs, in report order;
/// a flag given for a method that ignores it is a warning.
std::vector<Config> planConfigs(const Options &opt, const Inputs &in,
                                Warnings &warn);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_CONFIGS_H
