//===- eval_options.h - kvq-eval's command line ------------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The flags of kvq-eval (--help's text is kUsage in eval_options.cpp): the
// numeric method flags that take lists, and what the user asked for.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_OPTIONS_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_OPTIONS_H

#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvq::eval {

/// A numeric method flag that takes a list: its range, the methods that
/// use it and where it goes in kvq_config.
struct Sweep {
  const char *flag;
  bool integer;
  double lo, hi; ///< integers [lo, hi]; fractions [lo, hi)
  std::vector<std::string> methods;
  void (*set)(kvq_config &, double);
  const char *shortName; ///< in configuration labels
};

/// Every numeric method flag, in the order of the configurations' labels.
const std::vector<Sweep> &sweeps();

struct Options {
  std::string keys, values, queries, layout, plot, queryPositions = "all";
  std::string save; ///< --save FILE
  std::vector<std::string> methods;
  std::vector<int> bits; ///< empty: each method's default
  /// Values of each numeric method flag (--group-size 32,64 ...; one
  /// value is a list of one); absent: the runtime's default.
  std::map<std::string, std::vector<double>> lists;
  long long prefill = -1;
  int residualMode = -1;
  double budget = -1;
  long long threads = 0;
  unsigned long long seed = 0;
  bool fitAll = false, json = false;
  /// --pre-rope: the keys are pre-RoPE; --rope-compare: post-RoPE twins.
  bool preRope = false, ropeCompare = false;
  double ropeTheta = kvq::kDefaultRopeTheta;
  int32_t ropeStyle = KVQ_ROPE_INTERLEAVED;
  std::vector<std::string> given; ///< flags the user set (for warnings)
};

/// The options of the command line; exits with --help, --version or a
/// one-line error.
Options parseOptions(int argc, char **argv);

/// Whether the user gave `flag`.
bool given(const Options &o, const char *flag);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_OPTIONS_H
