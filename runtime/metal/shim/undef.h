//===- undef.h - Drop the shim's keyword macros -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Included after the kernels in a shim translation unit, so that the host
// code that registers them (and any header it includes) sees plain C++.
//
//===----------------------------------------------------------------------===//
#undef kernel
#undef thread
#undef device
#undef constant
#undef threadgroup
