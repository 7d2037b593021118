//===- x86_target.h - The target attributes of the x86 kernels --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every function that uses AVX2 or AVX-512 intrinsics carries one of these
// attributes instead of its file being compiled with -mavx2 or -mavx512f:
// inline functions and templates from shared headers then stay baseline
// code, so nothing vector-extended can leak into a path that runs before
// the cpuid check (runtime/kernels/x86/table_x86.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_KERNELS_X86_X86_TARGET_H
#define KVQ_RUNTIME_KERNELS_X86_X86_TARGET_H

/// AVX2 with F16C conversions and FMA (Haswell and later).
#define KVQ_AVX2 __attribute__((target("avx2,f16c,fma")))

/// AVX-512F on top of KVQ_AVX2's features.
#define KVQ_AVX512 __attribute__((target("avx512f,avx2,f16c,fma")))

#endif // KVQ_RUNTIME_KERNELS_X86_X86_TARGET_H
