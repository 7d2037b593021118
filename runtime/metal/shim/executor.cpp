//===- executor.cpp - CPU grid executor for MSL kernels -------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Cooperative threadgroups run as fibers (context_switch.h) on the calling
// OS thread, scheduled round-robin: every ready fiber runs until it finishes
// or waits at a barrier/collective; then waits whose condition holds are
// released. Under AddressSanitizer each switch is announced with the
// sanitizer fiber API, so the sanitizer build checks kernels run this way
// too.
//
//===----------------------------------------------------------------------===//
#include "executor.h"

#include "context_switch.h"

#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVQ_SHIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KVQ_SHIM_ASAN 1
#endif
#ifdef KVQ_SHIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

using namespace kvq::shim;

namespace {

#ifdef KVQ_SHIM_ASAN
constexpr size_t kStackBytes = 1u << 20; // instrumented frames are larger
#else
constexpr size_t kStackBytes = 256u << 10;
#endif

[[noreturn]] void fatal(const char *what, const ThreadIds *ids) {
  if (ids)
    std::fprintf(stderr,
                 "kvq metal shim: %s (threadgroup %u, thread %u, lane %u)\n",
                 what, ids->tgid, ids->tid, ids->lane);
  else
    std::fprintf(stderr, "kvq metal shim: %s\n", what);
  std::abort();
}

enum class State { Ready, AtBarrier, AtCollective, Done };

struct Fiber {
  Context ctx;
  void *stack = nullptr;
  State state = State::Ready;
  ThreadIds ids{};
  // The pending collective (valid while AtCollective).
  const void *in = nullptr;
  size_t inSize = 0;
  SimdReduce reduce = nullptr;
  void *out = nullptr;
  void *fakeStack = nullptr; // AddressSanitizer bookkeeping
};

/// The threadgroup being run by this OS thread, if cooperative.
struct Group {
  std::vector<Fiber> fibers;
  Context mainCtx;
  Fiber *current = nullptr;
  ThreadBody body = nullptr;
  void *closure = nullptr;
  const void *mainBottom = nullptr;
  size_t mainSize = 0;
  void *mainFake = nullptr;
};

thread_local Group *tGroup = nullptr;
thread_local uint64_t tSwitches = 0;

/// Fiber stacks, reused across dispatches (mmap: untouched pages cost
/// nothing, and the leak checker does not track them), each with the
/// AddressSanitizer fake stack its last fiber left (null elsewhere). A
/// finished fiber hands its fake stack on instead of destroying it: the
/// sanitizer otherwise maps and unmaps one per fiber, which took most of
/// the sanitizer build's Metal suites (perf). A fiber ends with every frame
/// of its kernel returned, so the next fiber starts on an empty fake stack;
/// the pool's fake stacks live until the process ends.
struct PooledStack {
  void *stack = nullptr;
  void *fake = nullptr;
};
struct StackPool {
  std::vector<PooledStack> free;
  ~StackPool() {
    for (const PooledStack &s : free)
      munmap(s.stack, kStackBytes);
  }
  PooledStack take() {
    if (!free.empty()) {
      PooledStack s = free.back();
      free.pop_back();
      return s;
    }
    void *s = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED)
      fatal("cannot map a fiber stack", nullptr);
    return {s, nullptr};
  }
  void give(const PooledStack &s) { free.push_back(s); }
};
thread_local StackPool tStacks;

