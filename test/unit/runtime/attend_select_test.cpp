//===- attend_select_test.cpp - The one choice of a cache's attention ops -===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// selectAttendOps against the coverage each SIMD table declares, restated
// here per op as a specification: for shapes on both sides of every
// condition (head_dim a multiple of 16 or 8 or neither, code widths,
// value group sizes, nibble rows, whole heads of group weights), each entry
// is the table's kernel exactly where it covers the shape and the
// reference elsewhere. And the stores run the ops chosen for their shape,
// at creation and after a load.
//
//===----------------------------------------------------------------------===//
#include "cache_handle.h"
#include "kernels.h"
#include "saved_file_util.h"
#include "store.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kvq;

namespace {

bool supported(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}
bool pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }
bool divides(int64_t G, int64_t d) { return G > 0 && d % G == 0; }

/// Which entries table `name` ("avx2", "avx512", "neon") covers for s:
/// the declared coverage, written out independently of the kernel files.
struct Coverage {
  bool mulHalf, dequant, half, narrowHalf, halfRows, keyCodes, axpyCodes, axpyCodesRows, nibble,
      levelRows, lutRows, groupWeights, ropeNibble, ropeCodes, ropeHalf,
      outliers, levelColumns;
};

Coverage expectedCoverage(const std::string &name, const AttendShape &s) {
  const bool w16 = s.d % 16 == 0, x86 = name != "neon";
  const int64_t P = s.d * s.keyBits / 4;
  Coverage c{};
  c.mulHalf = s.d % 8 == 0;
  c.dequant = x86 && supported(s.keyBits);
  c.half = w16;
  c.narrowHalf = x86 && s.d % 16 == 8; // the reference's bits, in lanes
  // Rows in lanes: AVX2's narrow heads, AVX-512's reductions of 16 dots.
  c.halfRows = c.narrowHalf || (name == "avx512" && w16);
  c.keyCodes = w16 && supported(s.keyBits);
  c.axpyCodes =
      w16 && supported(s.valueBits) && divides(s.G, s.d) && s.G % 8 == 0;
  c.axpyCodesRows = w16 && supported(s.valueBits) && divides(s.G, s.d) &&
                    s.G >= 8 && pow2(s.G);
  c.nibble = (s.keyBits == 2 || s.keyBits == 4) && P % 4 == 0 && P <= 256;
  const bool lutBits = s.valueBits >= 2 && s.valueBits <= 4;
  c.levelRows = w16 && (x86 ? lutBits : supported(s.valueBits));
  c.lutRows = x86 && w16 && lutBits;
  c.outliers = x86; // any width: scalar on AVX2, AVX-512's 2-4 bits
  // Rows in lanes over whole 32-bit words, at most 32 per head row.
  c.levelColumns = x86 && s.d % 32 == 0 && s.keyBits >= 2 && s.keyBits <= 4 &&
                   s.d * s.keyBits <= 1024;
  const int64_t perHead = divides(s.G, s.d) ? s.d / s.G : 0;
  // Whole heads in a register's lanes: 16 on AVX-512F, else AVX2's 8.
  auto wholeHeadsIn = [&](int64_t lanes) {
    return perHead > 0 && lanes % perHead == 0 &&
           (s.heads * perHead) % lanes == 0;
  };
  c.groupWeights = (name == "avx512" && wholeHeadsIn(16)) ||
                   (x86 && wholeHeadsIn(8));
  c.ropeNibble =
      name == "avx512" && (s.keyBits == 2 || s.keyBits == 4) && s.d % 4 == 0;
  c.ropeCodes = name == "avx512" && s.keyBits == 3 && s.d % 32 == 0;
  c.ropeHalf = name == "avx512" && s.d % 32 == 0; // any key width
  return c;
}

