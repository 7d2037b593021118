//===- Methods.h - kvq-run: the methods a run compiles with -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// --method's specs (tools/common/vocabulary.h), each repeated for every
// value of the numeric method flags that apply to it, and the
// --kvq-quantize-kv-cache options each one compiles with.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_METHODS_H
#define KVQ_TOOLS_KVQ_RUN_METHODS_H

#include "tools/kvq-run/Options.h"

#include "vocabulary.h"

#include <optional>
#include <string>
#include <vector>

namespace kvq::run {

using kvq::cli::MethodSpec;

/// The --method specs, expanded by the method flags (a flag that no listed
/// method reads is a warning on stderr); nullopt after the one-line error.
std::optional<std::vector<MethodSpec>> planMethods(const Options &opt);

/// The --kvq-quantize-kv-cache options of a spec ("" for none).
std::string passOptionsFor(const MethodSpec &m);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_METHODS_H
