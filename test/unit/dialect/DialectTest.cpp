//===- DialectTest.cpp - kvq builders and verifiers from C++ --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Builds kvq attributes, types and ops through the C++ API and checks what
// the verifiers say, the way a compiler embedding kvq would use them.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"
#include "kvq/runtime.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::kvq;

namespace {

class KvqDialectTest : public ::testing::Test {
protected:
  KvqDialectTest() {
    context.loadDialect<KvqDialect, func::FuncDialect, arith::ArithDialect>();
  }

  /// Captures every diagnostic message emitted while `fn` runs.
  template <typename Fn> std::string diagnosticsOf(Fn &&fn) {
    std::string messages;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      messages += diag.str();
      messages += "\n";
      return success();
    });
    fn();
    return messages;
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }

  MLIRContext context;
  OpBuilder builder{&context};
  Location loc = UnknownLoc::get(&context);
};

TEST_F(KvqDialectTest, DefaultConfigFollowsSeedDefaults) {
  auto kivi = CacheConfigAttr::getDefault(&context, Method::Kivi);
  EXPECT_EQ(kivi.getKeyBits(), 2);
  EXPECT_EQ(kivi.getValueBits(), 2);
  EXPECT_EQ(kivi.getGroupSize(), 32);
  EXPECT_EQ(kivi.getResidualLength(), 32);
  EXPECT_EQ(kivi.getResidualMode(), ResidualMode::Sliding);
  // No sinks on plain KIVI (the runtime refuses any), 5 on kivi_sink: the
  // seed's values, as kvq_config_init sets them.
  EXPECT_FALSE(kivi.getNSinkTokens().has_value());
  EXPECT_EQ(kivi.getSinkTokens(), 0);
  auto sink = CacheConfigAttr::getDefault(&context, Method::KiviSink);
  EXPECT_EQ(sink.getSinkTokens(), 5);
  kvq_config runtimeKivi, runtimeSink;
  kvq_config_init(&runtimeKivi, KVQ_METHOD_KIVI);
  kvq_config_init(&runtimeSink, KVQ_METHOD_KIVI_SINK);
  EXPECT_EQ(kivi.getSinkTokens(), runtimeKivi.n_sink_tokens);
  EXPECT_EQ(sink.getSinkTokens(), runtimeSink.n_sink_tokens);

  auto kvquant = CacheConfigAttr::getDefault(&context, Method::KVQuant);
  EXPECT_EQ(kvquant.getKeyBits(), 3);
  EXPECT_DOUBLE_EQ(kvquant.getOutlierFractionValue(), 0.01);
  EXPECT_EQ(kvquant.getLloydIters(), 8);
  // Not the seed's 0 (frozen levels): the runtime's
  // KVQ_DEFAULT_REFIT_INTERVAL, see docs/RUNTIME.md.
  EXPECT_EQ(kvquant.getRefitInterval(), 128);
  EXPECT_EQ(kvquant.getKvquantNSink(), 1);
  EXPECT_EQ(kvquant.getKvquantGroupSize(), 32);
}

TEST_F(KvqDialectTest, ConfigRejectsUnsupportedBits) {
  std::string diags = diagnosticsOf([&] {
    auto attr = CacheConfigAttr::getChecked(
        [&] { return emitError(loc); }, &context, Method::Kivi, int64_t{5},
        int64_t{2}, int64_t{32}, int64_t{32}, ResidualMode::Sliding,
        std::optional<int64_t>{}, llvm::APFloat(0.01), int64_t{8}, int64_t{0},
        int64_t{1}, int64_t{32}, RopeAttr());
    EXPECT_FALSE(attr);
  });
  EXPECT_NE(diags.find("unsupported key_bits 5"), std::string::npos) << diags;
}

