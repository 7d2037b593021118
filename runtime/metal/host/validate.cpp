//===- validate.cpp - Argument checks of the Metal entry points -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The Metal-only checks; the shared ones live in checks/kernel_args.cpp.
//
//===----------------------------------------------------------------------===//
#include "validate.h"

#include "status.h"

using namespace kvq;
using namespace kvq::metal;

kvq_status kvq::metal::deviceOf(void *ctx, const char *fn, Device **out) {
  if (!ctx)
    return fail(KVQ_ERR_NULL_POINTER,
                "%s: the Metal context is null (no Metal device?)", fn);
  *out = static_cast<Device *>(ctx);
  return KVQ_OK;
}

kvq_status kvq::metal::checkGrid(int64_t threads, const char *fn) {
  if (threads > static_cast<int64_t>(UINT32_MAX))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "%s: %lld elements exceed one Metal dispatch (2^32 - 1 "
                "threads); split the call",
                fn, static_cast<long long>(threads));
  return KVQ_OK;
}
