//===- RuntimeABI.cpp - the table of kvq runtime entry points -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Mirrors runtime/include/kvq/runtime.h. When a signature changes there, it
// changes here, and nowhere else in the compiler.
//
//===----------------------------------------------------------------------===//
#include "passes/conversions/RuntimeABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::kvq;

namespace {
/// One C parameter or result kind.
enum class C { Ptr, I32, I64, F32, Void };

struct Entry {
  RuntimeFn fn;
  const char *cpuSymbol;
  const char *metalSymbol;
  C result;
  std::initializer_list<C> params;
};

// clang-format off
/// The table. Order of params = order in runtime.h.
const Entry kEntries[] = {
  // kvq_group_quant(x, dtype, rows, cols, axis, group, bits, exclude, layout,
  //                 codes, scale, zero)
  {RuntimeFn::GroupQuant, "kvq_group_quant", "kvq_metal_group_quant", C::I32,
   {C::Ptr, C::I32, C::I64, C::I64, C::I32, C::I32, C::I32, C::Ptr, C::I32,
    C::Ptr, C::Ptr, C::Ptr}},
  // kvq_group_dequant(codes, layout, scale, zero, rows, cols, axis, group,
  //                   bits, out, dtype)
  {RuntimeFn::GroupDequant, "kvq_group_dequant", "kvq_metal_group_dequant",
   C::I32,
   {C::Ptr, C::I32, C::Ptr, C::Ptr, C::I64, C::I64, C::I32, C::I32, C::I32,
    C::Ptr, C::I32}},
  // kvq_nuq_fit_scratch_size(len, bits) -> int64
  {RuntimeFn::NuqFitScratchSize, "kvq_nuq_fit_scratch_size",
   "kvq_nuq_fit_scratch_size", C::I64, {C::I64, C::I32}},
  // kvq_nuq_fit(x, dtype, rows, cols, axis, group, bits, iters, exclude,
  //             scratch, scratch_floats, levels)
  {RuntimeFn::NuqFit, "kvq_nuq_fit", "kvq_metal_nuq_fit", C::I32,
   {C::Ptr, C::I32, C::I64, C::I64, C::I32, C::I32, C::I32, C::I32, C::Ptr,
    C::Ptr, C::I64, C::Ptr}},
  // kvq_nuq_quant(x, dtype, rows, cols, axis, group, bits, levels, layout,
  //               codes)
  {RuntimeFn::NuqQuant, "kvq_nuq_quant", "kvq_metal_nuq_quant", C::I32,
   {C::Ptr, C::I32, C::I64, C::I64, C::I32, C::I32, C::I32, C::Ptr, C::I32,
    C::Ptr}},
  // kvq_nuq_dequant(codes, layout, levels, rows, cols, axis, group, bits,
  //                 out, dtype)
  {RuntimeFn::NuqDequant, "kvq_nuq_dequant", "kvq_metal_nuq_dequant", C::I32,
   {C::Ptr, C::I32, C::Ptr, C::I64, C::I64, C::I32, C::I32, C::I32, C::Ptr,
    C::I32}},
  // kvq_outlier_split(x, dtype, rows, cols, axis, group, fraction, exclude,
  //                   mask, threshold)
  {RuntimeFn::OutlierSplit, "kvq_outlier_split", "kvq_metal_outlier_split",
   C::I32,
   {C::Ptr, C::I32, C::I64, C::I64, C::I32, C::I32, C::F32, C::Ptr, C::Ptr,
    C::Ptr}},
  // kvq_outlier_screen(x, dtype, rows, cols, threshold, mask)
  {RuntimeFn::OutlierScreen, "kvq_outlier_screen", "kvq_metal_outlier_screen",
   C::I32, {C::Ptr, C::I32, C::I64, C::I64, C::Ptr, C::Ptr}},
  // kvq_key_norm(keys, dtype, tokens, kv_heads, head_dim, norms)
  {RuntimeFn::KeyNorm, "kvq_key_norm", "kvq_metal_key_norm", C::I32,
   {C::Ptr, C::I32, C::I64, C::I32, C::I32, C::Ptr}},
  // kvq_sink_select(norms, tokens, k, positions)
  {RuntimeFn::SinkSelect, "kvq_sink_select", "kvq_metal_sink_select", C::I32,
   {C::Ptr, C::I64, C::I32, C::Ptr}},
  // kvq_cache_create_flat(method, key_bits, value_bits, group_size,
  //   residual_length, residual_mode, n_sink_tokens, outlier_fraction,
  //   lloyd_iters, refit_interval, kvquant_n_sink, kvquant_group_size,
  //   num_layers, num_kv_heads, head_dim, backend, rope_style, rope_theta,
  //   out)
  {RuntimeFn::CacheCreate, "kvq_cache_create_flat",
   "kvq_metal_cache_create_flat", C::I32,
   {C::I32, C::I32, C::I32, C::I32, C::I32, C::I32, C::I32, C::F32, C::I32,
    C::I32, C::I32, C::I32, C::I32, C::I32, C::I32, C::I32, C::I32, C::F32,
    C::Ptr}},
  // kvq_cache_destroy(cache)
  {RuntimeFn::CacheDestroy, "kvq_cache_destroy", "kvq_metal_cache_destroy",
   C::Void, {C::Ptr}},
  // kvq_cache_update(cache, layer, keys, values, n_tokens, dtype)
  {RuntimeFn::CacheUpdate, "kvq_cache_update", "kvq_metal_cache_update",
   C::I32, {C::Ptr, C::I32, C::Ptr, C::Ptr, C::I64, C::I32}},
  // kvq_cache_length(cache, layer, n_tokens*)
  {RuntimeFn::CacheLength, "kvq_cache_length", "kvq_metal_cache_length",
   C::I32, {C::Ptr, C::I32, C::Ptr}},
  // kvq_cache_fetch(cache, layer, keys_out, values_out, capacity, dtype)
  {RuntimeFn::CacheFetch, "kvq_cache_fetch", "kvq_metal_cache_fetch", C::I32,
   {C::Ptr, C::I32, C::Ptr, C::Ptr, C::I64, C::I32}},
  // kvq_cache_attend(cache, layer, queries, n_queries, q_heads, out)
  {RuntimeFn::CacheAttend, "kvq_cache_attend", "kvq_metal_cache_attend",
   C::I32, {C::Ptr, C::I32, C::Ptr, C::I64, C::I32, C::Ptr}},
  // kvq_cache_stats(cache, layer, stats*)
  {RuntimeFn::CacheStats, "kvq_cache_stats", "kvq_metal_cache_stats", C::I32,
   {C::Ptr, C::I32, C::Ptr}},
  // kvq_cache_truncate(cache, n_tokens) (no Metal entry point: null)
  {RuntimeFn::CacheTruncate, "kvq_cache_truncate", nullptr, C::I32,
   {C::Ptr, C::I64}},
  // kvq_check_status(status, site) -> status
  {RuntimeFn::CheckStatus, "kvq_check_status", "kvq_check_status", C::I32,
   {C::I32, C::Ptr}},
  // kvq_metal_default_context() -> context (Metal only)
  {RuntimeFn::MetalContext, "kvq_metal_default_context",
   "kvq_metal_default_context", C::Ptr, {}},
};
// clang-format on

const Entry &lookup(RuntimeFn fn) {
  const Entry &entry = kEntries[static_cast<size_t>(fn)];
  assert(entry.fn == fn && "kEntries must follow the RuntimeFn order");
  return entry;
}

Type toMLIR(MLIRContext *context, C kind) {
  switch (kind) {
  case C::Ptr:
    return LLVM::LLVMPointerType::get(context);
  case C::I32:
    return IntegerType::get(context, 32);
  case C::I64:
    return IntegerType::get(context, 64);
  case C::F32:
    return Float32Type::get(context);
  case C::Void:
    break;
  }
  return {};
}
} // namespace

