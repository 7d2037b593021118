//===- graph.h --------------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The generated model graph for the compile benchmark.
//
// A decoder of N layers as a model compiler would hand it to kvq-opt: per
// layer Q/K/V projections (linalg.matmul on splat weights), the fp16
// conversion and reshape of K/V, kvq.cache_update, kvq.cache_attend with
// grouped-query heads, the output projection and the residual add.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_BENCH_GRAPH_H
#define KVQ_TOOLS_KVQ_BENCH_GRAPH_H

#include <string>

namespace kvqbench {

/// MLIR text of an N-layer decode step over one kvq cache (8 KV heads of
/// head_dim 128, 4 query heads per KV head, hidden size 1024).
std::string decoderGraph(int layers);

/// Run `kvqOpt --kvq-to-llvm` on the graph text; returns the median wall
/// seconds over `reps` runs, or a negative value when the run fails.
double timeCompile(const std::string &kvqOpt, const std::string &graph,
                   const std::string &scratchDir, int reps);

} // namespace kvqbench

#endif // KVQ_TOOLS_KVQ_BENCH_GRAPH_H
