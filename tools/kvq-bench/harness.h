//===- harness.h - Timing discipline of kvq-bench ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Warm up, repeat, take the median: one function used by every measurement
// so all numbers in a report follow the same rules. Single thread. Cold
// timings evict the last-level cache before each repetition (untimed), so
// a working set smaller than the LLC is read from memory as in a decode
// step of a real model, whose other layers' weights and caches pass through
// the LLC between two visits of one layer.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_BENCH_HARNESS_H
#define KVQ_TOOLS_KVQ_BENCH_HARNESS_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
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

/// The median of v (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median wall time of one call of fn, in seconds; `before` runs untimed
/// ahead of every timed call.
template <class Before, class Fn>
double medianSecondsAfter(const Effort &e, Before &&before, Fn &&fn) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < e.warmup; ++i)
    fn();
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < e.maxReps &&
         (static_cast<int>(times.size()) < e.reps || total < e.minSeconds)) {
    before();
    auto t0 = Clock::now();
    fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    times.push_back(dt);
    total += dt;
  }
  return median(std::move(times));
}

/// Median wall time of one call of fn with warm caches, in seconds.
template <class Fn> double medianSeconds(const Effort &e, Fn &&fn) {
  return medianSecondsAfter(
      e, [] {}, fn);
}

/// Bytes of the largest cache of cpu0 (the last level), from sysfs; 0 when
/// the system does not say.
inline int64_t lastLevelCacheBytes() {
  int64_t best = 0;
  int bestLevel = -1;
  for (int i = 0; i < 16; ++i) {
    std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    FILE *lf = std::fopen((dir + "level").c_str(), "r");
    if (!lf)
      break;
    int level = 0;
    bool ok = std::fscanf(lf, "%d", &level) == 1;
    std::fclose(lf);
    FILE *sf = std::fopen((dir + "size").c_str(), "r");
    if (!sf)
      continue;
    long long size = 0;
    char unit = 0;
    ok = ok && std::fscanf(sf, "%lld%c", &size, &unit) >= 1;
    std::fclose(sf);
    if (!ok)
      continue;
    if (unit == 'K')
      size <<= 10;
    else if (unit == 'M')
      size <<= 20;
    if (level > bestLevel || (level == bestLevel && size > best)) {
      bestLevel = level;
      best = size;
    }
  }
  return best;
}

/// Evicts the last-level cache by writing and reading a buffer of twice its
/// size (64 MiB when sysfs does not tell it), one word per 64-byte line.
class CacheEvictor {
public:
  CacheEvictor()
      : llc_(lastLevelCacheBytes()),
        buf_(static_cast<size_t>(2 * (llc_ > 0 ? llc_ : (32 << 20))) / 8) {}
  void operator()() {
    ++pass_;
    uint64_t acc = 0;
    for (size_t i = 0; i < buf_.size(); i += 8) {
      buf_[i] += pass_;
      acc += buf_[i];
    }
    slot_ = acc;
  }
  int64_t llcBytes() const { return llc_; }
  int64_t bufferBytes() const { return static_cast<int64_t>(buf_.size() * 8); }

private:
  int64_t llc_;
  std::vector<uint64_t> buf_;
  uint64_t pass_ = 0;
  volatile uint64_t slot_ = 0;
};

/// Keeps a computed value alive so the optimizer cannot drop the work.
inline void sink(uint64_t v) {
  static volatile uint64_t slot;
  slot = v;
  (void)slot;
}

} // namespace kvqbench

#endif // KVQ_TOOLS_KVQ_BENCH_HARNESS_H
