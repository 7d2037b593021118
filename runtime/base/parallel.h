//===- parallel.h - The host's parallel-for (kvq_parallel) -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The runtime never starts threads: work that can be split is split into a
// fixed number of independent tasks, whatever the thread count, and run
// through the parallel-for a host lent (kvq_cache_set_parallel,
// kvq_set_default_parallel) or on the calling thread. Results depend only
// on the tasks, never on how many threads ran them.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_BASE_PARALLEL_H
#define KVQ_RUNTIME_BASE_PARALLEL_H

#include "kvq/runtime.h"

#include <cstdint>
#include <functional>

namespace kvq {

/// KVQ_OK for a null p or a valid one; else KVQ_ERR_INVALID_ARGUMENT with a
/// message naming `site`.
kvq_status checkParallel(const char *site, const kvq_parallel *p);

/// The process default (a copy; no parallel-for unless a host set one).
kvq_parallel defaultParallel();
void setDefaultParallel(const kvq_parallel &p);

/// task(i) for every i in [0, n): through p's parallel-for when it has one,
/// at least two workers and n >= 2, else in order on this thread. An
/// exception a task throws (std::bad_alloc) is rethrown here after every
/// task has returned.
void runTasks(const kvq_parallel &p, int64_t n,
              const std::function<void(int64_t)> &task);

} // namespace kvq

#endif // KVQ_RUNTIME_BASE_PARALLEL_H
