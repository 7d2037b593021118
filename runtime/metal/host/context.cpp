//===- context.cpp - The Metal context entry points -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The context handle that lowered graphs pass to every stateless Metal
// kernel is the process-wide Device.
//
//===----------------------------------------------------------------------===//
#include "kvq/runtime_metal.h"

#include "device.h"

using namespace kvq::metal;

extern "C" {

KVQ_RT_EXPORT void *kvq_metal_default_context(void) { return defaultDevice(); }

KVQ_RT_EXPORT const char *kvq_metal_device_name(void *ctx) {
  return ctx ? static_cast<Device *>(ctx)->name() : "";
}

} // extern "C"