bool mlir::kvq::takesMetalContext(RuntimeFn fn, RuntimeTarget target) {
  if (target != RuntimeTarget::Metal)
    return false;
  // Stateless kernels need the device context; cache entry points find it
  // in the cache, which a Metal cache holds.
  switch (fn) {
  case RuntimeFn::GroupQuant:
  case RuntimeFn::GroupDequant:
  case RuntimeFn::NuqFit:
  case RuntimeFn::NuqQuant:
  case RuntimeFn::NuqDequant:
  case RuntimeFn::OutlierSplit:
  case RuntimeFn::OutlierScreen:
  case RuntimeFn::KeyNorm:
  case RuntimeFn::SinkSelect:
    return true;
  default:
    return false;
  }
}

bool mlir::kvq::hasRuntimeSymbol(RuntimeFn fn, RuntimeTarget target) {
  const Entry &entry = lookup(fn);
  return (target == RuntimeTarget::CPU ? entry.cpuSymbol : entry.metalSymbol) !=
         nullptr;
}

StringRef mlir::kvq::getRuntimeSymbol(RuntimeFn fn, RuntimeTarget target) {
  assert(hasRuntimeSymbol(fn, target) && "no entry point on this target");
  const Entry &entry = lookup(fn);
  return target == RuntimeTarget::CPU ? entry.cpuSymbol : entry.metalSymbol;
}

bool mlir::kvq::returnsStatus(RuntimeFn fn) {
  return lookup(fn).result == C::I32 && fn != RuntimeFn::CheckStatus;
}

FunctionType mlir::kvq::getRuntimeType(MLIRContext *context, RuntimeFn fn,
                                       RuntimeTarget target) {
  const Entry &entry = lookup(fn);
  SmallVector<Type> inputs;
  if (takesMetalContext(fn, target))
    inputs.push_back(toMLIR(context, C::Ptr));
  for (C param : entry.params)
    inputs.push_back(toMLIR(context, param));
  SmallVector<Type> results;
  if (entry.result != C::Void)
    results.push_back(toMLIR(context, entry.result));
  return FunctionType::get(context, inputs, results);
}

func::FuncOp mlir::kvq::getOrInsertRuntimeDecl(OpBuilder &builder,
                                               ModuleOp module, RuntimeFn fn,
                                               RuntimeTarget target) {
  StringRef symbol = getRuntimeSymbol(fn, target);
  if (auto existing = module.lookupSymbol<func::FuncOp>(symbol))
    return existing;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  auto decl =
      func::FuncOp::create(builder, module.getLoc(), symbol,
                           getRuntimeType(builder.getContext(), fn, target));
  decl.setPrivate();
  return decl;
}