std::vector<AttendShape> shapesAroundEveryCondition() {
  std::vector<AttendShape> out;
  for (int64_t d : {8, 12, 24, 40, 48, 64, 128, 256, 512})
    for (int64_t heads : {1, 2, 8})
      for (int64_t G : {0, 3, 4, 5, 8, 16, 24, 32, 64})
        for (int bits : {0, 2, 3, 4, 8, 16})
          out.push_back(AttendShape{d, heads, G, bits, bits});
  // Key and value widths apart (the entries take one or the other).
  for (int kb : {2, 3, 4, 8})
    for (int vb : {2, 3, 4, 8})
      out.push_back(AttendShape{128, 8, 32, kb, vb});
  return out;
}

std::string describe(const AttendShape &s) {
  return "d " + std::to_string(s.d) + " heads " + std::to_string(s.heads) +
         " G " + std::to_string(s.G) + " key bits " +
         std::to_string(s.keyBits) + " value bits " +
         std::to_string(s.valueBits);
}

TEST(SelectAttendOps, TheReferenceTableGivesTheReferenceForEveryShape) {
  const AttendOps &ref = referenceAttendOps();
  EXPECT_EQ(ref.groupWeightsHalf, nullptr); // the portable path
  EXPECT_EQ(ref.ropeNibbleTiles, nullptr);  // the portable tile loops
  EXPECT_EQ(ref.ropeCodeRows, nullptr);     // loadKeys, ropeScoresRows
  EXPECT_EQ(ref.ropeHalfRows, nullptr);     // ropeScoresHalfRows
  EXPECT_EQ(ref.dotHalfRows, nullptr);      // dotHalf row by row
  for (const AttendShape &s : shapesAroundEveryCondition()) {
    const AttendOps ops = selectAttendOps(referenceKernels(), s);
#define KVQ_EXPECT_REFERENCE(op) EXPECT_EQ(ops.op, ref.op) << #op;
    KVQ_ATTEND_OPS(KVQ_EXPECT_REFERENCE)
#undef KVQ_EXPECT_REFERENCE
  }
}

TEST(SelectAttendOps, EachEntryIsTheSimdKernelExactlyWhereItsTableCoversIt) {
  // Every table of the build, runnable here or not: only coverage is read.
  const std::vector<const KernelTable *> tables = simdTablesForSelection();
  if (tables.empty())
    GTEST_SKIP() << "no SIMD backend in this build";
  const AttendOps &ref = referenceAttendOps();
  int simdEntries = 0, referenceEntries = 0;
  for (const KernelTable *t : tables)
    for (const AttendShape &s : shapesAroundEveryCondition()) {
      const AttendOps ops = selectAttendOps(*t, s);
      const Coverage want = expectedCoverage(t->name, s);
      const std::string what = std::string(t->name) + " " + describe(s);
      // Every entry is set: a table's kernel or the reference's.
#define KVQ_EXPECT_SET(op)                                                     \
  if (ref.op)                                                                  \
    EXPECT_NE(ops.op, nullptr) << #op << " " << what;
      KVQ_ATTEND_OPS(KVQ_EXPECT_SET)
#undef KVQ_EXPECT_SET
      auto check = [&](const char *op, bool simd, bool covered) {
        EXPECT_EQ(simd, covered) << op << " " << what;
        ++(simd ? simdEntries : referenceEntries);
      };
      check("halfToFloatN", ops.halfToFloatN != ref.halfToFloatN, true);
      check("halfRowsToFloat", ops.halfRowsToFloat != ref.halfRowsToFloat,
            true);
      check("dequantCodes", ops.dequantCodes != ref.dequantCodes, want.dequant);
      check("mulHalf", ops.mulHalf != ref.mulHalf, want.mulHalf);
      const bool anyHalf = want.half || want.narrowHalf;
      check("dotHalf", ops.dotHalf != ref.dotHalf, anyHalf);
      check("axpyHalf", ops.axpyHalf != ref.axpyHalf, anyHalf);
      check("axpyHalfRows", ops.axpyHalfRows != ref.axpyHalfRows, anyHalf);
      check("dotHalfRows", ops.dotHalfRows != nullptr, want.halfRows);
      check("dotCodes", ops.dotCodes != ref.dotCodes, want.keyCodes);
      check("dotCodesRows", ops.dotCodesRows != ref.dotCodesRows,
            want.keyCodes);
      check("dotLut", ops.dotLut != ref.dotLut, want.keyCodes);
      check("dotLutRows", ops.dotLutRows != ref.dotLutRows, want.keyCodes);
      check("axpyCodes", ops.axpyCodes != ref.axpyCodes, want.axpyCodes);
      check("axpyCodesRows", ops.axpyCodesRows != ref.axpyCodesRows,
            want.axpyCodesRows);
      check("dotNibbleRows", ops.dotNibbleRows != ref.dotNibbleRows,
            want.nibble);
      check("axpyLevelRows", ops.axpyLevelRows != ref.axpyLevelRows,
            want.levelRows);
      check("axpyLutRows", ops.axpyLutRows != ref.axpyLutRows, want.lutRows);
      check("outlierScores", ops.outlierScores != ref.outlierScores,
            want.outliers);
      check("outlierAxpy", ops.outlierAxpy != ref.outlierAxpy, want.outliers);
      check("levelColumns", ops.levelColumns != ref.levelColumns,
            want.levelColumns);
      check("groupWeightsHalf", ops.groupWeightsHalf != nullptr,
            want.groupWeights);
      check("ropeNibbleTiles", ops.ropeNibbleTiles != nullptr, want.ropeNibble);
      check("ropeCodeRows", ops.ropeCodeRows != nullptr, want.ropeCodes);
      check("ropeHalfRows", ops.ropeHalfRows != nullptr, want.ropeHalf);
    }
  // Both sides of the conditions were reached.
  EXPECT_GT(simdEntries, 0);
  EXPECT_GT(referenceEntries, 0);
}

