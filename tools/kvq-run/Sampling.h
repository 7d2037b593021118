//===- Sampling.h - kvq-run: the next token of generation -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// --temperature, --top-k, --top-p and --seed: how generation (and the run
// of --dump-kv) picks each token from a step's logits.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_SAMPLING_H
#define KVQ_TOOLS_KVQ_RUN_SAMPLING_H

#include <cstdint>

namespace kvq::run {

/// How the next token is chosen: greedy at temperature 0, else drawn from
/// softmax(logits / T) restricted to the topK most likely tokens (0: all)
/// and then to the smallest set of them whose probability reaches topP.
struct Sampling {
  float temperature = 0;
  int64_t topK = 0;
  double topP = 1;
};

/// The state of the generator for --seed.
inline uint64_t samplingState(uint64_t seed) {
  return seed * 0x9E3779B97F4A7C15ull + 1;
}

/// The next token of `vocab` logits; `rng` (from samplingState) advances
/// only when the choice is random.
int32_t sample(const float *logits, int32_t vocab, const Sampling &s,
               uint64_t &rng);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_SAMPLING_H
