/*===- kvq-c/Dialect.h - the kvq dialect through MLIR's C API -----*- C -*-===*
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * For C programs and other-language bindings built on MLIR's C API
 * (mlir-c/IR.h): load the kvq dialect into a context, register kvq's
 * passes and pipelines, or everything kvq's pipelines need.
 *
 *   MlirContext ctx = mlirContextCreate();
 *   mlirDialectHandleLoadDialect(mlirGetDialectHandle__kvq__(), ctx);
 *
 * Link kvq::CAPI (libKvqCAPI.so), which also exports MLIR's core C API
 * (mlir-c/IR.h, mlir-c/Pass.h) built against the same MLIR as kvq.
 *===----------------------------------------------------------------------===*/
#ifndef KVQ_C_DIALECT_H
#define KVQ_C_DIALECT_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__kvq__(): the kvq dialect's registration handle. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Kvq, kvq);

/* Registers the kvq passes (kvq-configure-caches, kvq-quantize-kv-cache,
 * convert-kvq-to-runtime) and pipelines (kvq-to-llvm, kvq-to-metal) with
 * MLIR's global registry, so mlirParsePassPipeline finds them. Safe to call
 * more than once. */
MLIR_CAPI_EXPORTED void kvqRegisterPasses(void);

/* Adds to `registry` what mlir::kvq::registerAllKvq adds: the kvq dialect,
 * the upstream dialects a kvq pipeline goes through with their external
 * models, and the LLVM IR translations; also registers the passes. */
MLIR_CAPI_EXPORTED void kvqRegisterAll(MlirDialectRegistry registry);

#ifdef __cplusplus
}
#endif

#endif /* KVQ_C_DIALECT_H */
