//===- executor.h - CPU grid executor for MSL kernels -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Runs a compute grid on the calling OS thread. Plain kernels run thread by
// thread; cooperative kernels (those that call a threadgroup barrier or a
// simdgroup collective) run each GPU thread of a threadgroup as a fiber
// (context_switch.h), so a barrier really suspends a thread until every thread
// of its threadgroup (or simdgroup) has reached it. This header is plain C++:
// the shim's address-space macros are not visible here.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_SHIM_EXECUTOR_H
#define KVQ_RUNTIME_METAL_SHIM_EXECUTOR_H

#include <cstddef>
#include <cstdint>

namespace kvq::shim {

/// Lanes per simdgroup, as on every Apple GPU.
constexpr uint32_t kSimdWidth = 32;

/// The values of the MSL thread attributes for one thread.
struct ThreadIds {
  uint32_t gid;      ///< [[thread_position_in_grid]]
  uint32_t tid;      ///< [[thread_position_in_threadgroup]]
  uint32_t tgid;     ///< [[threadgroup_position_in_grid]]
  uint32_t tgSize;   ///< [[threads_per_threadgroup]] (partial at the end)
  uint32_t gridSize; ///< [[threads_per_grid]]
  uint32_t lane;     ///< [[thread_index_in_simdgroup]]
  uint32_t simd;     ///< [[simdgroup_index_in_threadgroup]]
};

/// One GPU thread: body(closure, ids).
using ThreadBody = void (*)(void *closure, const ThreadIds &ids);

/// dispatchThreads semantics: gridSize threads in threadgroups of tgSize,
/// the last threadgroup partial. Threadgroups run one after another, so a
/// kernel that relies on ordering between threadgroups is not checked.
/// cooperative = false runs threads plainly and aborts if one calls a
/// barrier or collective (a registration mistake, not a kernel bug).
void dispatch(uint32_t gridSize, uint32_t tgSize, bool cooperative,
              ThreadBody body, void *closure);

/// threadgroup_barrier(): suspends until every live thread of the
/// threadgroup waits here. A thread that exits while others wait at a
/// barrier is reported as divergent control flow (undefined in MSL) and
/// aborts the process.
void barrier();

/// A simdgroup collective. Every live lane of the caller's simdgroup must
/// reach the same collective (lanes that already returned are inactive, as
/// on the GPU). When all have, reduce(values, active, lane, out) is called
/// once per participating lane, with values[l] pointing at lane l's `size`
/// input bytes (active[l] says whether lane l takes part).
using SimdReduce = void (*)(const void *const *values, const bool *active,
                            uint32_t lane, void *out);
void simdCollective(const void *in, size_t size, SimdReduce reduce, void *out);

/// Number of fiber switches performed by this OS thread so far (tests use
/// it to check that cooperative kernels really interleave).
uint64_t fiberSwitches();

} // namespace kvq::shim

#endif // KVQ_RUNTIME_METAL_SHIM_EXECUTOR_H
