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

// Generated code reads kvq_stats as consecutive 8-byte slots (the lowering
// derives the slot of each field from this struct); the layout is pinned
// because it is part of the stable ABI.
static_assert(sizeof(kvq_stats) == 14 * 8, "kvq_stats layout changed");
static_assert(offsetof(kvq_stats, total_bytes) == 11 * 8, "kvq_stats layout");
static_assert(offsetof(kvq_stats, fp16_bytes) == 12 * 8, "kvq_stats layout");
static_assert(offsetof(kvq_stats, effective_bits) == 13 * 8,
              "kvq_stats layout");

namespace {
/// The first failure a compiled graph hit on this thread.
thread_local int32_t pendingStatus = KVQ_OK;
} // namespace

extern "C" KVQ_RT_EXPORT kvq_status kvq_cache_create_flat(
    int32_t method, int32_t key_bits, int32_t value_bits, int32_t group_size,
    int32_t residual_length, int32_t residual_mode, int32_t n_sink_tokens,
    float outlier_fraction, int32_t lloyd_iters, int32_t refit_interval,
    int32_t kvquant_n_sink, int32_t kvquant_group_size, int32_t num_layers,
    int32_t num_kv_heads, int32_t head_dim, int32_t backend, int32_t rope_style,
    float rope_theta, kvq_cache_t **out) {
  return kvq::guarded("kvq_cache_create_flat", [&]() -> kvq_status {
    kvq_config cfg = kvq::flatConfig(
        method, key_bits, value_bits, group_size, residual_length,
        residual_mode, n_sink_tokens, outlier_fraction, lloyd_iters,
        refit_interval, kvquant_n_sink, kvquant_group_size, num_layers,
        num_kv_heads, head_dim, backend, rope_style, rope_theta);
    return kvq_cache_create(&cfg, out);
  });
}

extern "C" KVQ_RT_EXPORT int32_t kvq_check_status(int32_t status,
                                                  const char *site) {
  if (status == KVQ_OK)
    return status;
  std::fprintf(stderr, "kvq: error: %s: %s: %s\n", site ? site : "(unknown)",
               kvq_status_string(static_cast<kvq_status>(status)),
               kvq_last_error());
  if (pendingStatus == KVQ_OK)
    pendingStatus = status;
  return status;
}

extern "C" KVQ_RT_EXPORT kvq_status kvq_take_pending_status(void) {
  kvq_status status = static_cast<kvq_status>(pendingStatus);
  pendingStatus = KVQ_OK;
  return status;
}
