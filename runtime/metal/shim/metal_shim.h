//===- metal_shim.h - Compile Metal Shading Language as C++ -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Lets the kvq .metal kernels compile unmodified as C++17 on Linux, so the
// CPU grid executor (executor.h) can run them. It provides the MSL scalar
// types, `half`, the `metal::` functions the kernels use, barriers and
// simdgroup collectives (modelled with fibers), and the address-space
// keywords. With clang the keywords map to distinct address spaces (strict
// mode): passing a device pointer where a thread or constant pointer is
// expected fails to compile, as it does in MSL. Reached through the file
// `metal_stdlib` next to this header; include nothing after it but kernels.
//
// Not modelled: kernel-scope `threadgroup` variables and `[[threadgroup(n)]]`
// parameters (the attribute name collides with the keyword macro), textures,
// atomics, and the GPU's own rounding of `exp`/`sqrt` (see docs/METAL.md).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_SHIM_METAL_SHIM_H
#define KVQ_RUNTIME_METAL_SHIM_METAL_SHIM_H

#include "executor.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if !defined(__clang__)
#error "the Metal shim needs clang (_Float16 and address_space attributes)"
#endif

// MSL attributes such as [[buffer(0)]] mean nothing to the host compiler.
#pragma clang diagnostic ignored "-Wunknown-attributes"

/// Set when compiling MSL through this shim (kernels may test it to document
/// host-only behaviour; none of kvq's kernels need to).
#define KVQ_METAL_SHIM 1

typedef uint8_t uchar;
typedef uint16_t ushort;
typedef uint32_t uint;
typedef uint64_t ulong;
/// IEEE binary16 with round-to-nearest-even conversions, as MSL's `half`.
/// kvq kernels convert to float before any arithmetic, so clang's excess
/// precision rules for _Float16 never come into play.
typedef _Float16 half;

namespace metal {

/// MSL memory-fence flags of threadgroup_barrier().
enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4
};
inline mem_flags operator|(mem_flags a, mem_flags b) {
  return static_cast<mem_flags>(static_cast<unsigned>(a) |
                                static_cast<unsigned>(b));
}

/// Every thread of the threadgroup waits here (fiber executor).
inline void threadgroup_barrier(mem_flags) { kvq::shim::barrier(); }

/// Reinterpret the bits of a value (MSL as_type).
template <class To, class From> inline To as_type(From from) {
  static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// Math: float overloads only, the precision kvq's kernels use.
inline float rint(float x) { return std::nearbyint(x); }
inline float fabs(float x) { return std::fabs(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float exp(float x) { return std::exp(x); }
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline bool isnan(float x) { return std::isnan(x); }
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
/// Leading zero bits of a 32-bit value (32 for 0), as MSL clz.
inline uint clz(uint x) {
  return x ? static_cast<uint>(__builtin_clz(x)) : 32u;
}

namespace detail {
template <class T, class Op> T simdReduce(T v, Op) {
  T out;
  kvq::shim::simdCollective(
      &v, sizeof v,
      [](const void *const *vals, const bool *active, uint32_t, void *o) {
        bool first = true;
        T acc{};
        for (uint32_t l = 0; l < kvq::shim::kSimdWidth; ++l) {
          if (!active[l])
            continue;
          T x;
          std::memcpy(&x, vals[l], sizeof x);
          acc = first ? x : Op()(acc, x);
          first = false;
        }
        std::memcpy(o, &acc, sizeof acc);
      },
      &out);
  return out;
}
struct Add {
  template <class T> T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <class T> T operator()(T a, T b) const { return a < b ? b : a; }
};
} // namespace detail

/// Sum over the active lanes of the simdgroup. The shim adds in lane order;
/// the GPU's order is unspecified, so float results may differ in the last
/// bits (tests state their tolerance).
template <class T> inline T simd_sum(T v) {
  return detail::simdReduce(v, detail::Add());
}
/// Maximum over the active lanes.
template <class T> inline T simd_max(T v) {
  return detail::simdReduce(v, detail::Max());
}
/// Sum of the values of the active lanes below this one.
inline uint simd_prefix_exclusive_sum(uint v) {
  uint out;
  kvq::shim::simdCollective(
      &v, sizeof v,
      [](const void *const *vals, const bool *active, uint32_t lane, void *o) {
        uint acc = 0;
        for (uint32_t l = 0; l < lane; ++l)
          if (active[l])
            acc += *static_cast<const uint *>(vals[l]);
        std::memcpy(o, &acc, sizeof acc);
      },
      &out);
  return out;
}

} // namespace metal

// The MSL keywords. `thread` is the default address space.
#define kernel
#define thread
#if defined(KVQ_SHIM_NO_STRICT)
#define device
#define constant
#define threadgroup
#else
#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#endif

#endif // KVQ_RUNTIME_METAL_SHIM_METAL_SHIM_H
