//===- table_checks_test.cpp - Non-finite tables, negative norms ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every table a caller hands the stateless kernels is checked before use:
// an infinite or NaN fp16 entry in any position of a scale, zero point or
// level table is KVQ_ERR_NON_FINITE, and a negative key norm is
// KVQ_ERR_INVALID_ARGUMENT, with the outputs untouched. The CPU-vs-Metal
// comparisons call the same validators, so only these tests can catch a
// check that goes missing.
//
//===----------------------------------------------------------------------===//
#include "test_util.h"

#include <algorithm>
#include <cstring>
#include <string>

using namespace kvqtest;

namespace {

/// +inf, -inf, quiet NaN, signalling NaN, negative NaN (fp16 bit patterns).
const uint16_t kNonFinite[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00};

constexpr int64_t kRows = 8, kCols = 8;
constexpr int32_t kGroup = 4;

bool oneLine(const char *msg) {
  return std::strlen(msg) > 0 && std::strchr(msg, '\n') == nullptr;
}

struct DequantCase {
  kvq_axis axis;
  kvq_code_layout layout;
  kvq_dtype dtype;
};

const DequantCase kDequantCases[] = {
    {KVQ_AXIS_PER_TOKEN, KVQ_CODES_UNPACKED, KVQ_DTYPE_F32},
    {KVQ_AXIS_PER_TOKEN, KVQ_CODES_PACKED, KVQ_DTYPE_F16},
    {KVQ_AXIS_PER_CHANNEL, KVQ_CODES_UNPACKED, KVQ_DTYPE_F16},
    {KVQ_AXIS_PER_CHANNEL, KVQ_CODES_PACKED, KVQ_DTYPE_F32}};

} // namespace

TEST(TableChecks, GroupDequantRefusesEveryNonFiniteScaleOrZero) {
  // 8 x 8 at 2 bits, groups of 4: 16 (scale, zero) pairs in both axes.
  const int64_t vectors = kRows * kCols / kGroup;
  const std::vector<uint8_t> codes(kRows * kCols, 1); // valid either layout
  for (const DequantCase &dc : kDequantCases) {
    for (bool zeroTable : {false, true})
      for (uint16_t bad : kNonFinite)
        for (int64_t at : {int64_t{0}, vectors / 2, vectors - 1}) {
          std::vector<uint16_t> scale(vectors, toHalf(0.5f)),
              zero(vectors, toHalf(-1.0f));
          (zeroTable ? zero : scale)[at] = bad;
          std::vector<uint8_t> out(kRows * kCols * 4, 0xa5);
          SCOPED_TRACE(testing::Message()
                       << (zeroTable ? "zero" : "scale") << " " << std::hex
                       << bad << std::dec << " at " << at << " axis " << dc.axis
                       << " layout " << dc.layout);
          EXPECT_EQ(kvq_group_dequant(codes.data(), dc.layout, scale.data(),
                                      zero.data(), kRows, kCols, dc.axis,
                                      kGroup, 2, out.data(), dc.dtype),
                    KVQ_ERR_NON_FINITE);
          EXPECT_TRUE(oneLine(kvq_last_error())) << kvq_last_error();
          EXPECT_NE(
              std::string(kvq_last_error()).find(zeroTable ? "zero" : "scale"),
              std::string::npos)
              << kvq_last_error();
          EXPECT_TRUE(std::all_of(out.begin(), out.end(),
                                  [](uint8_t b) { return b == 0xa5; }));
        }
  }
}

TEST(TableChecks, GroupDequantOfFiniteTablesIsCodeTimesScalePlusZero) {
  // The same call with finite tables succeeds: the refusals above are the
  // non-finite entry's doing. 1 * 0.5 + -1 = -0.5 everywhere.
  std::vector<uint8_t> codes(kRows * kCols, 1);
  std::vector<uint16_t> scale(16, toHalf(0.5f)), zero(16, toHalf(-1.0f));
  std::vector<float> out(kRows * kCols);
  ASSERT_EQ(kvq_group_dequant(codes.data(), KVQ_CODES_UNPACKED, scale.data(),
                              zero.data(), kRows, kCols, KVQ_AXIS_PER_TOKEN,
                              kGroup, 2, out.data(), KVQ_DTYPE_F32),
            KVQ_OK);
  EXPECT_TRUE(
      std::all_of(out.begin(), out.end(), [](float f) { return f == -0.5f; }));
}

