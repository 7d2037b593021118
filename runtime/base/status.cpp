//===- status.cpp - Status strings and the thread-local last error --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_status_string and kvq_last_error; the message buffer is per thread so
// that distinct caches may fail concurrently without mixing messages.
//
//===----------------------------------------------------------------------===//
#include "status.h"

#include <cstdarg>
#include <cstdio>

namespace {
thread_local char lastError[512] = "";
} // namespace

kvq_status kvq::fail(kvq_status status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(lastError, sizeof(lastError), fmt, args);
  va_end(args);
  return status;
}

extern "C" KVQ_RT_EXPORT const char *kvq_status_string(kvq_status status) {
  switch (status) {
  case KVQ_OK:
    return "ok";
  case KVQ_ERR_NULL_POINTER:
    return "null pointer";
  case KVQ_ERR_INVALID_ARGUMENT:
    return "invalid argument";
  case KVQ_ERR_UNKNOWN_METHOD:
    return "unknown method";
  case KVQ_ERR_UNSUPPORTED_BITS:
    return "unsupported bit width";
  case KVQ_ERR_BAD_GROUP_SIZE:
    return "bad group size";
  case KVQ_ERR_LAYER_OUT_OF_RANGE:
    return "layer out of range";
  case KVQ_ERR_EMPTY_INPUT:
    return "empty input";
  case KVQ_ERR_SHAPE_MISMATCH:
    return "shape mismatch";
  case KVQ_ERR_NON_FINITE:
    return "non-finite input";
  case KVQ_ERR_OUT_OF_MEMORY:
    return "out of memory";
  case KVQ_ERR_BUFFER_TOO_SMALL:
    return "buffer too small";
  case KVQ_ERR_CORRUPT_DATA:
    return "corrupt data";
  case KVQ_ERR_NOT_EXACT:
    return "truncation not exact";
  case KVQ_STATUS_MAX_ENUM:
    break;
  }
  return "unknown status";
}

extern "C" KVQ_RT_EXPORT const char *kvq_last_error(void) { return lastError; }
