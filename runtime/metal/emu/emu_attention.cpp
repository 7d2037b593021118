//===- emu_attention.cpp - attention.metal compiled through the shim ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One translation unit per .metal file: the shim, the unmodified kernel
// source, then the registration in plain C++.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

// The kernels go into their own namespace: some share a name with the C
// entry point that dispatches them (kvq_nuq_fit, ...).
namespace kvq_msl {
#include "../kernels/attention.metal"
} // namespace kvq_msl

#include "../shim/undef.h"
#include "launch.h"

using kvq::metal::emu::Id;

void kvq::metal::emu::attentionKernels(void (*add)(const KernelEntry &)) {
  KVQ_EMU_KERNEL(add, kvq_cache_fetch, false, Id::Gid);
  KVQ_EMU_KERNEL(add, kvq_cache_attend, true, Id::Tgid, Id::Lane);
}
