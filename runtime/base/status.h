//===- status.h - Status codes and the thread-local last error --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every failing entry point records a one-line message here before returning
// its status, so callers get "what went wrong" without a second channel.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_BASE_STATUS_H
#define KVQ_RUNTIME_BASE_STATUS_H

#include "kvq/runtime.h"

namespace kvq {

/// Record `fmt` (printf-style) as this thread's last error and return status.
kvq_status fail(kvq_status status, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

} // namespace kvq

#endif // KVQ_RUNTIME_BASE_STATUS_H
