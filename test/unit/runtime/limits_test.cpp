//===- limits_test.cpp - Absurd sizes, bounds and overflowing inputs ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Regression tests of the runtime's size and range checks: sizes whose products
// overflow int64, configuration fields beyond their documented limits and
// queries whose scores would overflow are rejected with a status and a
// message naming the problem, and a rejected update leaves the cache as it
// was. Each test fails on the code before the fix (an abort, a
// heap-buffer-overflow under ASan, a wrong OK or a NaN output).
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <climits>
#include <cstring>
#include <string>

using namespace kvqtest;

namespace {

constexpr kvq_method kMethods[] = {KVQ_METHOD_FP16, KVQ_METHOD_KIVI,
                                   KVQ_METHOD_KIVI_SINK, KVQ_METHOD_KVQUANT};

kvq_config smallConfig(kvq_method m, int heads, int dim) {
  kvq_config c = config(m, heads, dim);
  c.group_size = dim;
  c.residual_length = 4;
  if (m == KVQ_METHOD_KIVI_SINK)
    c.n_sink_tokens = 2;
  return c;
}

bool lastErrorHas(const char *word) {
  return std::string(kvq_last_error()).find(word) != std::string::npos;
}

// Update sizes: n_tokens * kv_heads * head_dim used to be formed unchecked
// (std::length_error escaped the C ABI; kivi_sink wrapped 2^62+1 tokens x 4
// channels to 4 elements and read out of bounds).
TEST(Limits, AbsurdNTokensIsInvalidAndLeavesTheCacheUnchanged) {
  const int64_t absurd[] = {int64_t{1} << 60, int64_t{1} << 61, INT64_MAX,
                            (int64_t{1} << 62) + 1, (int64_t{1} << 32) + 1};
  for (kvq_method m : kMethods)
    for (int heads : {1, 2})
      for (bool prefilled : {false, true}) {
        SCOPED_TRACE(testing::Message() << "method " << m << " heads " << heads
                                        << " prefilled " << prefilled);
        const int dim = 4;
        Cache c(smallConfig(m, heads, dim));
        KV kv = gaussianKV(7, 12, heads, dim);
        if (prefilled)
          ASSERT_EQ(append(c.h, kv, 0, 12), KVQ_OK) << kvq_last_error();
        const kvq_stats before = stats(c.h);
        const Fetched fBefore = fetch(c.h);
        for (int64_t n : absurd)
          for (kvq_dtype dt : {KVQ_DTYPE_F32, KVQ_DTYPE_F16}) {
            EXPECT_EQ(kvq_cache_update(c.h, 0, kv.k.data(), kv.v.data(), n, dt),
                      KVQ_ERR_INVALID_ARGUMENT)
                << n;
            EXPECT_TRUE(lastErrorHas("n_tokens")) << kvq_last_error();
          }
        EXPECT_TRUE(sameStats(before, stats(c.h)));
        const Fetched fAfter = fetch(c.h);
        EXPECT_EQ(fBefore.kh, fAfter.kh);
        EXPECT_EQ(fBefore.vh, fAfter.vh);
        // And the cache still works.
        EXPECT_EQ(append(c.h, kv, 0, 1), KVQ_OK) << kvq_last_error();
      }
}

// Kernel shapes: rows * cols of the stateless kernels was unchecked.
TEST(Limits, StatelessKernelsRejectHugeShapes) {
  const int64_t rows = (int64_t{1} << 62) + 1, cols = 4;
  float x[64] = {};
  uint8_t codes[64] = {}, mask[64] = {};
  uint16_t scale[64] = {}, zero[64] = {}, levels[256] = {};
  float out[64], thr[64] = {}, scratch[64];
  auto expectInvalid = [](kvq_status s, const char *what) {
    EXPECT_EQ(s, KVQ_ERR_INVALID_ARGUMENT) << what;
    EXPECT_TRUE(lastErrorHas("2^48")) << what << ": " << kvq_last_error();
  };
  for (kvq_axis axis : {KVQ_AXIS_PER_TOKEN, KVQ_AXIS_PER_CHANNEL}) {
    const int32_t group = axis == KVQ_AXIS_PER_TOKEN ? 4 : 1;
    expectInvalid(kvq_group_quant(x, KVQ_DTYPE_F32, rows, cols, axis, group, 2,
                                  nullptr, KVQ_CODES_PACKED, codes, scale,
                                  zero),
                  "group_quant");
    expectInvalid(kvq_group_dequant(codes, KVQ_CODES_UNPACKED, scale, zero,
                                    rows, cols, axis, group, 2, out,
                                    KVQ_DTYPE_F32),
                  "group_dequant");
    expectInvalid(kvq_nuq_fit(x, KVQ_DTYPE_F32, rows, cols, axis, group, 2, 8,
                              nullptr, scratch, 64, levels),
                  "nuq_fit");
    expectInvalid(kvq_nuq_quant(x, KVQ_DTYPE_F32, rows, cols, axis, group, 2,
                                levels, KVQ_CODES_UNPACKED, codes),
                  "nuq_quant");
    expectInvalid(kvq_nuq_dequant(codes, KVQ_CODES_UNPACKED, levels, rows, cols,
                                  axis, group, 2, out, KVQ_DTYPE_F32),
                  "nuq_dequant");
    expectInvalid(kvq_outlier_split(x, KVQ_DTYPE_F32, rows, cols, axis, group,
                                    0.1f, nullptr, mask, thr),
                  "outlier_split");
  }
  expectInvalid(kvq_outlier_screen(x, KVQ_DTYPE_F32, rows, cols, thr, mask),
                "outlier_screen");
  expectInvalid(kvq_key_norm(x, KVQ_DTYPE_F32, rows, 1, 4, out), "key_norm");
  expectInvalid(kvq_key_norm(x, KVQ_DTYPE_F16, INT64_MAX, 2, 2, out),
                "key_norm");
  int64_t pos[4];
  expectInvalid(kvq_sink_select(thr, rows, 1, pos), "sink_select");
}

TEST(Limits, PackedSizeDoesNotOverflow) {
  for (int bits : {1, 2, 3, 4, 5, 7, 8}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8},
                      int64_t{1000003}, INT64_MAX - 9, INT64_MAX}) {
      const __int128 want = (static_cast<__int128>(n) * bits + 7) / 8;
      EXPECT_EQ(static_cast<__int128>(kvq_packed_size(n, bits)), want)
          << n << " x " << bits;
    }
  }
  EXPECT_EQ(kvq_packed_size(INT64_MAX, 8), INT64_MAX);
  EXPECT_EQ(kvq_packed_size(-1, 8), 0);
}

