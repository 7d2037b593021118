//===- context_switch.h - fiber context switch for the shim ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The executor's fibers switch here. glibc's swapcontext saves and restores
// the signal mask with a system call on every switch; a cooperative kernel
// switches twice per thread and barrier, and that call took 84% of the
// Metal suites' time (perf, Release, Zen 5 guest). On x86_64 a switch is a
// few lines of assembly instead, saving what the System V ABI says a call
// preserves (six registers, MXCSR and the x87 control word); elsewhere it
// stays ucontext. Neither tells AddressSanitizer: the executor announces
// every switch through the sanitizer fiber API.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_SHIM_CONTEXT_SWITCH_H
#define KVQ_RUNTIME_METAL_SHIM_CONTEXT_SWITCH_H

#include <cstddef>

#if defined(__x86_64__) && defined(__ELF__)
#define KVQ_SHIM_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace kvq::shim {

/// Where a suspended fiber, or the thread that runs the fibers, continues.
struct Context {
#ifdef KVQ_SHIM_ASM_SWITCH
  void *sp = nullptr; ///< its saved registers are on its stack, below sp
#else
  ucontext_t uc{};
#endif
};

/// Makes `c` start entry() on the stack [stack, stack + size) when first
/// switched to. entry must never return.
void prepareContext(Context &c, void *stack, size_t size, void (*entry)());

/// Saves the running context in `from` and continues `to`; returns when
/// something switches back to `from`.
void switchContext(Context &from, Context &to);

} // namespace kvq::shim

#endif // KVQ_RUNTIME_METAL_SHIM_CONTEXT_SWITCH_H
