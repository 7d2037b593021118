//===- ConfigRulesAgreeTest.cpp - dialect and runtime judge alike ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The dialect's verifiers and kvq_config_validate apply the same rules,
// checked over a grid of configurations: every method
// with edge values of each field (one field at a time, and the fields that
// constrain each other together). Each configuration is written as
// !kvq.cache<..., config = <...>> text for the parser, which runs the
// dialect's verifiers, and filled into a kvq_config for kvq_config_validate.
// Both must accept, or both reject with the same message.
//
//===----------------------------------------------------------------------===//
#include "kvq/dialect/KvqDialect.h"
#include "kvq/runtime.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace mlir;

namespace {

/// One configuration of the grid: a runtime kvq_config (the shape in its
/// fields) and how it was made.
struct Case {
  std::string name;
  kvq_config config;
};

const char *methodName(int32_t method) {
  switch (method) {
  case KVQ_METHOD_FP16:
    return "fp16";
  case KVQ_METHOD_KIVI:
    return "kivi";
  case KVQ_METHOD_KIVI_SINK:
    return "kivi_sink";
  default:
    return "kvquant";
  }
}

/// A double as a float literal the parser reads back exactly.
std::string literal(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17e", value);
  return text;
}

/// The !kvq.cache text of `c`, every parameter spelled out. The two floats
/// are given as doubles that round to the runtime's floats (`fraction`,
/// `theta`): the dialect keeps doubles and rounds them when it lowers.
std::string cacheText(const kvq_config &c, double fraction, double theta) {
  std::string text =
      "!kvq.cache<layers = " + std::to_string(c.num_layers) +
      ", kv_heads = " + std::to_string(c.num_kv_heads) +
      ", head_dim = " + std::to_string(c.head_dim) +
      ", element_type = f16, config = <method = " + methodName(c.method) +
      ", key_bits = " + std::to_string(c.key_bits) +
      ", value_bits = " + std::to_string(c.value_bits) +
      ", group_size = " + std::to_string(c.group_size) +
      ", residual_length = " + std::to_string(c.residual_length) +
      ", residual_mode = " +
      (c.residual_mode == KVQ_RESIDUAL_BLOCK ? "block" : "sliding") +
      ", n_sink_tokens = " + std::to_string(c.n_sink_tokens) +
      ", outlier_fraction = " + literal(fraction) +
      ", lloyd_iters = " + std::to_string(c.lloyd_iters) +
      ", refit_interval = " + std::to_string(c.refit_interval) +
      ", kvquant_n_sink = " + std::to_string(c.kvquant_n_sink) +
      ", kvquant_group_size = " + std::to_string(c.kvquant_group_size);
  if (c.rope_style != KVQ_ROPE_NONE)
    text += ", rope = <theta = " + literal(theta) + ", style = " +
            (c.rope_style == KVQ_ROPE_HALF ? "half" : "interleaved") + ">";
  return text + ">>";
}

/// What the dialect says about a configuration: the parsed type (null when
/// refused) and the first diagnostic (the rule broken; the parser's
/// "failed to parse ..." notes follow it).
struct DialectVerdict {
  bool accepted;
  std::string message;
};

DialectVerdict dialectVerdict(MLIRContext &context, const std::string &text) {
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    messages.push_back(diag.str());
    return success();
  });
  Type type = parseType(text, &context);
  return {static_cast<bool>(type), messages.empty() ? "" : messages.front()};
}

/// Edge values of one field, applied to a valid base configuration.
struct FieldEdges {
  const char *field;
  std::vector<int64_t> values;
  std::function<void(kvq_config &, int64_t)> set;
};

constexpr int64_t kI32Max = INT32_MAX, kI32Min = INT32_MIN;

std::vector<FieldEdges> integerFields() {
  std::vector<int64_t> bits = {kI32Min, -1, 0, 1, 2, 3, 4, 5, 7, 8, 9, 16};
  return {
      {"key_bits", bits, [](kvq_config &c, int64_t v) { c.key_bits = v; }},
      {"value_bits", bits, [](kvq_config &c, int64_t v) { c.value_bits = v; }},
      {"group_size",
       {kI32Min, -1, 0, 1, 3, 16, 32, 48, 64, 65, 128, kI32Max},
       [](kvq_config &c, int64_t v) { c.group_size = v; }},
      {"residual_length",
       {kI32Min, -1, 0, 1, 16, 32, 48, 64, 1 << 20, (1 << 20) + 1, kI32Max},
       [](kvq_config &c, int64_t v) { c.residual_length = v; }},
      {"residual_mode",
       {KVQ_RESIDUAL_SLIDING, KVQ_RESIDUAL_BLOCK},
       [](kvq_config &c, int64_t v) { c.residual_mode = v; }},
      {"n_sink_tokens",
       {kI32Min, -1, 0, 1, 5, 4096, 4097, kI32Max},
       [](kvq_config &c, int64_t v) { c.n_sink_tokens = v; }},
      {"lloyd_iters",
       {kI32Min, -1, 0, 8, 1000, 1001, kI32Max},
       [](kvq_config &c, int64_t v) { c.lloyd_iters = v; }},
      {"refit_interval",
       {kI32Min, -1, 0, 128, 1 << 20, (1 << 20) + 1, kI32Max},
       [](kvq_config &c, int64_t v) { c.refit_interval = v; }},
      {"kvquant_n_sink",
       {kI32Min, -1, 0, 1, 4096, 4097, kI32Max},
       [](kvq_config &c, int64_t v) { c.kvquant_n_sink = v; }},
      {"kvquant_group_size",
       {kI32Min, -1, 0, 1, 16, 32, 64, kI32Max},
       [](kvq_config &c, int64_t v) { c.kvquant_group_size = v; }},
      {"num_layers",
       {kI32Min, -1, 0, 1, 1024, 1025, kI32Max},
       [](kvq_config &c, int64_t v) { c.num_layers = v; }},
      {"num_kv_heads",
       {kI32Min, -1, 0, 1, 1023, 1024, 1025, kI32Max},
       [](kvq_config &c, int64_t v) { c.num_kv_heads = v; }},
      {"head_dim",
       {kI32Min, -2, 0, 1, 2, 5, 16, 48, 64, 96, 65534, 65535, 65536,
        kI32Max},
       [](kvq_config &c, int64_t v) { c.head_dim = v; }},
      {"rope_style",
       {KVQ_ROPE_NONE, KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF},
       [](kvq_config &c, int64_t v) { c.rope_style = v; }},
  };
}