#if defined(__x86_64__)
TEST(SelectAttendOps, Avx512KernelsReplaceAvx2OnesOnlyWhereTheyCover) {
  // Selection only, so it runs whether or not this CPU has AVX-512.
  const std::vector<const KernelTable *> tables = simdTablesForSelection();
  ASSERT_EQ(tables.size(), 2u);
  ASSERT_STREQ(tables[0]->name, "avx512");
  ASSERT_STREQ(tables[1]->name, "avx2");
  for (const AttendShape &s : shapesAroundEveryCondition()) {
    const AttendOps a512 = selectAttendOps(*tables[0], s);
    const AttendOps a2 = selectAttendOps(*tables[1], s);
    const std::string what = describe(s);
    const bool lutBits = s.keyBits >= 2 && s.keyBits <= 4;
    const bool lutValueBits = s.valueBits >= 2 && s.valueBits <= 4;
    // Own kernels where they cover; the AVX2 (or reference) entry elsewhere.
    EXPECT_EQ(a512.dotLut != a2.dotLut, s.d % 16 == 0 && lutBits) << what;
    // dotLutRows: rows in lanes for whole 32-bit words of at most 32 per
    // head row, else AVX-512 dotLut per row (still not AVX2's).
    EXPECT_EQ(a512.dotLutRows != a2.dotLutRows, s.d % 16 == 0 && lutBits)
        << what;
    EXPECT_EQ(a512.axpyLutRows != a2.axpyLutRows, s.d % 64 == 0 && lutValueBits)
        << what;
    EXPECT_EQ(a512.outlierScores != a2.outlierScores, s.d % 16 == 0 && lutBits)
        << what;
    EXPECT_NE(a2.outlierScores, referenceAttendOps().outlierScores) << what;
    EXPECT_EQ(a512.outlierAxpy != a2.outlierAxpy, lutValueBits) << what;
    EXPECT_NE(a2.outlierAxpy, referenceAttendOps().outlierAxpy) << what;
    EXPECT_EQ(a512.levelColumns != a2.levelColumns,
              s.d % 32 == 0 && lutBits && s.d * s.keyBits <= 1024)
        << what;
    EXPECT_EQ(a2.levelColumns != referenceAttendOps().levelColumns,
              a512.levelColumns != a2.levelColumns)
        << what;
    // 2-bit rows in pairs, 3- and 4-bit rows 16 codes per register.
    EXPECT_EQ(a512.axpyCodesRows != a2.axpyCodesRows,
              s.valueBits >= 2 && s.valueBits <= 4 && s.d % 64 == 0 &&
                  divides(s.G, s.d) && s.G % 16 == 0 && pow2(s.G))
        << what;
    EXPECT_EQ(a512.dotNibbleRows != a2.dotNibbleRows,
              a2.dotNibbleRows != referenceAttendOps().dotNibbleRows)
        << what;
    EXPECT_EQ(a512.dotCodes, a2.dotCodes) << what;
    EXPECT_EQ(a512.axpyLevelRows != a2.axpyLevelRows,
              s.d % 64 == 0 && lutValueBits)
        << what;
    const int64_t perHead = divides(s.G, s.d) ? s.d / s.G : 0;
    auto wholeHeadsIn = [&](int64_t lanes) {
      return perHead > 0 && lanes % perHead == 0 &&
             (s.heads * perHead) % lanes == 0;
    };
    EXPECT_EQ(a2.groupWeightsHalf != nullptr, wholeHeadsIn(8)) << what;
    EXPECT_EQ(a512.groupWeightsHalf != a2.groupWeightsHalf, wholeHeadsIn(16))
        << what;
  }
}
#endif

