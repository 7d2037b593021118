//===- Logits.h - kvq-run: what a step's logits are checked for -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every mode refuses non-finite logits; perplexity reads the NLL of the
// next token off them and, with --kl-divergence, the whole distribution.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_LOGITS_H
#define KVQ_TOOLS_KVQ_RUN_LOGITS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvq::run {

/// Logits that are not all finite (finite weights too large for f32
/// arithmetic): an error naming the position, never a NaN printed as a
/// result.
std::optional<std::string> nonFiniteLogits(const float *logits, int32_t vocab,
                                           int64_t pos);

/// -log softmax(logits)[target], in double.
double nll(const float *logits, int32_t vocab, int32_t target);

/// log softmax(logits) in double, into `out` (vocab entries); returns
/// the index of the largest logit (the first one on a tie).
int32_t logSoftmax(const float *logits, int32_t vocab,
                   std::vector<double> &out);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_LOGITS_H
