//===- KvqDialect.h - the kvq dialect ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One include for users of the dialect: the dialect class, its enums,
// attributes, types and ops.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_DIALECT_KVQDIALECT_H
#define KVQ_DIALECT_KVQDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpAsmSupport.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kvq/dialect/KvqDialect.h.inc"
#include "kvq/dialect/KvqEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kvq/dialect/KvqAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kvq/dialect/KvqTypes.h.inc"

#define GET_OP_CLASSES
#include "kvq/dialect/KvqOps.h.inc"

#endif // KVQ_DIALECT_KVQDIALECT_H
