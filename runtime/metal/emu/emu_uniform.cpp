//===- emu_uniform.cpp - uniform.metal compiled through the shim ----------===//
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
#include "../kernels/uniform.metal"
} // namespace kvq_msl

#include "../shim/undef.h"
#include "launch.h"

using kvq::metal::emu::Id;

void kvq::metal::emu::uniformKernels(void (*add)(const KernelEntry &)) {
  KVQ_EMU_KERNEL(add, kvq_uniform_quant, false, Id::Gid);
  KVQ_EMU_KERNEL(add, kvq_pack_codes, false, Id::Gid);
  KVQ_EMU_KERNEL(add, kvq_uniform_dequant, false, Id::Gid);
}
