// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiles only if the public headers and their generated .inc files are
// where kvq's targets say they are.
#include "kvq/dialect/KvqDialect.h"
#include "kvq/passes/Passes.h"
#include "kvq/passes/Registration.h"

mlir::TypeID kvqDialectTypeId() {
  return mlir::TypeID::get<mlir::kvq::KvqDialect>();
}
