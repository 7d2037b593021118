//===- compiled_abi.cpp - entry points used by compiled kvq graphs --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// convert-kvq-to-runtime emits calls with pointer and scalar arguments only:
// the flat cache constructor and the status check live here. The stats
// struct is read by generated code at fixed offsets, pinned below.
//
//===----------------------------------------------------------------------===//
#include "config.h"
#include "guard.h"
#include "kvq/runtime.h"
#include "kvq/runtime_metal.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace {
/// A CPU parameter or result type as the Metal flavour of the entry point
/// has it: kvq_metal_cache_t for kvq_cache_t, anything else unchanged.
template <typename T> struct OnMetal { using type = T; };
template <> struct OnMetal<kvq_cache_t *> { using type = kvq_metal_cache_t *; };
template <> struct OnMetal<const kvq_cache_t *> {
  using type = const kvq_metal_cache_t *;
};
template <> struct OnMetal<kvq_cache_t **> {
  using type = kvq_metal_cache_t **;
};

/// The pointer types each MetalForm of kvq/entry_points.def gives the Metal
/// symbol of a CPU signature.
template <typename Signature> struct Forms;
template <typename R, typename... Args> struct Forms<R(Args...)> {
  using Cpu = R (*)(Args...);
  using Same = Cpu;
  using WithContext = R (*)(void *, Args...);
  using MetalCache =
      typename OnMetal<R>::type (*)(typename OnMetal<Args>::type...);
  using MetalCacheNotLowered = MetalCache;
};
} // namespace

// Every symbol the lowering calls is declared with the signature its table
// (kvq/entry_points.def) says: a header changed without the table, or the
// table without the header, does not build.
#define KVQ_ENTRY_POINT(Id, Signature, CpuSymbol, MetalSymbol, MetalForm)     \
  static_assert(std::is_same_v<decltype(&CpuSymbol), Forms<Signature>::Cpu>,  \
                #CpuSymbol " is not declared as kvq/entry_points.def says");  \
  static_assert(                                                              \
      std::is_same_v<decltype(&MetalSymbol), Forms<Signature>::MetalForm>,    \
      #MetalSymbol " is not declared as kvq/entry_points.def says");
#include "kvq/entry_points.def"

// kvq/config_fields.h lists exactly kvq_config's fields but the allocator,
// with their types, in their order, with no gap: the flat constructors and
// the lowering, which pass the configuration field by field, cannot skip,
// reorder or mistype one.
#define KVQ_FIELD_TYPE_IS(type, name)                                          \
  static_assert(std::is_same_v<decltype(kvq_config::name), type>,              \
                "kvq_config::" #name " is not " #type                          \
                " as kvq/config_fields.h says");
KVQ_CONFIG_FIELDS(KVQ_FIELD_TYPE_IS)
#undef KVQ_FIELD_TYPE_IS
namespace {
#define KVQ_FIELD_SPAN(type, name) {offsetof(kvq_config, name), sizeof(type)},
constexpr struct {
  size_t offset, size;
} kListedFields[] = {KVQ_CONFIG_FIELDS(KVQ_FIELD_SPAN)};
#undef KVQ_FIELD_SPAN
constexpr bool listedFieldsTile() {
  size_t end = 0;
  for (const auto &field : kListedFields) {
    if (field.offset != end)
      return false;
    end += field.size;
  }
  return end == offsetof(kvq_config, allocator);
}
} // namespace
static_assert(listedFieldsTile(),
              "kvq/config_fields.h and kvq_config differ in their fields or "
              "their order");

// Generated code reads kvq_stats as consecutive 8-byte slots (the lowering
// derives the slot of each field from this struct); the layout is pinned
// because it is part of the stable ABI.
static_assert(sizeof(kvq_stats) == 14 * 8, "kvq_stats layout changed");
static_assert(offsetof(kvq_stats, total_bytes) == 11 * 8, "kvq_stats layout");
static_assert(offsetof(kvq_stats, fp16_bytes) == 12 * 8, "kvq_stats layout");
static_assert(offsetof(kvq_stats, effective_bits) == 13 * 8,
              "kvq_stats layout");

namespace {
/// The first failure a compiled graph hit on this thread, and its line.
thread_local int32_t pendingStatus = KVQ_OK;
thread_local char pendingError[1024] = "";
/// Whether kvq_check_status prints failures on this thread.
thread_local bool statusEcho = true;
} // namespace

extern "C" KVQ_RT_EXPORT kvq_status
kvq_cache_create_flat(KVQ_CONFIG_FIELDS(KVQ_CONFIG_PARAM) kvq_cache_t **out) {
  return kvq::guarded("kvq_cache_create_flat", [&]() -> kvq_status {
    kvq_config flat = kvq::flatConfigBase();
    KVQ_CONFIG_FIELDS(KVQ_SET_FLAT_FIELD)
    return kvq_cache_create(&flat, out);
  });
}

extern "C" KVQ_RT_EXPORT int32_t kvq_check_status(int32_t status,
                                                  const char *site) {
  if (status == KVQ_OK)
    return status;
  char line[sizeof(pendingError)];
  std::snprintf(line, sizeof(line), "%s: %s: %s", site ? site : "(unknown)",
                kvq_status_string(static_cast<kvq_status>(status)),
                kvq_last_error());
  if (statusEcho)
    std::fprintf(stderr, "kvq: error: %s\n", line);
  if (pendingStatus == KVQ_OK) {
    pendingStatus = status;
    std::memcpy(pendingError, line, sizeof(line));
  }
  return status;
}

extern "C" KVQ_RT_EXPORT kvq_status kvq_take_pending_status(void) {
  kvq_status status = static_cast<kvq_status>(pendingStatus);
  pendingStatus = KVQ_OK;
  pendingError[0] = 0;
  return status;
}

extern "C" KVQ_RT_EXPORT const char *kvq_pending_error(void) {
  return pendingError;
}

extern "C" KVQ_RT_EXPORT void kvq_set_status_echo(int32_t enabled) {
  statusEcho = enabled != 0;
}
