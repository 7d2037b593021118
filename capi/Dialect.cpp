//===- Dialect.cpp - kvq-c/Dialect.h --------------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "kvq-c/Dialect.h"

#include "kvq/dialect/KvqDialect.h"
#include "kvq/passes/Registration.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Kvq, kvq, mlir::kvq::KvqDialect)

void kvqRegisterPasses(void) { mlir::kvq::registerKvqPassesAndPipelines(); }

void kvqRegisterAll(MlirDialectRegistry registry) {
  mlir::kvq::registerAllKvq(*unwrap(registry));
}
