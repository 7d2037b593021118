//===- eval_inputs.h - The K/V/Q dumps kvq-eval judges on --------*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The tensors read, their layout and sizes, the protocol (prefill, then
// decode steps) and the query positions the attention is measured at.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_EVAL_EVAL_INPUTS_H
#define KVQ_TOOLS_KVQ_EVAL_EVAL_INPUTS_H

#include "eval_common.h"
#include "eval_options.h"
#include "tensor_io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::eval {

struct Input {
  kvq::tio::Tensor t;
  std::string spec;
};

/// Sizes of the named axes of a tensor under `layout` (absent: 1).
struct Axes {
  int64_t l = 1, b = 1, t = 0, h = 0, d = 0;
  int64_t sl = 0, sb = 0, st = 0, sh = 0, sd = 0; ///< element strides
};

/// The inputs of a run, checked against each other and the options.
struct Inputs {
  Input K, V, Q;
  bool haveQ = false;
  std::string layout; ///< given or inferred (thd for 3-D)
  Axes ka, qa;        ///< the axes of K and V, of Q
  int64_t T = 0, H = 0, D = 0, L = 1, B = 1;
  int64_t Hq = 0;      ///< query heads (with --queries)
  int64_t C = 0;       ///< H * D, the floats of one token
  int64_t prefill = 0; ///< tokens of the first update (T with --fit-all)
  /// The theta the caches use (kvq_config.rope_theta is a float), also the
  /// oracle's, so both rotate by the same angles.
  float ropeTheta = 0;
  std::vector<int64_t> positions; ///< query positions, ascending
  std::string qpMode = "all";     ///< all, last or sample
  int64_t units() const { return L * B; }
};

/// Reads and checks the inputs; exits with a one-line error on a bad one.
Inputs loadInputs(const Options &opt, Warnings &warn);

/// [T, H, D] slice of layer l, batch b.
std::vector<float> slice(const kvq::tio::Tensor &t, const Axes &a, int64_t l,
                         int64_t b);

} // namespace kvq::eval

#endif // KVQ_TOOLS_KVQ_EVAL_EVAL_INPUTS_H
