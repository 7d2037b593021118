//===- RuntimeABI.cpp - the table of kvq runtime entry points -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The table is runtime/include/kvq/entry_points.def, whose C signatures the
// runtime checks against its headers; here they become MLIR types.
//
//===----------------------------------------------------------------------===//
#include "passes/conversions/RuntimeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <array>
#include <type_traits>

using namespace mlir;
using namespace mlir::kvq;

namespace {
/// One C parameter or result kind.
enum class C { Ptr, I32, I64, F32, Void };

/// The kind of a C type of kvq/entry_points.def; a type outside these
/// does not build.
template <typename T> constexpr C kindOf() {
  if constexpr (std::is_void_v<T>) {
    return C::Void;
  } else if constexpr (std::is_pointer_v<T>) {
    return C::Ptr;
  } else if constexpr (std::is_same_v<T, float>) {
    return C::F32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return C::I64;
  } else {
    // int32_t and the C enums (kvq_status, kvq_dtype, ...), 32-bit each.
    static_assert(std::is_same_v<T, int32_t> || std::is_enum_v<T>,
                  "no MLIR type for this C type");
    static_assert(sizeof(T) == 4, "a C enum of the ABI is not 32-bit");
    return C::I32;
  }
}

/// How the Metal symbol relates to the CPU one (MetalForm in the .def).
enum class MetalForm { Same, WithContext, MetalCache, MetalCacheNotLowered };

/// A C signature as kinds.
template <typename Signature> struct Kinds;
template <typename R, typename... Args> struct Kinds<R(Args...)> {
  static constexpr C result = kindOf<R>();
  static constexpr bool returnsStatus = std::is_same_v<R, kvq_status>;
  static constexpr std::array<C, sizeof...(Args)> params = {kindOf<Args>()...};
};

struct Entry {
  RuntimeFn fn;
  const char *cpuSymbol;
  const char *metalSymbol; ///< null: not called on Metal
  MetalForm metalForm;
  C result;
  bool returnsStatus; ///< returns a kvq_status generated code checks
  ArrayRef<C> params;
};

/// The table, from kvq/entry_points.def (RuntimeFn order).
const Entry kEntries[] = {
#define KVQ_ENTRY_POINT(Id, Signature, Cpu, Metal, Form)                       \
  {RuntimeFn::Id,                                                              \
   #Cpu,                                                                       \
   MetalForm::Form == MetalForm::MetalCacheNotLowered ? nullptr : #Metal,      \
   MetalForm::Form,                                                            \
   Kinds<Signature>::result,                                                   \
   Kinds<Signature>::returnsStatus,                                            \
   Kinds<Signature>::params},
#include "kvq/entry_points.def"
};

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
  // Stateless kernels need the device context; cache entry points find it
  // in the cache, which a Metal cache holds.
  return target == RuntimeTarget::Metal &&
         lookup(fn).metalForm == MetalForm::WithContext;
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

bool mlir::kvq::returnsStatus(RuntimeFn fn) { return lookup(fn).returnsStatus; }

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

namespace {
/// A pointer to `text` in a private constant global. Equal sites share a
/// global; its name is a stable hash of the text (same input, same IR).
Value siteString(OpBuilder &builder, Location loc, ModuleOp module,
                 StringRef text) {
  uint64_t hash = llvm::xxh3_64bits(text);
  for (unsigned attempt = 0;; ++attempt) {
    std::string name = ("__kvq_site_" + llvm::Twine::utohexstr(hash) +
                        (attempt ? "_" + llvm::Twine(attempt) : ""))
                           .str();
    auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
    if (!global)
      return LLVM::createGlobalString(loc, builder, name, text,
                                      LLVM::Linkage::Internal);
    auto value = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
    if (value && value.getValue() == text)
      return LLVM::AddressOfOp::create(builder, loc, global);
  }
}
} // namespace

void mlir::kvq::createStatusCheck(OpBuilder &builder, Operation *op,
                                  RuntimeFn fn, RuntimeTarget target,
                                  Value status, bool abortOnError) {
  Location loc = op->getLoc();
  auto module = op->getParentOfType<ModuleOp>();
  std::string site;
  llvm::raw_string_ostream os(site);
  os << op->getName() << " (" << getRuntimeSymbol(fn, target) << ") at "
     << loc;
  std::string text = site;
  text.push_back('\0');
  Value sitePtr = siteString(builder, loc, module, text);
  func::FuncOp check =
      getOrInsertRuntimeDecl(builder, module, RuntimeFn::CheckStatus, target);
  Value checked =
      func::CallOp::create(builder, loc, check, ValueRange{status, sitePtr})
          .getResult(0);
  if (!abortOnError)
    return;
  Value ok = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::eq, checked,
      arith::ConstantIntOp::create(builder, loc, KVQ_OK, 32));
  cf::AssertOp::create(builder, loc, ok, "kvq runtime call failed: " + site);
}
