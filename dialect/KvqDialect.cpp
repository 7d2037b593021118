//===- KvqDialect.cpp - kvq dialect registration --------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Registers the kvq ops, attributes and types, and materializes the
// constants that kvq folders produce as arith.constant.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"

#include "kvq/config_limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::kvq;

#include "kvq/dialect/KvqDialect.cpp.inc"
#include "kvq/dialect/KvqEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kvq/dialect/KvqAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kvq/dialect/KvqTypes.cpp.inc"

void KvqDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kvq/dialect/KvqOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kvq/dialect/KvqAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "kvq/dialect/KvqTypes.cpp.inc"
      >();
}

Operation *KvqDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed || !arith::ConstantOp::isBuildableWith(typed, type))
    return nullptr;
  return arith::ConstantOp::create(builder, loc, type, typed);
}
