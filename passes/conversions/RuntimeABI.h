//===- RuntimeABI.h ---------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kvq runtime entry points, as seen by MLIR.
//
// The one table on the compiler side that mirrors runtime/include/kvq/
// runtime.h: every symbol, per target, and its C signature in MLIR types.
// Patterns ask this table for callees; none spells a symbol itself.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H
#define KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "kvq/passes/Passes.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::kvq {

/// The backend a conversion targets.

/// Every runtime entry point that generated code calls.
enum class RuntimeFn {
  GroupQuant,
  GroupDequant,
  NuqFitScratchSize,
  NuqFit,
  NuqQuant,
  NuqDequant,
  OutlierSplit,
  OutlierScreen,
  KeyNorm,
  SinkSelect,
  CacheCreate,
  CacheDestroy,
  CacheUpdate,
  CacheLength,
  CacheFetch,
  CacheAttend,
  CacheStats,
  CacheTruncate,
  CheckStatus,
  MetalContext,
};

/// Values of the runtime's C enums that generated code passes.
namespace abi {
constexpr int32_t kDtypeF16 = 0, kDtypeF32 = 1;
constexpr int32_t kAxisPerToken = 0, kAxisPerChannel = 1;
constexpr int32_t kCodesUnpacked = 0;
constexpr int32_t kBackendCPU = 0, kBackendMetal = 1;
constexpr int32_t kRopeNone = 0; ///< a cache without `rope`
constexpr int32_t kStatusOk = 0;
/// kvq_stats is read as 8-byte slots (static_assert'ed in the runtime).
constexpr int64_t kStatsSlots = 14, kStatsTokens = 0, kStatsTotalBytes = 11,
                  kStatsFp16Bytes = 12, kStatsEffectiveBits = 13;
} // namespace abi

/// Whether `target`'s runtime has an entry point for `fn` (the Metal
/// runtime has no kvq_cache_truncate yet).
bool hasRuntimeSymbol(RuntimeFn fn, RuntimeTarget target);

/// The symbol of `fn` for `target` (e.g. kvq_group_quant,
/// kvq_metal_group_quant); `fn` must exist there (hasRuntimeSymbol).
StringRef getRuntimeSymbol(RuntimeFn fn, RuntimeTarget target);

/// The C signature of `fn` for `target` in MLIR types: pointers are
/// !llvm.ptr, C ints i32/i64, float f32; Metal kernels take their context
/// pointer first.
FunctionType getRuntimeType(MLIRContext *context, RuntimeFn fn,
                            RuntimeTarget target);

/// Whether generated code must check the i32 status `fn` returns.
bool returnsStatus(RuntimeFn fn);

/// Whether `fn` on `target` takes the Metal context as first argument.
bool takesMetalContext(RuntimeFn fn, RuntimeTarget target);

/// The private declaration of `fn` in `module`, created on first use.
func::FuncOp getOrInsertRuntimeDecl(OpBuilder &builder, ModuleOp module,
                                    RuntimeFn fn, RuntimeTarget target);

} // namespace mlir::kvq

#endif // KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H
