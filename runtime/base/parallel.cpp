//===- parallel.cpp - The host's parallel-for -----------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "parallel.h"

#include "status.h"

#include <exception>
#include <mutex>

namespace {
std::mutex defaultMutex;
kvq_parallel defaultValue{}; // no parallel-for: one thread

struct TaskContext {
  const std::function<void(int64_t)> *task;
  std::mutex mutex;
  std::exception_ptr error;
};

void runOne(void *ctx, int64_t i) {
  auto *c = static_cast<TaskContext *>(ctx);
  try {
    (*c->task)(i);
  } catch (...) { // tasks must not throw into the host's pool
    std::lock_guard<std::mutex> lock(c->mutex);
    if (!c->error)
      c->error = std::current_exception();
  }
}
} // namespace

kvq_status kvq::checkParallel(const char *site, const kvq_parallel *p) {
  if (p && p->parallel_for &&
      (p->workers < 1 || p->workers > KVQ_MAX_WORKERS))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: workers must be in [1, %d] (got %d)", site,
                KVQ_MAX_WORKERS, p->workers);
  return KVQ_OK;
}

kvq_parallel kvq::defaultParallel() {
  std::lock_guard<std::mutex> lock(defaultMutex);
  return defaultValue;
}

void kvq::setDefaultParallel(const kvq_parallel &p) {
  std::lock_guard<std::mutex> lock(defaultMutex);
  defaultValue = p;
}

void kvq::runTasks(const kvq_parallel &p, int64_t n,
                   const std::function<void(int64_t)> &task) {
  if (!p.parallel_for || p.workers < 2 || n < 2) {
    for (int64_t i = 0; i < n; ++i)
      task(i);
    return;
  }
  TaskContext ctx;
  ctx.task = &task;
  p.parallel_for(p.host_ctx, n, runOne, &ctx);
  if (ctx.error)
    std::rethrow_exception(ctx.error);
}