TEST(TableChecks, NuqQuantAndDequantRefuseEveryNonFiniteLevel) {
  // 3 bits: 8 ascending levels per vector of 4 (per-token groups of 4).
  const int64_t vectors = kRows * kCols / kGroup, L = 8;
  std::vector<float> x(kRows * kCols, 0.25f);
  std::vector<uint8_t> codes(kRows * kCols, 2);
  for (uint16_t bad : kNonFinite)
    for (int64_t at : {int64_t{0}, L - 1, (vectors - 1) * L + 3}) {
      std::vector<uint16_t> levels(vectors * L);
      for (int64_t i = 0; i < vectors * L; ++i)
        levels[i] = toHalf(static_cast<float>(i % L) - 3.5f);
      // Infinities keep the table ascending (so only the finiteness check
      // can refuse it): -inf goes first in a vector, +inf last.
      const bool neg = (bad & 0x8000) != 0, inf = (bad & 0x3ff) == 0;
      const int64_t pos = inf ? (at / L) * L + (neg ? 0 : L - 1) : at;
      levels[pos] = bad;
      SCOPED_TRACE(testing::Message()
                   << "level " << std::hex << bad << std::dec << " at " << pos);
      std::vector<uint8_t> outCodes(codes.size(), 0xee);
      EXPECT_EQ(kvq_nuq_quant(x.data(), KVQ_DTYPE_F32, kRows, kCols,
                              KVQ_AXIS_PER_TOKEN, kGroup, 3, levels.data(),
                              KVQ_CODES_UNPACKED, outCodes.data()),
                KVQ_ERR_NON_FINITE);
      EXPECT_TRUE(oneLine(kvq_last_error())) << kvq_last_error();
      EXPECT_TRUE(std::all_of(outCodes.begin(), outCodes.end(),
                              [](uint8_t c) { return c == 0xee; }));
      std::vector<float> out(x.size(), -9.0f);
      EXPECT_EQ(kvq_nuq_dequant(codes.data(), KVQ_CODES_UNPACKED, levels.data(),
                                kRows, kCols, KVQ_AXIS_PER_TOKEN, kGroup, 3,
                                out.data(), KVQ_DTYPE_F32),
                KVQ_ERR_NON_FINITE);
      EXPECT_TRUE(std::all_of(out.begin(), out.end(),
                              [](float f) { return f == -9.0f; }));
    }
}

// The one-pass ascending check skips each table's first level (it is not
// compared with the table before): a table whose only descending pair is
// its first must still be refused, in the first vector and in later ones,
// for every width (up to 16 levels the check counts positions in 16 bits,
// 8 bits take a loop of their own). The tables around it ascend across
// their boundaries too, so no other pair sends the check to its slow path.
// Tables that each ascend but start below the end of the one before are
// fine.
TEST(TableChecks, NuqQuantRefusesATableWhoseFirstPairDescends) {
  for (int32_t bits : {2, 3, 4, 8}) {
    const int64_t L = int64_t{1} << bits, group = 256;
    const int64_t rows = 4, cols = 512, vectors = rows * cols / group;
    std::vector<float> x(rows * cols, 0.25f);
    std::vector<uint16_t> levels(vectors * L);
    for (int64_t i = 0; i < vectors * L; ++i) // each table -L/2 .. L/2 - 1
      levels[i] = toHalf(static_cast<float>(i % L - L / 2));
    std::vector<uint8_t> codes(x.size(), 0xee);
    ASSERT_EQ(kvq_nuq_quant(x.data(), KVQ_DTYPE_F32, rows, cols,
                            KVQ_AXIS_PER_TOKEN, group, bits, levels.data(),
                            KVQ_CODES_UNPACKED, codes.data()),
              KVQ_OK)
        << "bits " << bits;
    for (int64_t v : {int64_t{0}, int64_t{3}, vectors - 1}) {
      std::vector<uint16_t> bad(levels.size()); // 0 .. 2047: exact in fp16
      for (int64_t i = 0; i < vectors * L; ++i)
        bad[i] = toHalf(static_cast<float>(i));
      std::swap(bad[v * L], bad[v * L + 1]);
      std::fill(codes.begin(), codes.end(), 0xee);
      EXPECT_EQ(kvq_nuq_quant(x.data(), KVQ_DTYPE_F32, rows, cols,
                              KVQ_AXIS_PER_TOKEN, group, bits, bad.data(),
                              KVQ_CODES_UNPACKED, codes.data()),
                KVQ_ERR_INVALID_ARGUMENT)
          << "bits " << bits << " vector " << v;
      const std::string msg = kvq_last_error();
      EXPECT_NE(msg.find("levels of vector " + std::to_string(v) +
                         " are not ascending"),
                std::string::npos)
          << msg;
      EXPECT_TRUE(std::all_of(codes.begin(), codes.end(),
                              [](uint8_t c) { return c == 0xee; }));
    }
  }
}

TEST(TableChecks, SinkSelectRefusesNegativeAndNonFiniteNorms) {
  for (float bad : {-1e-30f, -0.5f, -1.0f, -3e38f}) {
    std::vector<float> norms = {1.0f, 2.0f, bad, 4.0f};
    std::vector<int64_t> pos(2, -5);
    EXPECT_EQ(kvq_sink_select(norms.data(), 4, 2, pos.data()),
              KVQ_ERR_INVALID_ARGUMENT)
        << bad;
    EXPECT_NE(std::string(kvq_last_error()).find("negative"), std::string::npos)
        << kvq_last_error();
    EXPECT_EQ(pos, (std::vector<int64_t>{-5, -5}));
  }
  for (float bad : {-INFINITY, INFINITY, NAN}) {
    std::vector<float> norms = {1.0f, bad, 3.0f};
    std::vector<int64_t> pos(1, -5);
    EXPECT_EQ(kvq_sink_select(norms.data(), 3, 1, pos.data()),
              KVQ_ERR_NON_FINITE)
        << bad;
    EXPECT_EQ(pos[0], -5);
  }
  // Zero norms (of either sign) are valid: an all-zero key row.
  std::vector<float> zeros = {0.0f, -0.0f, 2.0f};
  std::vector<int64_t> pos(2);
  ASSERT_EQ(kvq_sink_select(zeros.data(), 3, 2, pos.data()), KVQ_OK);
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 2})); // ties: the earlier position
}
