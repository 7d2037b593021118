//===- eval_common.h - What every step of kvq-eval shares -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The tool's name in its messages, the one-line failure, the list of
// warnings printed at the end and the number formats of its messages.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_COMMON_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_COMMON_H

#include "flags.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::eval {

inline constexpr const char *kTool = "kvq-eval";

/// "kvq-eval: MSG" on stderr, exit status 2.
[[noreturn]] inline void die(const std::string &msg) {
  kvq::cli::fail(kTool, msg);
}

/// The warnings of a run, each once, in the order they were first given;
/// printed on stderr before the report (and listed in the JSON).
struct Warnings {
  std::vector<std::string> list;
  void operator()(const std::string &w);
};

/// printf of one number; "-" for NaN, "inf" / "-inf" for infinities.
std::string fmt(const char *f, double x);

/// "(2, 96, 32)".
std::string shapeStr(const std::vector<int64_t> &s);

/// --rope-style's name of a kvq_rope_style.
const char *ropeStyleName(int32_t style);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_COMMON_H
