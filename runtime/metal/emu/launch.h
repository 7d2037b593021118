//===- launch.h -------------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bind device arguments to a shim-compiled kernel.
//
// A registered kernel is a function compiled from MSL through the shim. Its
// leading parameters are [[buffer(i)]] arguments (address-space qualified
// pointers, or a reference to a constant parameter block); the trailing ones
// are thread-position attributes, named at registration because the host
// compiler ignores the attributes. Launch<Fn, Ids...> turns an Arg list into
// a call per GPU thread, converting each pointer to its address space.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_EMU_LAUNCH_H
#define KVQ_RUNTIME_METAL_EMU_LAUNCH_H

#include "../host/device.h"
#include "../shim/executor.h"

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kvq::metal::emu {

/// Which thread attribute a trailing kernel parameter receives.
enum class Id {
  Gid,      ///< thread_position_in_grid
  Tid,      ///< thread_position_in_threadgroup
  Tgid,     ///< threadgroup_position_in_grid
  TgSize,   ///< threads_per_threadgroup
  GridSize, ///< threads_per_grid
  Lane,     ///< thread_index_in_simdgroup
  Simd      ///< simdgroup_index_in_threadgroup
};

inline uint32_t idValue(Id id, const shim::ThreadIds &t) {
  switch (id) {
  case Id::Gid:
    return t.gid;
  case Id::Tid:
    return t.tid;
  case Id::Tgid:
    return t.tgid;
  case Id::TgSize:
    return t.tgSize;
  case Id::GridSize:
    return t.gridSize;
  case Id::Lane:
    return t.lane;
  case Id::Simd:
    return t.simd;
  }
  return 0;
}

/// Argument i as parameter type P: a (qualified) pointer into the buffer, or
/// a reference to the constant block. C-style casts are what convert a
/// generic pointer into a device/constant one (as the Metal runtime does).
template <class P> P bindArg(const Arg &a) {
  if constexpr (std::is_reference_v<P>) {
    using T = std::remove_reference_t<P>;
    return *(T *)(a.bytes);
  } else {
    static_assert(std::is_pointer_v<P>, "kernel buffer parameters are "
                                        "pointers or constant references");
    return (P)(static_cast<char *>(a.buffer->data) + a.offset);
  }
}

/// Whether argument i is of the kind parameter P needs.
template <class P> bool argFits(const Arg &a) {
  if constexpr (std::is_reference_v<P>)
    return a.bytes && a.size == sizeof(std::remove_reference_t<P>);
  else
    return a.buffer != nullptr;
}

template <auto Fn, Id... Ids> struct Launch;

template <class... Ps, void (*Fn)(Ps...), Id... Ids> struct Launch<Fn, Ids...> {
  static constexpr size_t kIds = sizeof...(Ids);
  static constexpr size_t kArgs = sizeof...(Ps) - kIds;
  using Params = std::tuple<Ps...>;

  template <size_t... I>
  static bool fits(const Arg *args, std::index_sequence<I...>) {
    return (argFits<std::tuple_element_t<I, Params>>(args[I]) && ...);
  }

  template <size_t... I, size_t... J>
  static void call(const Arg *args, const shim::ThreadIds &t,
                   std::index_sequence<I...>, std::index_sequence<J...>) {
    constexpr Id ids[] = {Ids...};
    Fn(bindArg<std::tuple_element_t<I, Params>>(args[I])...,
       idValue(ids[J], t)...);
  }

  static void thread(void *closure, const shim::ThreadIds &t) {
    call(static_cast<const Arg *>(closure), t,
         std::make_index_sequence<kArgs>(), std::make_index_sequence<kIds>());
  }

  /// Checks the argument list, then runs the grid. False on a mismatch.
  static bool run(const Arg *args, size_t nargs, uint32_t threads, uint32_t tg,
                  bool cooperative) {
    if (nargs != kArgs || !fits(args, std::make_index_sequence<kArgs>()))
      return false;
    shim::dispatch(threads, tg, cooperative, &thread, const_cast<Arg *>(args));
    return true;
  }
};

/// A registered kernel.
struct KernelEntry {
  const char *name;
  bool (*run)(const Arg *, size_t, uint32_t, uint32_t, bool);
  bool cooperative; ///< uses barriers or simdgroup functions
};

/// Registration lists, one per .metal file (emu_<file>.cpp).
void uniformKernels(void (*add)(const KernelEntry &));
void nuqKernels(void (*add)(const KernelEntry &));
void outlierKernels(void (*add)(const KernelEntry &));
void sinkKernels(void (*add)(const KernelEntry &));
void attentionKernels(void (*add)(const KernelEntry &));
void kvquantKernels(void (*add)(const KernelEntry &));

} // namespace kvq::metal::emu

/// Registration helper: KVQ_EMU_KERNEL(add, fn, cooperative, Id::Gid, ...)
/// registers kvq_msl::fn under the name the host dispatches, "fn".
#define KVQ_EMU_KERNEL(add, fn, coop, ...)                                     \
  add({#fn, &::kvq::metal::emu::Launch<&::kvq_msl::fn, __VA_ARGS__>::run, coop})

#endif // KVQ_RUNTIME_METAL_EMU_LAUNCH_H
