//===- fp16_pack_test.cpp - fp16 conversion and code packing --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The runtime's integer fp16 conversion against an independent reference,
// and the packed code layout (LSB-first bit stream) for 2/3/4/8 bits.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

using namespace kvqtest;

namespace {

/// fp16 round trip through the public API: an fp16 cache stores inputs as
/// fp16 and fetches them as f32 / f16.
std::vector<uint16_t> roundTripF32(const std::vector<float> &in) {
  kvq_config c = config(KVQ_METHOD_FP16, 1, static_cast<int>(in.size()));
  Cache cache(c);
  EXPECT_EQ(
      kvq_cache_update(cache.h, 0, in.data(), in.data(), 1, KVQ_DTYPE_F32),
      KVQ_OK)
      << kvq_last_error();
  std::vector<uint16_t> k(in.size()), v(in.size());
  EXPECT_EQ(kvq_cache_fetch(cache.h, 0, k.data(), v.data(), 1, KVQ_DTYPE_F16),
            KVQ_OK);
  return k;
}

} // namespace

TEST(Fp16, RoundsToNearestEvenLikeReference) {
  Rng rng(7);
  std::vector<float> in;
  // Random magnitudes across the whole fp16 range, plus halfway cases.
  for (int i = 0; i < 4000; ++i)
    in.push_back(static_cast<float>(
        rng.uniform(-1, 1) *
        std::ldexp(1.0, static_cast<int>(rng.uniform() * 40) - 24)));
  for (uint16_t h : {0x3c00, 0x3c01, 0x0001, 0x03ff, 0x0400, 0x7bfe}) {
    // Exactly halfway between h and h + 1: ties to even.
    float lo = fromHalf(h), hi = fromHalf(static_cast<uint16_t>(h + 1));
    in.push_back(0.5f * (lo + hi));
    in.push_back(-0.5f * (lo + hi));
  }
  in.push_back(65519.0f); // rounds down to 65504
  in.push_back(0.0f);
  in.push_back(-0.0f);
  std::vector<uint16_t> got = roundTripF32(in);
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(got[i], toHalf(in[i])) << "input " << in[i];
#if defined(__FLT16_MANT_DIG__) && defined(__clang__) && defined(__x86_64__)
  // Cross-check with the compiler's binary16 where it exists.
  for (size_t i = 0; i < in.size(); ++i) {
    _Float16 h = static_cast<_Float16>(in[i]);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(got[i], bits) << "input " << in[i];
  }
#endif
}

TEST(Fp16, EveryFiniteHalfRoundTripsExactly) {
  std::vector<float> in;
  for (uint32_t h = 0; h < 0x10000; ++h)
    if (((h >> 10) & 0x1f) != 0x1f)
      in.push_back(fromHalf(static_cast<uint16_t>(h)));
  std::vector<uint16_t> got = roundTripF32(in);
  size_t j = 0;
  for (uint32_t h = 0; h < 0x10000; ++h)
    if (((h >> 10) & 0x1f) != 0x1f)
      ASSERT_EQ(got[j++], h);
}

TEST(Fp16, ValuesBeyondFp16RangeAreRejected) {
  std::vector<float> in = {1.0f, 65520.0f};
  kvq_config c = config(KVQ_METHOD_FP16, 1, 2);
  Cache cache(c);
  EXPECT_EQ(
      kvq_cache_update(cache.h, 0, in.data(), in.data(), 1, KVQ_DTYPE_F32),
      KVQ_ERR_NON_FINITE);
  EXPECT_NE(std::string(kvq_last_error()).find("fp16"), std::string::npos);
}

TEST(Packing, PackedSizeIsDense) {
  EXPECT_EQ(kvq_packed_size(8, 3), 3);
  EXPECT_EQ(kvq_packed_size(4, 2), 1);
  EXPECT_EQ(kvq_packed_size(2, 4), 1);
  EXPECT_EQ(kvq_packed_size(5, 8), 5);
  EXPECT_EQ(kvq_packed_size(9, 3), 4);
  EXPECT_EQ(kvq_packed_size(0, 3), 0);
}

class PackingRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(PackingRoundTrip, CodesSurviveAndFollowTheBitStreamLayout) {
  const int bits = GetParam();
  const int64_t rows = 8, cols = 24; // 192 codes, not a multiple of 8/bits
  Rng rng(bits);
  std::vector<float> x(rows * cols);
  for (float &f : x)
    f = fromHalf(toHalf(static_cast<float>(rng.normal())));
  std::vector<uint8_t> unpacked(rows * cols);
  std::vector<uint8_t> packed(kvq_packed_size(rows * cols, bits));
  std::vector<uint16_t> s1(rows * cols / 8), z1(s1.size()), s2(s1.size()),
      z2(s1.size());
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, rows, cols,
                            KVQ_AXIS_PER_TOKEN, 8, bits, nullptr,
                            KVQ_CODES_UNPACKED, unpacked.data(), s1.data(),
                            z1.data()),
            KVQ_OK);
  ASSERT_EQ(kvq_group_quant(x.data(), KVQ_DTYPE_F32, rows, cols,
                            KVQ_AXIS_PER_TOKEN, 8, bits, nullptr,
                            KVQ_CODES_PACKED, packed.data(), s2.data(),
                            z2.data()),
            KVQ_OK);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(z1, z2);
  // The documented layout: element i at bits [i*b, i*b+b), LSB first.
  for (int64_t i = 0; i < rows * cols; ++i) {
    uint32_t code = 0;
    for (int j = 0; j < bits; ++j) {
      int64_t bit = i * bits + j;
      code |= ((packed[bit / 8] >> (bit % 8)) & 1u) << j;
    }
    ASSERT_EQ(code, unpacked[i]) << "element " << i;
  }
  // Dequantizing either layout gives the same values.
  std::vector<float> a(rows * cols), b(rows * cols);
  ASSERT_EQ(kvq_group_dequant(unpacked.data(), KVQ_CODES_UNPACKED, s1.data(),
                              z1.data(), rows, cols, KVQ_AXIS_PER_TOKEN, 8,
                              bits, a.data(), KVQ_DTYPE_F32),
            KVQ_OK);
  ASSERT_EQ(kvq_group_dequant(packed.data(), KVQ_CODES_PACKED, s2.data(),
                              z2.data(), rows, cols, KVQ_AXIS_PER_TOKEN, 8,
                              bits, b.data(), KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_EQ(a, b);
  // Codes use the whole range (min and max of each group hit 0 and 2^b-1).
  uint8_t maxCode = 0;
  for (uint8_t c : unpacked)
    maxCode = c > maxCode ? c : maxCode;
  EXPECT_EQ(maxCode, (1 << bits) - 1);
}

INSTANTIATE_TEST_SUITE_P(Bits, PackingRoundTrip, ::testing::Values(2, 3, 4, 8));
