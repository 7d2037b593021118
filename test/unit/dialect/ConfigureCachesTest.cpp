//===- ConfigureCachesTest.cpp - kvq-configure-caches from C++ ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Runs the pass through a PassManager, as an embedding compiler would, and
// checks the rewritten function signature.
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::kvq;

namespace {

constexpr const char *kGraph = R"mlir(
  !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64,
                      element_type = f16,
                      config = <method = fp16, key_bits = 16, value_bits = 16>>
  func.func @step(%c: !cache, %k: tensor<1x2x64xf16>, %v: tensor<1x2x64xf16>) {
    kvq.cache_update %c[1], %k, %v : !cache, tensor<1x2x64xf16>, tensor<1x2x64xf16>
    return
  }
)mlir";

TEST(ConfigureCachesTest, RewritesSignatureToRequestedMethod) {
  MLIRContext context;
  context.loadDialect<KvqDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kGraph, &context);
  ASSERT_TRUE(module);

  PassManager pm(&context);
  KvqConfigureCachesOptions options;
  options.method = Method::KVQuant;
  options.outlierFraction = 0.02;
  pm.addPass(createKvqConfigureCaches(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));

  auto func = module->lookupSymbol<func::FuncOp>("step");
  auto cache = cast<CacheType>(func.getArgumentTypes()[0]);
  EXPECT_EQ(cache.getConfig().getMethod(), Method::KVQuant);
  EXPECT_EQ(cache.getConfig().getKeyBits(), 3);
  EXPECT_DOUBLE_EQ(cache.getConfig().getOutlierFractionValue(), 0.02);
  EXPECT_EQ(cache.getHeadDim(), 64);
}

TEST(ConfigureCachesTest, FailsWhenGroupDoesNotDivideHeadDim) {
  MLIRContext context;
  context.loadDialect<KvqDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kGraph, &context);
  ASSERT_TRUE(module);
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    messages += diag.str();
    return success();
  });
  PassManager pm(&context);
  KvqConfigureCachesOptions options;
  options.method = Method::Kivi;
  options.groupSize = 48;
  pm.addPass(createKvqConfigureCaches(options));
  EXPECT_TRUE(failed(pm.run(*module)));
  EXPECT_NE(messages.find("group_size 48 does not divide head_dim 64"),
            std::string::npos)
      << messages;
}

} // namespace
