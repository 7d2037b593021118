//===- CacheReport.cpp - kvq-run: a compiled model's cache ----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/CacheReport.h"

#include "json_number.h"

#include <algorithm>
#include <cstdio>

namespace kvq::run {

namespace {

/// `x` as "%.*g" prints it (the spelling of pass options).
std::string gNumber(double x, int digits = 6) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, x);
  return buf;
}

} // namespace

std::string describeCache(const CacheSummary &c) {
  std::string s = "method=" + c.method;
  auto add = [&](const char *key, const std::string &value) {
    s += std::string(" ") + key + "=" + value;
  };
  if (c.method == "none") {
    add("element-type", c.elementType);
    return s;
  }
  add("key-bits", std::to_string(c.keyBits));
  add("value-bits", std::to_string(c.valueBits));
  if (c.method == "kivi" || c.method == "kivi_sink") {
    add("group-size", std::to_string(c.groupSize));
    add("residual-length", std::to_string(c.residualLength));
    add("residual-mode", c.residualMode);
  }
  if (c.method == "kivi_sink")
    add("sinks", std::to_string(c.sinks));
  if (c.method == "kvquant") {
    add("outlier-fraction", gNumber(c.outlierFraction));
    add("lloyd-iters", std::to_string(c.lloydIters));
    add("refit-interval", std::to_string(c.refitInterval));
    add("kvquant-sinks", std::to_string(c.kvquantSinks));
  }
  add("pre-rope", c.preRope ? "true" : "false");
  if (c.preRope)
    add("rope-style", c.ropeStyle);
  return s;
}

cli::Json methodCacheJson(const MethodCache &m) {
  cli::Json row;
  row["method"] = m.spec.label;
  row["pass_options"] = m.options;
  row["cache"] = cacheJson(m.cache);
  row["effective_bits"] = cli::fixed(m.effectiveBits, 4);
  row["cache_bytes"] = m.cacheBytes;
  return row;
}

cli::Json cacheJson(const CacheSummary &c) {
  cli::Json j;
  j["method"] = c.method;
  j["element_type"] = c.elementType;
  if (c.method != "none") {
    j["key_bits"] = c.keyBits;
    j["value_bits"] = c.valueBits;
    if (c.method == "kivi" || c.method == "kivi_sink") {
      j["group_size"] = c.groupSize;
      j["residual_length"] = c.residualLength;
      j["residual_mode"] = c.residualMode;
    }
    if (c.method == "kivi_sink")
      j["sinks"] = c.sinks;
    if (c.method == "kvquant") {
      j["outlier_fraction"] = cli::significant(c.outlierFraction, 6);
      j["lloyd_iters"] = c.lloydIters;
      j["refit_interval"] = c.refitInterval;
      j["kvquant_sinks"] = c.kvquantSinks;
    }
    j["pre_rope"] = c.preRope;
    if (c.preRope) {
      j["rope_style"] = c.ropeStyle;
      j["rope_theta"] = cli::significant(c.ropeTheta, 6);
    }
  }
  return j;
}

void cacheSize(const CompiledModel &model, const model::Llama2cConfig &config,
               int64_t bytes, int64_t fp16, int64_t sequences,
               double *effectiveBits, int64_t *cacheBytes) {
  if (model.quantized()) {
    *effectiveBits = fp16 > 0 ? 16.0 * double(bytes) / double(fp16) : 16.0;
    *cacheBytes = bytes / std::max<int64_t>(sequences, 1);
    return;
  }
  const int64_t element = model.cacheSummary().elementType == "f16" ? 2 : 4;
  *effectiveBits = 8.0 * double(element);
  *cacheBytes =
      int64_t(config.layers) * config.seqLen * config.kvDim() * 2 * element;
}

} // namespace kvq::run