// Query magnitude: a finite query of 1e36 overflowed the scores; attend returned
// OK with NaN output (UBSan: NaN converted to int in the exp).
TEST(Limits, HugeQueriesAreRejectedAndBoundedOnesGiveFiniteOutput) {
  for (kvq_method m : kMethods) {
    SCOPED_TRACE(testing::Message() << "method " << m);
    const int heads = 2, dim = 8;
    Cache c(smallConfig(m, heads, dim));
    KV kv = gaussianKV(11, 24, heads, dim);
    // A key of the largest fp16 magnitude makes the scores as large as
    // they get.
    kv.k[5] = 65504.0f;
    ASSERT_EQ(append(c.h, kv, 0, 24), KVQ_OK) << kvq_last_error();
    const int qHeads = 4;
    std::vector<float> q(static_cast<size_t>(2 * qHeads * dim), 0.5f);
    std::vector<float> out(q.size(), 42.0f);
    for (float big : {1e36f, -1e36f, 3e38f, 1.9e19f}) {
      q[3] = big;
      EXPECT_EQ(kvq_cache_attend(c.h, 0, q.data(), 2, qHeads, out.data()),
                KVQ_ERR_INVALID_ARGUMENT)
          << big;
      EXPECT_TRUE(lastErrorHas("query element 3")) << kvq_last_error();
      for (float o : out)
        ASSERT_EQ(o, 42.0f); // untouched on failure
    }
    // Every element at the bound (2^64) is accepted, and the output is
    // finite.
    for (float &e : q)
      e = 1.8e19f;
    q[1] = -1.8e19f;
    ASSERT_EQ(kvq_cache_attend(c.h, 0, q.data(), 2, qHeads, out.data()), KVQ_OK)
        << kvq_last_error();
    for (float o : out)
      EXPECT_TRUE(std::isfinite(o)) << o;
  }
}

