//===- guard.h - No exception crosses the C ABI -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every kvq_status entry point of the C ABI (CPU and Metal) runs its body
// through guarded(), a catch-all at the boundary: an exception escaping a
// C function would terminate the caller's process (or worse, unwind through
// C frames). Ordinary errors never take this path: arguments are checked
// (with overflow-checked sizes, checked.h) before anything can throw, and
// the stores turn allocation failures into KVQ_ERR_OUT_OF_MEMORY
// themselves. What is left is a safety net:
//   std::bad_alloc, std::length_error -> KVQ_ERR_OUT_OF_MEMORY
//   any other exception               -> KVQ_ERR_INVALID_ARGUMENT, with a
//                                        message saying it was internal
// each with a one-line message naming the entry point.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_BASE_GUARD_H
#define KVQ_RUNTIME_BASE_GUARD_H

#include "kvq/runtime.h"
#include "status.h"

#include <exception>
#include <new>
#include <stdexcept>

namespace kvq {

template <class F> kvq_status guarded(const char *entry, F &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "%s: out of memory", entry);
  } catch (const std::length_error &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY,
                "%s: out of memory (a size exceeds what can be allocated)",
                entry);
  } catch (const std::exception &e) {
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: internal error: %s", entry,
                e.what());
  } catch (...) {
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: internal error", entry);
  }
}

} // namespace kvq

#endif // KVQ_RUNTIME_BASE_GUARD_H
