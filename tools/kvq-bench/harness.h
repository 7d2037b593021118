//===- harness.h - Timing discipline of kvq-bench ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Warm up, repeat, take the median: one function used by every measurement
// so all numbers in a report follow the same rules. Single thread; the
// caller keeps the working set it wants measured (cache-resident or not).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_BENCH_HARNESS_H
#define KVQ_TOOLS_KVQ_BENCH_HARNESS_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace kvqbench {

/// How hard to measure: warmup calls, then at least `reps` timed calls and
/// at least `minSeconds` of timed work, capped by `maxReps`.
struct Effort {
  int warmup = 2;
  int reps = 7;
  int maxReps = 200;
  double minSeconds = 0.3;
};

/// Median wall time of one call of fn, in seconds.
template <class Fn> double medianSeconds(const Effort &e, Fn &&fn) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < e.warmup; ++i)
    fn();
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < e.maxReps &&
         (static_cast<int>(times.size()) < e.reps || total < e.minSeconds)) {
    auto t0 = Clock::now();
    fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    times.push_back(dt);
    total += dt;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Keeps a computed value alive so the optimizer cannot drop the work.
inline void sink(uint64_t v) {
  static volatile uint64_t slot;
  slot = v;
  (void)slot;
}

} // namespace kvqbench

#endif // KVQ_TOOLS_KVQ_BENCH_HARNESS_H
