//===- kvq_eval.cpp - Judge kvq's methods on your own K/V dumps -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Loads K, V (and optionally Q) from .npy, .npz or .safetensors files in a
// named layout (thd, htd, bhtd, lbhtd, ...), runs each requested method and
// width through the runtime exactly as a model would (a prompt-sized
// prefill, then one token per update), layer by layer, and reports
// reconstruction error (MSE, relative error, SNR), attention error -- over
// all tokens and separately for the prefill and the decoded part -- and the
// byte accounting, as a table or as JSON that records the inputs, the
// configuration of every row and the kvq version; a sweep of widths can be
// plotted and a budget in bits turned into a recommendation. With
// --pre-rope the keys are a pre-RoPE dump: every cache stores them before
// the rotation, and the reference rotates them itself (--rope-compare adds
// the same configurations storing the rotated keys).
//
// main() reads as the table of contents: the options (eval_options), the
// inputs (eval_inputs), the configurations (eval_configs), the runs
// (eval_run, measured against tools/reference) and the report
// (eval_report).
//===----------------------------------------------------------------------===//
#include "eval_common.h"
#include "eval_configs.h"
#include "eval_inputs.h"
#include "eval_options.h"
#include "eval_report.h"
#include "eval_run.h"

#include <vector>

int main(int argc, char **argv) {
  using namespace kvq::eval;
  const Options opt = parseOptions(argc, argv);
  Warnings warn;
  const Inputs in = loadInputs(opt, warn);
  const std::vector<Config> configs = planConfigs(opt, in, warn);
  const Results results = runAll(opt, in, configs);
  report(opt, in, configs, results, warn);
  return 0;
}
