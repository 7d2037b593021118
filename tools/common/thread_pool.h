//===- thread_pool.h - The host thread pool behind --threads ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What an engine would lend the runtime (kvq_parallel), as kvq-bench and
// kvq-run do for --threads (docs/CLI.md): N - 1 persistent
// workers plus the calling thread take task indices from a shared counter.
// Persistent, so a timed call pays a wake-up, not a thread creation.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_COMMON_THREAD_POOL_H
#define KVQ_TOOLS_COMMON_THREAD_POOL_H

#include "kvq/runtime.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace kvqbench {

class ThreadPool {
public:
  explicit ThreadPool(int threads) : threads_(threads) {
    for (int i = 1; i < threads; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
  }
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  kvq_parallel handle() { return {&parallelFor, this, threads_}; }

private:
  static void parallelFor(void *self, int64_t n, void (*task)(void *, int64_t),
                          void *ctx) {
    auto *pool = static_cast<ThreadPool *>(self);
    {
      std::lock_guard<std::mutex> lock(pool->m_);
      pool->task_ = task;
      pool->ctx_ = ctx;
      pool->n_ = n;
      pool->next_ = 0;
      pool->busy_ = static_cast<int>(pool->workers_.size());
      ++pool->generation_;
    }
    pool->wake_.notify_all();
    pool->drain();
    std::unique_lock<std::mutex> lock(pool->m_);
    pool->done_.wait(lock, [pool] { return pool->busy_ == 0; });
  }

  void drain() {
    for (int64_t i; (i = next_++) < n_;)
      task_(ctx_, i);
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
      }
      drain();
      {
        std::lock_guard<std::mutex> lock(m_);
        --busy_;
      }
      done_.notify_one();
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int busy_ = 0;
  void (*task_)(void *, int64_t) = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
};

} // namespace kvqbench

#endif // KVQ_TOOLS_COMMON_THREAD_POOL_H
