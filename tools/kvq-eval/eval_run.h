//===- eval_run.h - kvq-eval's runs of the caches ----------------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every configuration on every (layer, batch) unit, through the runtime as
// a model would use it (a prompt-sized prefill, then one token per update),
// measured against the float64 reference (tools/reference).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_RUN_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_RUN_H

#include "eval_configs.h"
#include "eval_inputs.h"
#include "eval_metrics.h"
#include "eval_options.h"
#include "kvq/runtime.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace kvq::eval {

/// One configuration on one unit.
struct Row {
  size_t config = 0;
  int64_t layer = 0, batch = 0;
  Parts key, value, attn;
  kvq_stats stats{};
  std::vector<int64_t> sinkPositions;
};

/// Summed over units.
struct Summary {
  Parts key, value, attn;
  int64_t totalBytes = 0, fp16Bytes = 0, compressed = 0;
  double effectiveBits() const {
    return fp16Bytes ? 16.0 * static_cast<double>(totalBytes) /
                           static_cast<double>(fp16Bytes)
                     : NAN;
  }
};

/// What a run measured.
struct Results {
  std::vector<Row> rows;        ///< unit by unit, configurations in order
  std::vector<Summary> summary; ///< per configuration
  int threads = 1;              ///< --threads, or the machine's (<= 64)
};

/// Runs every configuration on every unit; exits with a one-line error
/// when the runtime refuses one.
Results runAll(const Options &opt, const Inputs &in,
               const std::vector<Config> &configs);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_RUN_H