// No entry point returns OK with a non-finite output: the quantization of
// a group spanning [-65504, 65504] dequantizes its top code to 65536, which
// is Inf in fp16 (it was returned with KVQ_OK).
TEST(Limits, Fp16OutputBeyondTheFp16RangeIsAStatus) {
  float x[4] = {65504.0f, -65504.0f, 0.0f, 1.0f};
  uint8_t codes[4];
  uint16_t scale, zero, out[4] = {1, 2, 3, 4};
  ASSERT_EQ(kvq_group_quant(x, KVQ_DTYPE_F32, 1, 4, KVQ_AXIS_PER_TOKEN, 4, 2,
                            nullptr, KVQ_CODES_UNPACKED, codes, &scale, &zero),
            KVQ_OK);
  EXPECT_EQ(kvq_group_dequant(codes, KVQ_CODES_UNPACKED, &scale, &zero, 1, 4,
                              KVQ_AXIS_PER_TOKEN, 4, 2, out, KVQ_DTYPE_F16),
            KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(lastErrorHas("fp16 range")) << kvq_last_error();
  EXPECT_EQ(out[0], 1); // nothing written
  float outF[4];
  ASSERT_EQ(kvq_group_dequant(codes, KVQ_CODES_UNPACKED, &scale, &zero, 1, 4,
                              KVQ_AXIS_PER_TOKEN, 4, 2, outF, KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_EQ(outF[0], 65536.0f);
  // Without the extreme code, fp16 output is fine.
  codes[0] = 2;
  EXPECT_EQ(kvq_group_dequant(codes, KVQ_CODES_UNPACKED, &scale, &zero, 1, 4,
                              KVQ_AXIS_PER_TOKEN, 4, 2, out, KVQ_DTYPE_F16),
            KVQ_OK)
      << kvq_last_error();

  // The same through a KIVI cache: fetch as fp16 refuses, as f32 works.
  kvq_config c = smallConfig(KVQ_METHOD_KIVI, 1, 4);
  c.residual_length = 0;
  Cache cache(c);
  std::vector<float> k(16, 0.5f), v(16, 0.5f);
  k[0] = 65504.0f;
  k[4] = -65504.0f; // channel 0 spans the fp16 range over the group
  ASSERT_EQ(kvq_cache_update(cache.h, 0, k.data(), v.data(), 4, KVQ_DTYPE_F32),
            KVQ_OK);
  std::vector<uint16_t> kh(16, 7), vh(16, 7);
  EXPECT_EQ(kvq_cache_fetch(cache.h, 0, kh.data(), vh.data(), 4, KVQ_DTYPE_F16),
            KVQ_ERR_NON_FINITE);
  EXPECT_TRUE(lastErrorHas("fp16 range")) << kvq_last_error();
  EXPECT_EQ(kh[0], 7);
  std::vector<float> kf(16), vf(16);
  EXPECT_EQ(kvq_cache_fetch(cache.h, 0, kf.data(), vf.data(), 4, KVQ_DTYPE_F32),
            KVQ_OK);
  for (float e : kf)
    EXPECT_TRUE(std::isfinite(e));
}

// Configuration bounds: every field has an upper limit.
TEST(Limits, ConfigurationFieldsHaveUpperBounds) {
  struct Case {
    kvq_method method;
    void (*set)(kvq_config &, bool over);
    const char *field;
  };
  const Case cases[] = {
      {KVQ_METHOD_FP16,
       [](kvq_config &c, bool o) { c.num_layers = o ? INT32_MAX : 1024; },
       "num_layers"},
      {KVQ_METHOD_KIVI,
       [](kvq_config &c, bool o) { c.num_layers = o ? 1025 : 1024; },
       "num_layers"},
      {KVQ_METHOD_FP16,
       [](kvq_config &c, bool o) {
         c.num_kv_heads = o ? 1025 : 1024;
         c.head_dim = 1;
       },
       "num_kv_heads"},
      {KVQ_METHOD_KVQUANT,
       [](kvq_config &c, bool o) { c.head_dim = o ? 65536 : 65535; },
       "head_dim"},
      {KVQ_METHOD_KVQUANT,
       [](kvq_config &c, bool o) { c.lloyd_iters = o ? INT32_MAX : 1000; },
       "lloyd_iters"},
      {KVQ_METHOD_KVQUANT,
       [](kvq_config &c, bool o) { c.lloyd_iters = o ? 1001 : 1000; },
       "lloyd_iters"},
      {KVQ_METHOD_KVQUANT,
       [](kvq_config &c, bool o) {
         c.refit_interval = o ? (1 << 20) + 1 : 1 << 20;
       },
       "refit_interval"},
      {KVQ_METHOD_KVQUANT,
       [](kvq_config &c, bool o) { c.kvquant_n_sink = o ? 4097 : 4096; },
       "kvquant_n_sink"},
      {KVQ_METHOD_KIVI,
       [](kvq_config &c, bool o) {
         c.residual_length = o ? (1 << 20) + 1 : 1 << 20;
       },
       "residual_length"},
      {KVQ_METHOD_KIVI_SINK,
       [](kvq_config &c, bool o) { c.n_sink_tokens = o ? INT32_MAX : 4096; },
       "n_sink_tokens"},
      {KVQ_METHOD_KIVI_SINK,
       [](kvq_config &c, bool o) { c.n_sink_tokens = o ? 4097 : 4096; },
       "n_sink_tokens"},
  };
  for (const Case &cs : cases) {
    SCOPED_TRACE(cs.field);
    kvq_config c;
    kvq_config_init(&c, cs.method);
    cs.set(c, false);
    EXPECT_EQ(kvq_config_validate(&c), KVQ_OK) << kvq_last_error();
    cs.set(c, true);
    EXPECT_EQ(kvq_config_validate(&c), KVQ_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(lastErrorHas(cs.field)) << kvq_last_error();
    kvq_cache_t *h = nullptr;
    EXPECT_EQ(kvq_cache_create(&c, &h), KVQ_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(h, nullptr);
    EXPECT_TRUE(lastErrorHas(cs.field)) << kvq_last_error();
  }
  // The flat constructor of compiled graphs goes through the same checks.
  kvq_cache_t *h = nullptr;
  EXPECT_EQ(kvq_cache_create_flat(KVQ_METHOD_KVQUANT, 3, 3, 32, 32, 0, 0, 0.01f,
                                  INT32_MAX, 128, 1, 32, 1, 1, 128,
                                  KVQ_BACKEND_CPU, KVQ_ROPE_NONE, 10000.0f, &h),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("lloyd_iters")) << kvq_last_error();
}

TEST(Limits, KernelAndAttendArgumentsHaveUpperBounds) {
  float x[32] = {}, scratch[32];
  uint16_t levels[8 * 4];
  EXPECT_EQ(kvq_nuq_fit(x, KVQ_DTYPE_F32, 4, 8, KVQ_AXIS_PER_TOKEN, 8, 2, 1001,
                        nullptr, scratch, 32, levels),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("lloyd iterations")) << kvq_last_error();
  EXPECT_EQ(kvq_nuq_fit(x, KVQ_DTYPE_F32, 4, 8, KVQ_AXIS_PER_TOKEN, 8, 2, 1000,
                        nullptr, scratch, 32, levels),
            KVQ_OK);

  Cache c(smallConfig(KVQ_METHOD_KIVI, 1, 4));
  KV kv = gaussianKV(3, 4, 1, 4);
  ASSERT_EQ(append(c.h, kv, 0, 4), KVQ_OK);
  std::vector<float> q(4 * 4097, 0.0f), out(q.size());
  EXPECT_EQ(kvq_cache_attend(c.h, 0, q.data(), 1, 4097, out.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("q_heads")) << kvq_last_error();
  EXPECT_EQ(kvq_cache_attend(c.h, 0, q.data(), 1, INT32_MAX, out.data()),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvq_cache_attend(c.h, 0, q.data(), 1, 4096, out.data()), KVQ_OK)
      << kvq_last_error();
}

} // namespace
