//===- Options.h - kvq-run's command line -----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The flags of kvq-run (--help's text is in Options.cpp) and what the
// user asked for, read and range-checked before any model is opened.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_OPTIONS_H
#define KVQ_TOOLS_KVQ_RUN_OPTIONS_H

#include "tools/kvq-run/Sampling.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::run {

/// The numeric method flags that take comma lists: each one's spelling
/// (also its spec key), help, the methods that read it and the spec keys
/// that set it in a spec itself; the ranges are the shared vocabulary's
/// (kvq::cli::numericOption, tools/common/vocabulary.h), read as kvq-eval
/// reads them.
struct ListFlag {
  const char *name; ///< "bits": --bits, and the spec key bits=
  const char *help, *valueDesc;
  std::vector<std::string> methods, ownKeys;
  /// A value the range admits but the flag does not ("" if fine).
  std::string (*refuse)(long long value);
};

const std::vector<ListFlag> &listFlags();

/// The values of each of listFlags(), in its order (empty: not given).
struct MethodFlags {
  std::vector<std::vector<long long>> values =
      std::vector<std::vector<long long>>(listFlags().size());
};

struct Options {
  std::string modelPath; ///< as given (a path or random:...)
  std::string tokenizerPath, prompt;
  int64_t steps = 64;
  Sampling sampling;
  uint64_t seed = 1;
  std::string methods;       ///< --method's list
  bool methodsGiven = false; ///< --method was on the command line
  MethodFlags methodFlags;
  std::string perplexity, tokensFile; ///< the documents, if any
  int64_t prefill = 128;
  bool prefillGiven = false; ///< --prefill was on the command line
  bool klDivergence = false, json = false, quiet = false;
  bool bench = false;
  std::vector<int64_t> contexts;
  int benchSteps = 5;
  std::string weightType; ///< "" for the stored type
  std::string dumpKv;     ///< --dump-kv FILE
  bool matmulKernels = true;
  int64_t threads = 1;
};

/// The options of the command line; exits with --help, --version or a
/// one-line error (status 2).
Options parseOptions(int argc, char **argv);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_OPTIONS_H
