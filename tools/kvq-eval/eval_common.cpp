//===- eval_common.cpp - What every step of kvq-eval shares ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "eval_common.h"

#include "kvq/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvq::eval {

void Warnings::operator()(const std::string &w) {
  if (std::find(list.begin(), list.end(), w) == list.end())
    list.push_back(w);
}

std::string fmt(const char *f, double x) {
  if (std::isnan(x))
    return "-";
  if (std::isinf(x))
    return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

const char *ropeStyleName(int32_t style) {
  return style == KVQ_ROPE_HALF ? "half" : "interleaved";
}

} // namespace kvq::eval
