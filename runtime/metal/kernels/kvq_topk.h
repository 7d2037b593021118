//===- kvq_topk.h - Rank split by bisection on float bits -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The k-th largest magnitude without sorting: non-negative floats order like
// their bit patterns, so bisect on the bits for the largest t with at least
// k magnitudes >= t, as the reference (topk_impl.h) does. Shared by the
// per-vector outlier split (one thread) and sink selection (a simdgroup).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_KERNELS_KVQ_TOPK_H
#define KVQ_RUNTIME_METAL_KERNELS_KVQ_TOPK_H

/// Magnitude bits of a float (sign dropped).
inline uint kvq_magnitude(float v) {
  return metal::as_type<uint>(v) & 0x7fffffffu;
}

/// Upper bound of the bisection: just above +inf's bits.
#define KVQ_K_BISECT_END 0x7f800001u

#endif // KVQ_RUNTIME_METAL_KERNELS_KVQ_TOPK_H