void startSwitch(void **fake, const void *bottom, size_t size) {
#ifdef KVQ_SHIM_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

void finishSwitch(void *fake, const void **bottom, size_t *size) {
#ifdef KVQ_SHIM_ASAN
  __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

/// A stack taken from the pool has its top cleared once: a fiber that ended
/// (fiberEntry never returns) may have left its last frames' redzones
/// poisoned there.
void clearReusedStack(Fiber &f) {
#ifdef KVQ_SHIM_ASAN
  constexpr size_t kReused = 64u << 10;
  __asan_unpoison_memory_region(
      static_cast<char *>(f.stack) + kStackBytes - kReused, kReused);
#else
  (void)f;
#endif
}

/// Main context -> fiber f, until f yields or finishes.
void resume(Group &g, Fiber &f) {
  g.current = &f;
  ++tSwitches;
  startSwitch(&g.mainFake, f.stack, kStackBytes);
  switchContext(g.mainCtx, f.ctx);
  finishSwitch(g.mainFake, nullptr, nullptr);
  g.current = nullptr;
}

/// Fiber -> main context. An exiting fiber is never resumed again; its fake
/// stack is kept for the next fiber on its stack (StackPool).
void yieldToMain(Group &g, Fiber &f) {
  ++tSwitches;
  startSwitch(&f.fakeStack, g.mainBottom, g.mainSize);
  switchContext(f.ctx, g.mainCtx);
  finishSwitch(f.fakeStack, &g.mainBottom, &g.mainSize);
}

void fiberEntry() {
  Group &g = *tGroup;
  Fiber &f = *g.current;
  finishSwitch(f.fakeStack, &g.mainBottom, &g.mainSize);
  g.body(g.closure, f.ids);
  f.state = State::Done;
  yieldToMain(g, f);
  fatal("a finished fiber was resumed", &f.ids);
}

/// Release the lanes of simdgroup `s` if all its live lanes wait at the
/// same collective. Returns true when something was released.
bool releaseSimdgroup(Group &g, size_t first, size_t end) {
  const void *values[kSimdWidth] = {};
  bool active[kSimdWidth] = {};
  Fiber *lead = nullptr;
  for (size_t i = first; i < end; ++i) {
    Fiber &f = g.fibers[i];
    if (f.state == State::Done)
      continue;
    if (f.state != State::AtCollective)
      return false; // some live lane is elsewhere: not (yet) complete
    if (lead && (f.reduce != lead->reduce || f.inSize != lead->inSize))
      fatal("lanes of one simdgroup wait at different collectives "
            "(divergent simdgroup function)",
            &f.ids);
    lead = lead ? lead : &f;
    values[f.ids.lane] = f.in;
    active[f.ids.lane] = true;
  }
  if (!lead)
    return false;
  for (size_t i = first; i < end; ++i) {
    Fiber &f = g.fibers[i];
    if (f.state != State::AtCollective)
      continue;
    f.reduce(values, active, f.ids.lane, f.out);
    f.state = State::Ready;
  }
  return true;
}

void runCooperative(Group &g) {
  const size_t n = g.fibers.size();
  for (;;) {
    for (Fiber &f : g.fibers)
      if (f.state == State::Ready)
        resume(g, f);
    size_t done = 0, atBarrier = 0;
    for (const Fiber &f : g.fibers) {
      done += f.state == State::Done;
      atBarrier += f.state == State::AtBarrier;
    }
    if (done == n)
      return;
    bool released = false;
    if (atBarrier > 0 && atBarrier + done == n) {
      if (done > 0)
        fatal("a thread exited while others wait at a threadgroup barrier "
              "(barrier in divergent control flow)",
              &g.fibers[0].ids);
      for (Fiber &f : g.fibers)
        f.state = State::Ready;
      released = true;
    }
    for (size_t s = 0; s < n; s += kSimdWidth)
      released |=
          releaseSimdgroup(g, s, s + kSimdWidth < n ? s + kSimdWidth : n);
    if (!released)
      fatal("deadlock: threads wait at barriers/collectives that can never "
            "complete",
            &g.fibers[0].ids);
  }
}

} // namespace

void kvq::shim::dispatch(uint32_t gridSize, uint32_t tgSize, bool cooperative,
                         ThreadBody body, void *closure) {
  if (tgSize == 0 || tgSize > 1024)
    fatal("threadgroup size must be in [1, 1024]", nullptr);
  if (tGroup)
    fatal("nested dispatch from inside a kernel", nullptr);
  const uint32_t groups = (gridSize + tgSize - 1) / tgSize;
  for (uint32_t tg = 0; tg < groups; ++tg) {
    const uint32_t base = tg * tgSize;
    const uint32_t size = gridSize - base < tgSize ? gridSize - base : tgSize;
    auto idsOf = [&](uint32_t t) {
      return ThreadIds{base + t,      t, tg, size, gridSize, t % kSimdWidth,
                       t / kSimdWidth};
    };
    if (!cooperative) {
      for (uint32_t t = 0; t < size; ++t)
        body(closure, idsOf(t));
      continue;
    }
    Group g;
    g.body = body;
    g.closure = closure;
    g.fibers.resize(size);
    for (uint32_t t = 0; t < size; ++t) {
      Fiber &f = g.fibers[t];
      f.ids = idsOf(t);
      const PooledStack pooled = tStacks.take();
      f.stack = pooled.stack;
      f.fakeStack = pooled.fake;
      clearReusedStack(f);
      prepareContext(f.ctx, f.stack, kStackBytes, fiberEntry);
    }
    tGroup = &g;
    runCooperative(g);
    tGroup = nullptr;
    for (Fiber &f : g.fibers)
      tStacks.give({f.stack, f.fakeStack});
  }
}

void kvq::shim::barrier() {
  Group *g = tGroup;
  if (!g || !g->current)
    fatal("threadgroup_barrier() in a kernel registered as plain "
          "(register it as cooperative)",
          nullptr);
  Fiber &f = *g->current;
  f.state = State::AtBarrier;
  yieldToMain(*g, f);
}

void kvq::shim::simdCollective(const void *in, size_t size, SimdReduce reduce,
                               void *out) {
  Group *g = tGroup;
  if (!g || !g->current)
    fatal("simdgroup function in a kernel registered as plain (register it "
          "as cooperative)",
          nullptr);
  Fiber &f = *g->current;
  f.state = State::AtCollective;
  f.in = in;
  f.inSize = size;
  f.reduce = reduce;
  f.out = out;
  yieldToMain(*g, f);
}

uint64_t kvq::shim::fiberSwitches() { return tSwitches; }
