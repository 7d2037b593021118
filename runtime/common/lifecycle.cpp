//===- lifecycle.cpp - truncate, fork, save and load of a cache -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle beyond append (docs/RUNTIME.md, "Cache lifecycle").
//
//===----------------------------------------------------------------------===//
#include "guard.h"
#include "kvq/runtime.h"
#include "status.h"

using namespace kvq;

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_cache_truncate(kvq_cache_t *, int64_t) {
  return fail(KVQ_ERR_INVALID_ARGUMENT,
              "kvq_cache_truncate: not implemented yet");
}

KVQ_RT_EXPORT kvq_status kvq_cache_fork(const kvq_cache_t *, kvq_cache_t **) {
  return fail(KVQ_ERR_INVALID_ARGUMENT, "kvq_cache_fork: not implemented yet");
}

KVQ_RT_EXPORT kvq_status kvq_cache_save(const kvq_cache_t *, void *, int64_t,
                                        int64_t *) {
  return fail(KVQ_ERR_INVALID_ARGUMENT, "kvq_cache_save: not implemented yet");
}

KVQ_RT_EXPORT kvq_status kvq_cache_load(const void *, int64_t,
                                        const kvq_allocator *, kvq_cache_t **) {
  return fail(KVQ_ERR_INVALID_ARGUMENT, "kvq_cache_load: not implemented yet");
}

} // extern "C"
