//===- checked.h - Overflow-checked size arithmetic -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every size an entry point derives from caller integers (tokens x channels,
// rows x cols, elements x bytes, ...) is computed here, so an absurd shape
// becomes a status instead of a wrapped product (an undersized buffer, an
// out-of-bounds read) or an exception from the standard library.
//
// The limits of config.h bound every configuration field and the tokens of
// a layer, so that once an entry point has accepted its arguments every
// product the stores and kernels form internally fits in int64 with a wide
// margin (see the static_asserts in config.h); these helpers are for the
// boundary, where the integers still come straight from the caller.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_BASE_CHECKED_H
#define KVQ_RUNTIME_BASE_CHECKED_H

#include <cstdint>
#include <initializer_list>

namespace kvq {

/// *out = a * b; false (and *out unspecified) when it overflows int64.
inline bool checkedMul(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/// *out = a + b; false when it overflows int64.
inline bool checkedAdd(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/// *out = the product of non-negative factors; false when it overflows
/// int64 or exceeds `limit`.
inline bool checkedProduct(std::initializer_list<int64_t> factors,
                           int64_t limit, int64_t *out) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (f < 0 || !checkedMul(p, f, &p))
      return false;
  if (p > limit)
    return false;
  *out = p;
  return true;
}

/// The largest byte count a caller buffer can have (ptrdiff_t, which
/// pointer differences and std::vector sizes must fit).
constexpr int64_t kMaxBufferBytes = INT64_MAX;

} // namespace kvq

#endif // KVQ_RUNTIME_BASE_CHECKED_H
