/*===- capi.c - kvq through MLIR's C API ----------------------------------===*
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * A C program that loads the kvq dialect through its C API handle, parses
 * and prints a module with a !kvq.cache, checks the verifier through the C
 * API, and runs --kvq-to-llvm with everything kvqRegisterAll provides.
 *===----------------------------------------------------------------------===*/
// RUN: kvq-capi-test 2>&1 | FileCheck %s

#include "kvq-c/Dialect.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printToStdout(MlirStringRef s, void *user) {
  (void)user;
  fwrite(s.data, 1, s.length, stdout);
}

#define KVQ_CACHE_TYPE                                                         \
  "!kvq.cache<layers = 2, kv_heads = 4, head_dim = 64, element_type = f16, "   \
  "config = <method = kivi, key_bits = 2, value_bits = 2>>"

static const char *kModule = "func.func @make() {\n"
                             "  %c = kvq.cache_create : " KVQ_CACHE_TYPE "\n"
                             "  kvq.cache_destroy %c : " KVQ_CACHE_TYPE "\n"
                             "  return\n"
                             "}\n";

static int fail(const char *what) {
  fprintf(stderr, "FAILED: %s\n", what);
  return 1;
}

int main(void) {
  /* 1. The dialect alone, through its handle. */
  MlirContext ctx = mlirContextCreate();
  MlirDialectHandle kvq = mlirGetDialectHandle__kvq__();
  // CHECK: namespace: kvq
  MlirStringRef ns = mlirDialectHandleGetNamespace(kvq);
  printf("namespace: %.*s\n", (int)ns.length, ns.data);
  mlirDialectHandleRegisterDialect(kvq, ctx);
  MlirDialect loaded = mlirContextGetOrLoadDialect(ctx, ns);
  if (mlirDialectIsNull(loaded))
    return fail("kvq dialect not loaded");
  /* func is not loaded here: allow it unregistered just to parse. */
  mlirContextSetAllowUnregisteredDialects(ctx, true);
  MlirType cache = mlirTypeParseGet(
      ctx, mlirStringRefCreateFromCString(
               "!kvq.cache<layers = 1, kv_heads = 2, head_dim = 8, "
               "element_type = f32, config = <method = kvquant, key_bits = "
               "3, value_bits = 3>>"));
  if (mlirTypeIsNull(cache))
    return fail("!kvq.cache did not parse");
  // CHECK: type: !kvq.cache<layers = 1, kv_heads = 2, head_dim = 8,
  // element_type = f32, config = <method = kvquant, key_bits = 3, value_bits =
  // 3
  printf("type: ");
  mlirTypePrint(cache, printToStdout, NULL);
  printf("\n");
  mlirContextDestroy(ctx);

  /* 2. Everything a pipeline needs, then a module through --kvq-to-llvm. */
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  kvqRegisterAll(registry);
  ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirContextLoadAllAvailableDialects(ctx);
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
  if (mlirModuleIsNull(module))
    return fail("module did not parse");
  MlirOperation op = mlirModuleGetOperation(module);
  if (!mlirOperationVerify(op))
    return fail("module does not verify");
  // CHECK: parsed:
  // CHECK: ![[T:.*]] = !kvq.cache<layers = 2, kv_heads = 4, head_dim = 64,
  // element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2
  // CHECK: %[[C:.*]] = kvq.cache_create : ![[T]]
  // CHECK: kvq.cache_destroy %[[C]] : ![[T]]
  printf("parsed:\n");
  mlirOperationPrint(op, printToStdout, NULL);
  printf("\n");

  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  kvqRegisterPasses();
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString("builtin.module(kvq-to-llvm)"),
      printToStdout, NULL);
  if (mlirLogicalResultIsFailure(parsed))
    return fail("kvq-to-llvm pipeline not found");
  if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, op)))
    return fail("kvq-to-llvm failed");
  // CHECK: lowered:
  // CHECK-NOT: = kvq.cache_create
  // CHECK: llvm.call @kvq_cache_destroy
  printf("lowered:\n");
  mlirOperationPrint(op, printToStdout, NULL);
  printf("\n");
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  // CHECK: OK
  printf("OK\n");
  return 0;
}
