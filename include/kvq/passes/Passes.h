//===- Passes.h - kvq passes ------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Declarations and registration of every kvq pass and pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_PASSES_H
#define KVQ_PASSES_PASSES_H

#include "kvq/dialect/KvqDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kvq {

#define GEN_PASS_DECL
#include "kvq/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kvq/passes/Passes.h.inc"

/// Registers the named pipelines --kvq-to-llvm and --kvq-to-metal.
void registerKvqPipelines();

} // namespace mlir::kvq

#endif // KVQ_PASSES_PASSES_H
