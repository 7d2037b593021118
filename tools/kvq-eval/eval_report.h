//===- eval_report.h - What kvq-eval prints ----------------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_REPORT_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_REPORT_H

#include "eval_common.h"
#include "eval_configs.h"
#include "eval_inputs.h"
#include "eval_options.h"
#include "eval_run.h"

#include <vector>

namespace kvq::eval {

/// Adds the warnings about what the numbers mean, recommends (--budget),
/// plots (--plot), prints the warnings on stderr and the report (JSON with
/// --json, else the table) on stdout.
void report(const Options &opt, const Inputs &in,
            const std::vector<Config> &configs, const Results &res,
            Warnings &warn);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_REPORT_H