TEST_F(KvqDialectTest, ConfigRejectsOutlierFractionOutOfRange) {
  std::string diags = diagnosticsOf([&] {
    auto attr = CacheConfigAttr::getChecked(
        [&] { return emitError(loc); }, &context, Method::KVQuant, int64_t{3},
        int64_t{3}, int64_t{32}, int64_t{32}, ResidualMode::Sliding,
        std::optional<int64_t>{}, llvm::APFloat(1.0), int64_t{8}, int64_t{0},
        int64_t{1}, int64_t{32}, RopeAttr());
    EXPECT_FALSE(attr);
  });
  EXPECT_NE(diags.find("outlier_fraction 1 is not in [0, 1)"),
            std::string::npos)
      << diags;
}

TEST_F(KvqDialectTest, CacheTypeRejectsGroupNotDividingHeadDim) {
  auto config = CacheConfigAttr::getDefault(&context, Method::Kivi);
  std::string diags = diagnosticsOf([&] {
    auto type = CacheType::getChecked([&] { return emitError(loc); }, &context,
                                      int64_t{2}, int64_t{8}, int64_t{48},
                                      Type(builder.getF16Type()), config);
    EXPECT_FALSE(type);
  });
  EXPECT_NE(diags.find("group_size 32 does not divide head_dim 48"),
            std::string::npos)
      << diags;
}

TEST_F(KvqDialectTest, CacheTypeRoundTripsThroughText) {
  auto config = CacheConfigAttr::getDefault(&context, Method::KiviSink);
  auto type = CacheType::get(&context, int64_t{32}, int64_t{8}, int64_t{128},
                             builder.getF16Type(), config);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  Type parsed = parseType(text, &context);
  EXPECT_EQ(parsed, type) << text;
}

TEST_F(KvqDialectTest, GroupQuantBuilderVerifies) {
  auto module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module.getBody());
  auto f16 = builder.getF16Type();
  auto input = tensor({128, 8, 64}, f16);
  auto func = func::FuncOp::create(builder, loc, "quant",
                                   builder.getFunctionType({input}, {}));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  auto op = GroupQuantOp::create(
      builder, loc, tensor({128, 8, 64}, builder.getI8Type()),
      tensor({128, 8, 2}, f16), tensor({128, 8, 2}, f16), body->getArgument(0),
      QuantAxis::PerToken, /*group=*/32, /*bits=*/2,
      /*exclude=*/Value());
  func::ReturnOp::create(builder, loc);
  EXPECT_TRUE(succeeded(verify(module)));
  EXPECT_EQ(op.getGroup(), 32u);

  // The same op with a wrong scale shape must be rejected, naming it.
  builder.setInsertionPoint(op);
  auto bad = GroupQuantOp::create(
      builder, loc, tensor({128, 8, 64}, builder.getI8Type()),
      tensor({128, 8, 4}, f16), tensor({128, 8, 2}, f16), body->getArgument(0),
      QuantAxis::PerToken, 32, 2, Value());
  std::string diags = diagnosticsOf([&] { EXPECT_TRUE(failed(verify(bad))); });
  EXPECT_NE(diags.find("scale has shape 128x8x4 but 128x8x2 is expected"),
            std::string::npos)
      << diags;
  module->erase();
}

TEST_F(KvqDialectTest, SinkSelectRejectsMoreSinksThanTokens) {
  auto module = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%n: tensor<3xf32>) -> tensor<5xi64> {
      %p = kvq.sink_select %n count 5 : tensor<3xf32> -> tensor<5xi64>
      return %p : tensor<5xi64>
    })mlir",
                                            &context);
  // The parser verifies: a failed parse means the verifier fired.
  std::string diags = diagnosticsOf([&] {
    auto again = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%n: tensor<3xf32>) -> tensor<5xi64> {
      %p = kvq.sink_select %n count 5 : tensor<3xf32> -> tensor<5xi64>
      return %p : tensor<5xi64>
    })mlir",
                                             &context);
    EXPECT_FALSE(again);
  });
  EXPECT_FALSE(module);
  EXPECT_NE(diags.find("sink count 5 exceeds the 3 tokens"), std::string::npos)
      << diags;
}

} // namespace
