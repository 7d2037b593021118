//===- RuntimeABI.h ---------------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kvq runtime entry points, as seen by MLIR.
//
// The one table on the compiler side of the runtime's entry points, built
// from runtime/include/kvq/entry_points.def: every symbol, per target, and
// its C signature in MLIR types. Patterns ask this table for callees; none
// spells a symbol itself. Enum values and struct offsets come from the C
// header kvq/runtime.h (KVQ_DTYPE_F16, ..., and stats_slot below).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H
#define KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H

#include "kvq/passes/Passes.h"
#include "kvq/runtime.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstddef>

namespace mlir::kvq {

/// Every runtime entry point that generated code calls, in the order of
/// kvq/entry_points.def.
enum class RuntimeFn {
#define KVQ_ENTRY_POINT(Id, Signature, Cpu, Metal, MetalForm) Id,
#include "kvq/entry_points.def"
};

/// Where generated code finds a kvq_stats field: the struct read as
/// consecutive 8-byte slots (the runtime pins the layout).
namespace stats_slot {
static_assert(sizeof(kvq_stats) % 8 == 0 && alignof(kvq_stats) == 8,
              "kvq_stats is read as 8-byte slots");
static_assert(sizeof(kvq_stats::tokens) == 8 &&
                  sizeof(kvq_stats::total_bytes) == 8 &&
                  sizeof(kvq_stats::fp16_bytes) == 8 &&
                  sizeof(kvq_stats::effective_bits) == 8,
              "every kvq_stats field read is one slot");
constexpr int64_t kCount = sizeof(kvq_stats) / 8;
constexpr int64_t kTokens = offsetof(kvq_stats, tokens) / 8;
constexpr int64_t kTotalBytes = offsetof(kvq_stats, total_bytes) / 8;
constexpr int64_t kFp16Bytes = offsetof(kvq_stats, fp16_bytes) / 8;
constexpr int64_t kEffectiveBits = offsetof(kvq_stats, effective_bits) / 8;
} // namespace stats_slot

/// Whether generated code for `target` may call `fn` (the Metal target
/// does not call kvq_metal_cache_truncate yet: MetalCacheNotLowered in
/// kvq/entry_points.def).
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

/// The check generated after a call of `fn` on `target` that returned
/// `status`, made by `op`: kvq_check_status(status, "<op> (<symbol>) at
/// <location>") reports and records any failure; with `abortOnError` a
/// cf.assert then stops the program.
void createStatusCheck(OpBuilder &builder, Operation *op, RuntimeFn fn,
                       RuntimeTarget target, Value status, bool abortOnError);

} // namespace mlir::kvq

#endif // KVQ_PASSES_CONVERSIONS_RUNTIMEABI_H
