//===- read_loops.h - The read loops behind a bandwidth bound ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Sequential reads of a buffer, scalar and vector, with several independent
// accumulators: the fastest of them on a buffer far larger than the
// last-level cache is the read bandwidth kvq-bench and kvq-run --bench
// quote their times against. Vector loops carry target attributes and are
// listed only when the CPU has the features.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_READ_LOOPS_H
#define KVQ_TOOLS_COMMON_READ_LOOPS_H

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kvqbench {

/// Sum of n words with eight independent accumulators (vectorized by the
/// compiler). On x86_64 an AVX2 clone is used when the CPU has it: the
/// baseline is the fastest sequential read this machine does, so the
/// attention bound derived from it is not flattered by a slow loop.
template <int N> inline uint64_t sumWords(const uint64_t *p, size_t n) {
  uint64_t a[N] = {};
  for (size_t i = 0; i + N <= n; i += N)
    for (int j = 0; j < N; ++j)
      a[j] += p[i + j];
  uint64_t s = 0;
  for (int j = 0; j < N; ++j)
    s += a[j];
  return s;
}

#if defined(__x86_64__)
/// AVX2 with eight independent accumulators (two loads in flight per
/// accumulator chain are not enough to saturate one core's memory
/// pipeline on every CPU).
__attribute__((target("avx2"))) inline uint64_t sumWordsAvx2x8(const uint64_t *p,
                                                        size_t n) {
  __m256i a[8];
  for (__m256i &x : a)
    x = _mm256_setzero_si256();
  const __m256i *v = reinterpret_cast<const __m256i *>(p);
  for (size_t i = 0; i + 32 <= n; i += 32, v += 8)
    for (int j = 0; j < 8; ++j)
      a[j] = _mm256_add_epi64(a[j], _mm256_loadu_si256(v + j));
  for (int j = 1; j < 8; ++j)
    a[0] = _mm256_add_epi64(a[0], a[j]);
  return static_cast<uint64_t>(
      _mm256_extract_epi64(a[0], 0) + _mm256_extract_epi64(a[0], 1) +
      _mm256_extract_epi64(a[0], 2) + _mm256_extract_epi64(a[0], 3));
}

/// AVX-512 (the widest vectors), eight accumulators.
__attribute__((target("avx512f"))) inline uint64_t sumWordsAvx512(const uint64_t *p,
                                                           size_t n) {
  __m512i a[8];
  for (__m512i &x : a)
    x = _mm512_setzero_si512();
  const __m512i *v = reinterpret_cast<const __m512i *>(p);
  for (size_t i = 0; i + 64 <= n; i += 64, v += 8)
    for (int j = 0; j < 8; ++j)
      a[j] = _mm512_add_epi64(a[j], _mm512_loadu_si512(v + j));
  for (int j = 1; j < 8; ++j)
    a[0] = _mm512_add_epi64(a[0], a[j]);
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(a[0]));
}

__attribute__((target("avx2"))) inline uint64_t sumWordsAvx2(const uint64_t *p,
                                                      size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const __m256i *v = reinterpret_cast<const __m256i *>(p);
  for (size_t i = 0; i + 16 <= n; i += 16, v += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(v));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(v + 3));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  return static_cast<uint64_t>(
      _mm256_extract_epi64(a0, 0) + _mm256_extract_epi64(a0, 1) +
      _mm256_extract_epi64(a0, 2) + _mm256_extract_epi64(a0, 3));
}
#endif

/// The read loops this CPU runs, named; the bound is the fastest of them.
struct ReadLoop {
  const char *name;
  uint64_t (*fn)(const uint64_t *, size_t);
};

inline std::vector<ReadLoop> readLoops() {
  std::vector<ReadLoop> loops = {{"scalar-x8", sumWords<8>},
                                 {"scalar-x16", sumWords<16>}};
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    loops.push_back({"avx2-x4", sumWordsAvx2});
    loops.push_back({"avx2-x8", sumWordsAvx2x8});
  }
  if (__builtin_cpu_supports("avx512f"))
    loops.push_back({"avx512-x8", sumWordsAvx512});
#endif
  return loops;
}

} // namespace kvqbench

#endif // KVQ_TOOLS_COMMON_READ_LOOPS_H