/// Doubles next to the bounds: some round to the bound as f32 (so the
/// runtime, which receives the f32, judges the rounded value).
const std::vector<double> kFractions = {-0.01, -0.0, 0.0, 1e-7, 0.01,
                                        0.5,   0.99, 0.999999999, 1.0, 1.5};
const std::vector<double> kThetas = {
    -1.0,        0.5, 1.0, 1.00000001, 1.0000002, 2.0, 10000.0, 500000.0,
    1e9,         1e9 + 10, 1e9 + 100, 2e9, 1e39};

/// The grid: per method, the base (kvq_config_init with a small shape),
/// then each field's edges alone, then the pairs that constrain each other.
std::vector<std::pair<Case, std::pair<double, double>>> grid() {
  std::vector<std::pair<Case, std::pair<double, double>>> cases;
  for (int32_t method : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI,
                         KVQ_METHOD_KIVI_SINK, KVQ_METHOD_KVQUANT}) {
    kvq_config base;
    kvq_config_init(&base, static_cast<kvq_method>(method));
    base.num_layers = 2;
    base.num_kv_heads = 2;
    base.head_dim = 64;
    const double baseFraction = 0.01, baseTheta = 10000.0;
    auto add = [&](std::string name, kvq_config c, double fraction,
                   double theta) {
      c.outlier_fraction = static_cast<float>(fraction);
      c.rope_theta = static_cast<float>(theta);
      cases.push_back({{std::string(methodName(method)) + " " + name, c},
                       {fraction, theta}});
    };
    add("base", base, baseFraction, baseTheta);
    for (const FieldEdges &edges : integerFields())
      for (int64_t value : edges.values) {
        kvq_config c = base;
        edges.set(c, value);
        add(std::string(edges.field) + " = " + std::to_string(value), c,
            baseFraction, baseTheta);
      }
    for (double fraction : kFractions)
      add("outlier_fraction = " + literal(fraction), base, fraction,
          baseTheta);
    // RoPE: theta's bounds, and head_dim's parity under each style.
    for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
      for (double theta : kThetas) {
        kvq_config c = base;
        c.rope_style = style;
        add("rope theta = " + literal(theta), c, baseFraction, theta);
      }
      for (int32_t headDim : {5, 6, 63, 64, 65535}) {
        kvq_config c = base;
        c.rope_style = style;
        c.head_dim = headDim;
        c.group_size = 1;
        add("rope head_dim = " + std::to_string(headDim), c, baseFraction,
            baseTheta);
      }
    }
    // KIVI's window: residual_length against group_size in both modes.
    for (int32_t mode : {KVQ_RESIDUAL_SLIDING, KVQ_RESIDUAL_BLOCK})
      for (int32_t group : {-1, 0, 16, 32, 48})
        for (int32_t residual : {-1, 0, 16, 32, 48, 96}) {
          kvq_config c = base;
          c.residual_mode = mode;
          c.group_size = group;
          c.residual_length = residual;
          add("mode " + std::to_string(mode) + " group_size " +
                  std::to_string(group) + " residual_length " +
                  std::to_string(residual),
              c, baseFraction, baseTheta);
        }
    // Several faults at once: the first rule in the shared order wins on
    // both sides.
    kvq_config many = base;
    many.num_layers = 0;
    many.key_bits = 5;
    many.lloyd_iters = -1;
    many.group_size = 0;
    add("several faults", many, 2.0, baseTheta);
    many.rope_style = KVQ_ROPE_HALF;
    add("several faults with a bad theta", many, 2.0, 0.5);
  }
  return cases;
}

TEST(ConfigRulesAgree, DialectRejectsExactlyWhatTheRuntimeRejects) {
  MLIRContext context;
  context.loadDialect<kvq::KvqDialect>();
  int accepted = 0, rejected = 0;
  std::set<std::string> reasons;
  for (const auto &[c, floats] : grid()) {
    std::string text = cacheText(c.config, floats.first, floats.second);
    SCOPED_TRACE(c.name + "\n" + text);
    kvq_status status = kvq_config_validate(&c.config);
    std::string runtimeMessage = status == KVQ_OK ? "" : kvq_last_error();
    DialectVerdict dialect = dialectVerdict(context, text);
    EXPECT_EQ(dialect.accepted, status == KVQ_OK)
        << "runtime: " << runtimeMessage << "\ndialect: " << dialect.message;
    if (status == KVQ_OK) {
      ++accepted;
      continue;
    }
    ++rejected;
    EXPECT_EQ(dialect.message, runtimeMessage);
    EXPECT_FALSE(runtimeMessage.empty());
    reasons.insert(runtimeMessage);
  }
  std::printf("%d configurations accepted, %d rejected, %zu distinct "
              "messages\n",
              accepted, rejected, reasons.size());
  // The grid reaches both verdicts and many distinct rules (every rule of
  // kvq/config_rules.h the dialect can express has a case).
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
  EXPECT_GE(reasons.size(), 60u);
}

} // namespace