/// The ops a store attends with are the ones selected for its
/// configuration on the active table, at creation and after a load.
TEST(SelectAttendOps, StoresRunTheOpsOfTheirShape) {
  struct Case {
    kvq_method method;
    int bits, heads, dim, group;
  };
  const Case cases[] = {{KVQ_METHOD_KIVI, 2, 8, 128, 32},
                        {KVQ_METHOD_KIVI, 3, 2, 12, 3},
                        {KVQ_METHOD_KIVI_SINK, 4, 2, 40, 5},
                        {KVQ_METHOD_KVQUANT, 3, 2, 24, 0},
                        {KVQ_METHOD_FP16, 16, 2, 64, 0}};
  for (const Case &c : cases) {
    kvq_config cfg = kvqtest::config(c.method, c.heads, c.dim);
    if (c.method != KVQ_METHOD_FP16)
      cfg.key_bits = cfg.value_bits = c.bits;
    if (c.group)
      cfg.group_size = c.group;
    kvqtest::Cache cache(cfg);
    ASSERT_NE(cache.h, nullptr) << kvq_last_error();
    kvqtest::KV kv = kvqtest::gaussianKV(3, 40, c.heads, c.dim);
    kvqtest::feed(cache.h, kv, 30);
    const AttendOps want =
        selectAttendOps(kernels(), AttendShape{c.dim, c.heads, cfg.group_size,
                                               cfg.key_bits, cfg.value_bits});
    const std::vector<uint8_t> saved = kvqtest::saveBytes(cache.h);
    kvq_cache_t *loaded = nullptr;
    ASSERT_EQ(kvq_cache_load(saved.data(), static_cast<int64_t>(saved.size()),
                             nullptr, &loaded),
              KVQ_OK)
        << kvq_last_error();
    for (const kvq_cache_t *h : {static_cast<const kvq_cache_t *>(cache.h),
                                 static_cast<const kvq_cache_t *>(loaded)})
      for (const auto &layer : h->layers) {
        const AttendOps &got = layer->attendOps();
#define KVQ_EXPECT_SAME(op)                                                    \
  EXPECT_EQ(got.op, want.op) << #op << " method " << c.method << " d " << c.dim;
        KVQ_ATTEND_OPS(KVQ_EXPECT_SAME)
#undef KVQ_EXPECT_SAME
      }
    kvq_cache_destroy(loaded);
  }
}

} // namespace
