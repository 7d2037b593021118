//===- context_switch.cpp - fiber context switch for the shim -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "context_switch.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVQ_SHIM_CTX_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KVQ_SHIM_CTX_ASAN 1
#endif

using namespace kvq::shim;

#ifdef KVQ_SHIM_ASM_SWITCH

// kvq_shim_switch(void **save, void *load): pushes the callee-saved
// registers and the two control words on the running stack, stores the
// stack pointer in *save, loads `load` as the stack pointer and pops the
// same frame from it; `ret` then continues where that context switched
// away (or at its entry, for a prepared context).
asm(R"(
  .text
  .p2align 4
  .globl kvq_shim_switch
  .hidden kvq_shim_switch
  .type kvq_shim_switch,@function
kvq_shim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kvq_shim_switch, .-kvq_shim_switch
)");

extern "C" void kvq_shim_switch(void **save, void *load);

void kvq::shim::prepareContext(Context &c, void *stack, size_t size,
                               void (*entry)()) {
  // The frame kvq_shim_switch pops, from the lowest address: the control
  // words, r15, r14, r13, r12, rbx, rbp, the address `ret` jumps to (entry),
  // and a null return address for entry itself. The top is 16-byte aligned,
  // so entry starts with rsp = 8 mod 16, as after a call.
  auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
  auto *frame = reinterpret_cast<uint64_t *>(top) - 9;
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  frame[0] = uint64_t(mxcsr) | uint64_t(fpucw) << 32;
  for (int i = 1; i <= 6; ++i)
    frame[i] = 0;
  frame[7] = reinterpret_cast<uint64_t>(entry);
  frame[8] = 0;
  c.sp = frame;
}

void kvq::shim::switchContext(Context &from, Context &to) {
  kvq_shim_switch(&from.sp, to.sp);
}

#else // ucontext

namespace {
[[noreturn]] void fatal(const char *what) {
  std::fprintf(stderr, "kvq metal shim: %s\n", what);
  std::abort();
}
} // namespace

void kvq::shim::prepareContext(Context &c, void *stack, size_t size,
                               void (*entry)()) {
  if (getcontext(&c.uc) != 0)
    fatal("getcontext failed");
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
#ifdef KVQ_SHIM_CTX_ASAN
  // AddressSanitizer's swapcontext interceptor clears the shadow of the
  // target's whole uc_stack on every switch (a map and two madvise calls,
  // and it unpoisons the redzones of frames live on a suspended fiber). The
  // executor tells the sanitizer of every switch through the fiber API, and
  // glibc never reads uc_stack after makecontext: forget the size.
  c.uc.uc_stack.ss_size = 0;
#endif
}

void kvq::shim::switchContext(Context &from, Context &to) {
  if (swapcontext(&from.uc, &to.uc) != 0)
    fatal("swapcontext failed");
}

#endif
