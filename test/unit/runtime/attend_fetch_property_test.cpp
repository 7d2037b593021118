//===- attend_fetch_property_test.cpp - attend == attention over fetch ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Property: for every method, kvq_cache_attend equals
// causal attention computed here in float64 over the K/V that
// kvq_cache_fetch returns, over a sweep of shapes chosen to hit packing
// corner cases: odd head_dim (3, 5, 6, 10, where a head's codes start inside
// a byte for some bit widths) next to 16 (the SIMD row kernels), every bit
// width, 1..3 KV heads, 1 or 2 query heads per KV head, prefill/decode
// splits, decode (1 query) and prefill-like (several queries) calls, and
// pre-RoPE key caches of both RoPE styles (fetch returns the rotated
// keys, attend must rotate the same way).
//
// Tolerance: fetch returns exactly the fp16 values attend reads (levels,
// codes, outliers, fp16 rows), so the only difference is arithmetic: attend
// sums scores in float (relative error ~ d * 2^-24 of sum |q_c k_c|), and
// uses a few-ulp float exp and float accumulators. With N(0,1) data,
// head_dim <= 16 and <= 48 tokens, |score| < ~30 and the output is a convex
// combination of values |v| < ~6, so the error is below ~1e-5; 1e-4 * (1 +
// max |v|) leaves margin while the bug it guards against (value codes read
// from the wrong bit offset) gave errors up to ~1.1.
//
// Run twice by ctest: with the active kernel table (AVX2 / AVX-512 / NEON)
// and with KVQ_KERNELS=reference.
//
//===----------------------------------------------------------------------===//
#include "reference_attention.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace kvqtest;
using kvq::reference::attention64;

namespace {

struct Shape {
  kvq_method method;
  int bits, d, heads, qPerKv;
  int64_t prefill;
  int32_t rope = KVQ_ROPE_NONE;
};

/// Max |attend - attention64(fetch)| / (1 + max|v|) over the checks of one
/// configuration: after the prefill (all prefill positions as queries) and
/// after decoding the rest (1 query, then 4).
double worstError(const Shape &s) {
  const int64_t tokens = 40;
  kvq_config cfg = config(s.method, s.heads, s.d);
  cfg.key_bits = cfg.value_bits = s.bits;
  cfg.group_size = s.d % 2 == 0 && s.d > 8 ? s.d / 2 : s.d;
  cfg.residual_length = 4;
  cfg.rope_style = s.rope;
  cfg.rope_theta = s.rope == KVQ_ROPE_HALF ? 500.0f : 10000.0f;
  if (s.method == KVQ_METHOD_KIVI_SINK)
    cfg.n_sink_tokens = 2;
  if (s.method == KVQ_METHOD_KVQUANT) {
    // Frozen and refit modes (every prefill split is odd, so not by it).
    cfg.refit_interval = (s.d + s.heads + s.qPerKv) % 2 ? 0 : 8;
    cfg.outlier_fraction = 0.05f;
  }
  Cache c(cfg);
  if (!c.h)
    return INFINITY;
  const KV kv =
      laplaceKV(1000 + s.d * 7 + s.bits * 3 + s.heads, tokens, s.heads, s.d);
  const int qHeads = s.heads * s.qPerKv;
  Rng rng(99 + s.d);
  double worst = 0.0;
  auto check = [&](int64_t nQueries) {
    const Fetched f = fetch(c.h);
    const int64_t length = static_cast<int64_t>(f.k.size()) / (s.heads * s.d);
    std::vector<float> q(static_cast<size_t>(nQueries * qHeads * s.d));
    for (float &e : q)
      e = static_cast<float>(rng.normal());
    std::vector<float> out(q.size());
    EXPECT_EQ(kvq_cache_attend(c.h, 0, q.data(), nQueries, qHeads, out.data()),
              KVQ_OK)
        << kvq_last_error();
    const std::vector<double> want =
        attention64(f.k, f.v, length, s.heads, s.d, q, nQueries, qHeads);
    double vmax = 0.0;
    for (float v : f.v)
      vmax = std::max(vmax, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < out.size(); ++i)
      worst = std::max(worst, std::fabs(out[i] - want[i]) / (1.0 + vmax));
  };
  if (append(c.h, kv, 0, s.prefill) != KVQ_OK) {
    ADD_FAILURE() << kvq_last_error();
    return INFINITY;
  }
  check(s.prefill);
  for (int64_t t = s.prefill; t < tokens; ++t)
    EXPECT_EQ(append(c.h, kv, t, t + 1), KVQ_OK) << kvq_last_error();
  check(1);
  check(4);
  return worst;
}

TEST(AttendFetchProperty, AttendEqualsFloat64AttentionOverFetch) {
  constexpr double kTolerance = 1e-4;
  int configs = 0, failures = 0;
  double worstSeen = 0.0;
  for (kvq_method m : {KVQ_METHOD_FP16, KVQ_METHOD_KIVI, KVQ_METHOD_KIVI_SINK,
                       KVQ_METHOD_KVQUANT})
    for (int bits : {2, 3, 4, 8}) {
      if (m == KVQ_METHOD_FP16 && bits != 2)
        continue; // bits are unused
      for (int d : {3, 5, 6, 10, 16})
        for (int heads = 1; heads <= 3; ++heads)
          for (int qPerKv : {1, 2})
            for (int32_t rope :
                 {KVQ_ROPE_NONE, KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
              if (rope != KVQ_ROPE_NONE && d % 2 != 0)
                continue; // RoPE pairs channels
              // Prefill splits vary with the shape so that every split meets
              // every width: 1 token, one below / above the residual, most.
              const int64_t splits[] = {1, 7, 13, 33};
              const int64_t prefill = splits[(d + heads + qPerKv + bits) % 4];
              const Shape s{m, bits, d, heads, qPerKv, prefill, rope};
              const double e = worstError(s);
              ++configs;
              worstSeen = std::max(worstSeen, e);
              if (!(e <= kTolerance)) {
                ++failures;
                ADD_FAILURE() << "method " << m << " bits " << bits << " d "
                              << d << " kv_heads " << heads << " q/kv "
                              << qPerKv << " prefill " << prefill << " rope "
                              << rope << ": error " << e;
              }
            }
    }
  std::printf("attend vs float64 attention over fetch: %d configurations, "
              "%d over %g, worst %.3g\n",
              configs, failures, kTolerance, worstSeen);
}

} // namespace
