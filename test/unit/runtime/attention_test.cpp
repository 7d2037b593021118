//===- attention_test.cpp - Fused attention against the reference ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_cache_attend (fused: packed codes, folded scales, chunked online
// softmax in float) against kvq::cacheAttend(Reference) (row-by-row
// dequantization, double accumulators, exact exp) on the same caches: every
// method, residual and sink rows, GQA, one query step and a batch of steps.
// Tolerance: |fused - reference| <= 2e-5 * (1 + max |V|) per output element;
// the float accumulation over a few hundred tokens and the polynomial exp
// (a few ulp) stay an order of magnitude below that.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

using namespace kvqtest;

namespace {

struct AttendCase {
  const char *name;
  kvq_method method;
  int bits;
  int heads, dim;
  int group = 0; ///< KIVI group_size (0: the default)
};

const AttendCase kCases[] = {
    {"fp16", KVQ_METHOD_FP16, 16, 2, 64},
    {"kivi2", KVQ_METHOD_KIVI, 2, 2, 64},
    {"kivi4", KVQ_METHOD_KIVI, 4, 2, 128},
    {"kivi3", KVQ_METHOD_KIVI, 3, 1, 32},
    {"kivi8", KVQ_METHOD_KIVI, 8, 2, 64},
    {"kivi_sink2", KVQ_METHOD_KIVI_SINK, 2, 2, 64},
    {"kvquant3", KVQ_METHOD_KVQUANT, 3, 2, 64},
    {"kvquant2", KVQ_METHOD_KVQUANT, 2, 1, 128},
    {"kvquant4", KVQ_METHOD_KVQUANT, 4, 2, 64},
    // 8 heads of 2 value groups: AVX-512's fused group weights cover the
    // shape, and take the calls with one query vector per KV head only.
    {"kivi2_h8", KVQ_METHOD_KIVI, 2, 8, 64},
    // Shapes the SIMD kernels do not cover, so the cache's selected ops
    // (selectAttendOps) mix SIMD and reference entries: head_dim not a
    // multiple of 16 (40, 24) or of 8 (12), 3-bit rows of 36 bits, odd
    // groups (3, 5) and groups of 8k that are no power of two (24).
    {"kivi3_d12_g3", KVQ_METHOD_KIVI, 3, 2, 12, 3},
    {"kivi2_d40_g5", KVQ_METHOD_KIVI, 2, 2, 40, 5},
    {"kivi4_d48_g24", KVQ_METHOD_KIVI, 4, 2, 48, 24},
    {"kivi8_d24_g8", KVQ_METHOD_KIVI, 8, 2, 24, 8},
    {"kvquant3_d24", KVQ_METHOD_KVQUANT, 3, 2, 24},
    {"fp16_d24", KVQ_METHOD_FP16, 16, 2, 24},
};

kvq_config caseConfig(const AttendCase &c) {
  kvq_config cfg = config(c.method, c.heads, c.dim);
  if (c.method != KVQ_METHOD_FP16) {
    cfg.key_bits = c.bits;
    cfg.value_bits = c.bits;
  }
  if (c.group)
    cfg.group_size = c.group;
  return cfg;
}

std::vector<float> queries(uint64_t seed, int64_t n) {
  Rng rng(seed);
  std::vector<float> q(static_cast<size_t>(n));
  for (float &v : q)
    v = static_cast<float>(2.0 * rng.normal()); // peaky enough softmax
  return q;
}

void expectClose(const std::vector<float> &a, const std::vector<float> &b,
                 double bound, const std::string &what) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  EXPECT_LE(worst, bound) << what;
}

} // namespace

TEST(FusedAttention, MatchesTheReferenceForEveryMethod) {
  for (const AttendCase &c : kCases)
    for (int qPerKv : {1, 4})
      for (int64_t nQueries : {1, 3}) {
        kvq_config cfg = caseConfig(c);
        Cache cache(cfg);
        // 600 tokens: several softmax chunks, quantized groups, the fp16
        // window, sinks (kivi_sink, kvquant), decode steps after a prefill.
        KV kv = gaussianKV(11 + c.bits, 600, c.heads, c.dim);
        feed(cache.h, kv, 560);
        const int32_t qHeads = c.heads * qPerKv;
        const int64_t n = nQueries * qHeads * c.dim;
        auto q = queries(99 + qPerKv, n);
        std::vector<float> fused(static_cast<size_t>(n)), ref(fused.size());
        ASSERT_EQ(kvq_cache_attend(cache.h, 0, q.data(), nQueries, qHeads,
                                   fused.data()),
                  KVQ_OK)
            << kvq_last_error();
        ASSERT_EQ(kvq::cacheAttend(cache.h, 0, q.data(), nQueries, qHeads,
                                   ref.data(), kvq::AttendImpl::Reference),
                  KVQ_OK);
        float vmax = 0;
        for (float v : kv.v)
          vmax = std::max(vmax, std::fabs(v));
        expectClose(fused, ref, 2e-5 * (1 + vmax),
                    std::string(c.name) + " q_per_kv " +
                        std::to_string(qPerKv) + " queries " +
                        std::to_string(nQueries));
      }
}

TEST(FusedAttention, BatchOfStepsIsCausal) {
  // On an fp16 cache, query i of a batch over L tokens sees exactly the
  // first L - n + i + 1 tokens: the same as a single step on that prefix.
  kvq_config cfg = config(KVQ_METHOD_FP16, 2, 64);
  KV kv = gaussianKV(5, 300, 2, 64);
  const int64_t nQueries = 4;
  const int32_t qHeads = 4;
  const int64_t per = qHeads * 64;
  auto q = queries(3, nQueries * per);
  Cache full(cfg);
  feed(full.h, kv, 300);
  std::vector<float> batch(static_cast<size_t>(nQueries * per));
  ASSERT_EQ(
      kvq_cache_attend(full.h, 0, q.data(), nQueries, qHeads, batch.data()),
      KVQ_OK);
  for (int64_t i = 0; i < nQueries; ++i) {
    Cache prefix(cfg);
    ASSERT_EQ(append(prefix.h, kv, 0, 300 - nQueries + i + 1), KVQ_OK);
    std::vector<float> one(static_cast<size_t>(per));
    ASSERT_EQ(kvq_cache_attend(prefix.h, 0, q.data() + i * per, 1, qHeads,
                               one.data()),
              KVQ_OK);
    std::vector<float> slice(batch.begin() + i * per,
                             batch.begin() + (i + 1) * per);
    expectClose(slice, one, 1e-6, "query " + std::to_string(i));
  }
}

TEST(FusedAttention, SingleTokenReturnsItsValueRow) {
  // softmax over one position is 1: the output is that value row, exactly
  // as stored (fp16 window).
  kvq_config cfg = config(KVQ_METHOD_KIVI, 2, 64);
  KV kv = gaussianKV(8, 1, 2, 64);
  Cache cache(cfg);
  feed(cache.h, kv, 1);
  auto q = queries(1, 4 * 64);
  std::vector<float> out(4 * 64);
  ASSERT_EQ(kvq_cache_attend(cache.h, 0, q.data(), 1, 4, out.data()), KVQ_OK);
  for (int h = 0; h < 4; ++h)
    for (int d = 0; d < 64; ++d)
      EXPECT_EQ(out[static_cast<size_t>(h * 64 + d)],
                kv.v[static_cast<size_t>((h / 2) * 64 + d)]);
}
