//===- attend_order_test.cpp - SIMD attention ops in the canonical order --===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The AVX2 and NEON attention inner kernels must give the same bits, so that
// a model attends identically on x86_64 and arm64 (test/e2e/cross-arch.mlir
// checks one small case end to end). This test pins both to one scalar
// model of the canonical order (runtime/kernels/attend/attend_avx2.cpp, file
// comment): sixteen fused multiply-add chains over c = l (mod 16) and a fixed
// tree. It runs natively (every x86 table) and under qemu (NEON table);
// matching the same model bit for bit on both means matching each other, at
// head_dim 128 where the e2e test cannot reach.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace kvq;
using kvqtest::Rng;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The canonical dot product of q and v over d channels (d % 16 == 0):
/// `fused` selects fma chains (codes, fp16 rows) or plain additions of
/// v (lookup tables, where v already holds the products).
float canonicalDot(const float *q, const float *v, int64_t d, bool fused) {
  float S[16] = {};
  for (int64_t c = 0; c < d; ++c) {
    float &s = S[c % 16];
    s = fused ? std::fma(q[c], v[c], s) : s + v[c];
  }
  float T[8], U[4], W[2];
  for (int l = 0; l < 8; ++l)
    T[l] = S[l] + S[l + 8];
  for (int l = 0; l < 4; ++l)
    U[l] = T[l] + T[l + 4];
  for (int l = 0; l < 2; ++l)
    W[l] = U[l] + U[l + 2];
  return W[0] + W[1];
}

struct Data {
  int64_t d = 128, nq = 7, rows = 9; // nq: the most query vectors a test takes
  std::vector<float> q;
  std::vector<uint8_t> packed; ///< rows x d codes, packed row after row
  std::vector<uint16_t> half;  ///< rows x d fp16 values
};

Data makeData(int bits, uint64_t seed) {
  Data t;
  Rng rng(seed);
  t.q.resize(static_cast<size_t>(t.nq * t.d));
  for (float &x : t.q)
    x = static_cast<float>(rng.normal());
  const int64_t n = t.rows * t.d;
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  t.half.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    codes[static_cast<size_t>(i)] =
        static_cast<uint8_t>(rng.uniform() * (1 << bits)) & ((1 << bits) - 1);
    t.half[static_cast<size_t>(i)] =
        floatToHalf(static_cast<float>(rng.normal() * 3));
  }
  t.packed.resize(static_cast<size_t>(packedBytes(n, bits)));
  packCodesRef(codes.data(), n, bits, t.packed.data());
  return t;
}

std::vector<float> rowCodes(const Data &t, int bits, int64_t r) {
  std::vector<float> v(static_cast<size_t>(t.d));
  for (int64_t c = 0; c < t.d; ++c)
    v[static_cast<size_t>(c)] =
        packedCodeAt(t.packed.data(), r * t.d + c, bits);
  return v;
}

/// The ops a cache of Data's head_dim with these code widths and value
/// groups runs on table k (selectAttendOps): the shapes here are ones the
/// SIMD kernels cover, except where a check says otherwise.
AttendOps opsFor(const KernelTable &k, int bits, int64_t G = 32) {
  return selectAttendOps(k, AttendShape{Data{}.d, 1, G, bits, bits});
}

/// Runs CHECK(table) for every SIMD table this CPU runs (AVX-512 and the
/// AVX2-only one on such a machine, NEON under qemu).
#define FOR_EACH_SIMD_TABLE(CHECK)                                             \
  const std::vector<const KernelTable *> tables = simdKernelVariants();        \
  if (tables.empty())                                                          \
    GTEST_SKIP() << "no SIMD table on this CPU";                               \
  for (const KernelTable *k : tables) {                                        \
    SCOPED_TRACE(k->name);                                                     \
    CHECK(*k);                                                                 \
    if (HasFatalFailure())                                                     \
      return;                                                                  \
  }

void checkDotsOfCodesAndHalfsAreCanonical(const KernelTable &table) {
  for (int bits : {2, 3, 4, 8}) {
    const AttendOps ops = opsFor(table, bits);
    const Data t = makeData(bits, 40 + bits);
    // 3 and 7 (a block of four, then three): dotHalf reduces up to four
    // queries' sums together and must store only the block's own.
    for (int64_t nq :
         {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{7}}) {
      // dotCodesRows: nq == 1 takes the four-rows-at-once kernel on AVX2.
      std::vector<const uint8_t *> rows;
      for (int64_t r = 0; r < t.rows; ++r)
        rows.push_back(t.packed.data() + r * t.d * bits / 8);
      std::vector<float> out(static_cast<size_t>(t.rows * nq));
      CodeRowsDot many;
      many.rows = rows.data();
      many.n = t.rows;
      many.bits = bits;
      many.q = t.q.data();
      many.nq = nq;
      many.d = t.d;
      many.out = out.data();
      many.outStride = nq;
      ops.dotCodesRows(many);
      for (int64_t r = 0; r < t.rows; ++r) {
        const std::vector<float> v = rowCodes(t, bits, r);
        std::vector<float> one(static_cast<size_t>(nq));
        CodesDot single;
        single.packed = t.packed.data();
        single.first = r * t.d;
        single.bits = bits;
        single.q = t.q.data();
        single.nq = nq;
        single.d = t.d;
        single.out = one.data();
        ops.dotCodes(single);
        std::vector<float> h(static_cast<size_t>(nq) + 1, -1.0f);
        ops.dotHalf(t.half.data() + r * t.d, t.q.data(), nq, t.d, h.data());
        EXPECT_EQ(h[static_cast<size_t>(nq)], -1.0f) << "wrote past nq";
        std::vector<float> hv(static_cast<size_t>(t.d));
        for (int64_t c = 0; c < t.d; ++c)
          hv[static_cast<size_t>(c)] =
              halfToFloat(t.half[static_cast<size_t>(r * t.d + c)]);
        for (int64_t j = 0; j < nq; ++j) {
          const float want =
              canonicalDot(t.q.data() + j * t.d, v.data(), t.d, true);
          const float wantH =
              canonicalDot(t.q.data() + j * t.d, hv.data(), t.d, true);
          SCOPED_TRACE("bits " + std::to_string(bits) + " nq " +
                       std::to_string(nq) + " row " + std::to_string(r) +
                       " query " + std::to_string(j));
          EXPECT_EQ(bitsOf(out[static_cast<size_t>(r * nq + j)]), bitsOf(want));
          EXPECT_EQ(bitsOf(one[static_cast<size_t>(j)]), bitsOf(want));
          EXPECT_EQ(bitsOf(h[static_cast<size_t>(j)]), bitsOf(wantH));
        }
      }
    }
  }
}

TEST(AttendOrder, DotsOfCodesAndHalfsAreCanonical) {
  FOR_EACH_SIMD_TABLE(checkDotsOfCodesAndHalfsAreCanonical);
}

/// dotCodesRows of 3-bit rows (KIVI's row-major key groups) at head_dims
/// of one to sixteen 32-channel blocks and row counts around multiples of
/// 4 and 16 (the AVX2 kernel's four rows at once; tiles of 16 rows were
/// tried). Rows come in a scrambled order and each lives at the very end
/// of its own buffer, so a kernel that reads past a row (the sanitizer
/// build sees it) or assumes a stride fails.
void checkThreeBitRowsAreCanonicalAtManyShapes(const KernelTable &table) {
  Rng rng(31);
  for (int64_t d : {32, 96, 128, 160, 256, 512}) {
    const AttendOps ops = selectAttendOps(table, AttendShape{d, 1, 32, 3, 3});
    const int64_t rowBytes = d * 3 / 8;
    // One query vector takes AVX2's four-rows-at-once kernel, three not.
    for (int64_t nq : {int64_t{1}, int64_t{3}}) {
      for (int64_t n : {1, 15, 16, 17, 37}) {
        std::vector<float> q(static_cast<size_t>(nq * d));
        for (float &x : q)
          x = static_cast<float>(rng.normal());
        std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(n));
        std::vector<std::vector<float>> codes(static_cast<size_t>(n));
        std::vector<const uint8_t *> rows(static_cast<size_t>(n));
        for (int64_t r = 0; r < n; ++r) {
          std::vector<uint8_t> c(static_cast<size_t>(d));
          for (uint8_t &x : c)
            x = static_cast<uint8_t>(rng.uniform() * 8) & 7;
          codes[static_cast<size_t>(r)].assign(c.begin(), c.end());
          std::vector<uint8_t> &b = bufs[static_cast<size_t>(r)];
          b.resize(static_cast<size_t>(rowBytes));
          packCodesRef(c.data(), d, 3, b.data());
        }
        // Row r of the call is buffer (r * 7) mod n: no common stride.
        for (int64_t r = 0; r < n; ++r)
          rows[static_cast<size_t>(r)] =
              bufs[static_cast<size_t>((r * 7) % n)].data();
        const int64_t outStride = nq + 2;
        std::vector<float> out(static_cast<size_t>(n * outStride), -7.0f);
        CodeRowsDot a;
        a.rows = rows.data();
        a.n = n;
        a.bits = 3;
        a.q = q.data();
        a.nq = nq;
        a.d = d;
        a.out = out.data();
        a.outStride = outStride;
        ops.dotCodesRows(a);
        for (int64_t r = 0; r < n; ++r) {
          const std::vector<float> &v = codes[static_cast<size_t>((r * 7) % n)];
          for (int64_t j = 0; j < outStride; ++j) {
            SCOPED_TRACE("d " + std::to_string(d) + " nq " +
                         std::to_string(nq) + " rows " + std::to_string(n) +
                         " row " + std::to_string(r) + " query " +
                         std::to_string(j));
            const float got = out[static_cast<size_t>(r * outStride + j)];
            if (j >= nq) {
              EXPECT_EQ(got, -7.0f) << "wrote outside its queries";
              continue;
            }
            EXPECT_EQ(bitsOf(got), bitsOf(canonicalDot(q.data() + j * d,
                                                       v.data(), d, true)));
          }
        }
      }
    }
  }
}

TEST(AttendOrder, ThreeBitRowsAreCanonicalAtManyShapes) {
  FOR_EACH_SIMD_TABLE(checkThreeBitRowsAreCanonicalAtManyShapes);
}

/// dotLut, 1 to 5 query vectors (AVX-512: four streams at once and the
/// remainders).
void checkPerChannelLookupDotIsCanonical(const KernelTable &table) {
  for (int bits : {2, 3, 4})
    for (int64_t nq : {int64_t{1}, int64_t{2}, int64_t{5}}) {
      const AttendOps ops = opsFor(table, bits);
      const Data t = makeData(bits, 70 + bits);
      const int64_t L = int64_t{1} << bits;
      std::vector<float> lut(static_cast<size_t>(nq * t.d * L));
      Rng rng(5);
      for (float &x : lut)
        x = static_cast<float>(rng.normal());
      for (int64_t r = 0; r < t.rows; ++r) {
        std::vector<float> out(static_cast<size_t>(nq));
        LutDot args;
        args.packed = t.packed.data();
        args.first = r * t.d;
        args.bits = bits;
        args.lut = lut.data();
        args.nq = nq;
        args.d = t.d;
        args.out = out.data();
        ops.dotLut(args);
        for (int64_t j = 0; j < nq; ++j) {
          std::vector<float> v(static_cast<size_t>(t.d));
          for (int64_t c = 0; c < t.d; ++c)
            v[static_cast<size_t>(c)] = lut[static_cast<size_t>(
                (j * t.d + c) * L +
                packedCodeAt(t.packed.data(), r * t.d + c, bits))];
          EXPECT_EQ(bitsOf(out[static_cast<size_t>(j)]),
                    bitsOf(canonicalDot(nullptr, v.data(), t.d, false)))
              << "bits " << bits << " nq " << nq << " row " << r << " query "
              << j;
        }
      }
    }
}

TEST(AttendOrder, PerChannelLookupDotIsCanonical) {
  FOR_EACH_SIMD_TABLE(checkPerChannelLookupDotIsCanonical);
}

/// dotLutRows: n token rows (each its own allocation, two heads of d
/// channels) against one head's tables, each row the canonical lookup sum:
/// head widths of one, a part of one and two register transposes at 4
/// bits, 1 to 37 rows (whole tiles of 16 and the remainders), 1 and 2
/// query vectors.
void checkLookupDotsOfManyRowsAreCanonical(const KernelTable &table) {
  for (int bits : {2, 3, 4})
    for (int64_t d : {int64_t{96}, int64_t{128}, int64_t{256}})
      for (int64_t nq : {int64_t{1}, int64_t{2}}) {
        const int64_t heads = 2, L = int64_t{1} << bits, n = 37;
        const AttendOps ops =
            selectAttendOps(table, AttendShape{d, heads, 32, bits, bits});
        Rng rng(static_cast<uint64_t>(100 * bits + d + nq));
        std::vector<std::vector<uint8_t>> tokens;
        for (int64_t r = 0; r < n; ++r) {
          std::vector<uint8_t> codes(static_cast<size_t>(heads * d));
          for (uint8_t &c : codes)
            c = static_cast<uint8_t>(rng.uniform() * static_cast<double>(L)) &
                static_cast<uint8_t>(L - 1);
          tokens.emplace_back(
              static_cast<size_t>(packedBytes(heads * d, bits)));
          packCodesRef(codes.data(), heads * d, bits, tokens.back().data());
        }
        std::vector<const uint8_t *> rows;
        for (const std::vector<uint8_t> &tok : tokens)
          rows.push_back(tok.data());
        std::vector<float> lut(static_cast<size_t>(nq * d * L));
        for (float &x : lut)
          x = static_cast<float>(rng.normal());
        for (int64_t count : {int64_t{1}, int64_t{16}, n})
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t stride = nq + 1; // a gap between the rows' outputs
            std::vector<float> out(static_cast<size_t>(count * stride), -1.0f);
            LutRowsDot args;
            args.rows = rows.data();
            args.n = count;
            args.first = h * d;
            args.bits = bits;
            args.lut = lut.data();
            args.nq = nq;
            args.d = d;
            args.out = out.data();
            args.outStride = stride;
            ops.dotLutRows(args);
            for (int64_t r = 0; r < count; ++r) {
              for (int64_t j = 0; j < nq; ++j) {
                std::vector<float> v(static_cast<size_t>(d));
                for (int64_t c = 0; c < d; ++c)
                  v[static_cast<size_t>(c)] = lut[static_cast<size_t>(
                      (j * d + c) * L +
                      packedCodeAt(rows[static_cast<size_t>(r)], h * d + c,
                                   bits))];
                ASSERT_EQ(bitsOf(out[static_cast<size_t>(r * stride + j)]),
                          bitsOf(canonicalDot(nullptr, v.data(), d, false)))
                    << "bits " << bits << " d " << d << " nq " << nq << " rows "
                    << count << " head " << h << " row " << r << " query " << j;
              }
              ASSERT_EQ(out[static_cast<size_t>(r * stride + nq)], -1.0f)
                  << "wrote past its outputs";
            }
          }
      }
}

TEST(AttendOrder, LookupDotsOfManyRowsAreCanonical) {
  FOR_EACH_SIMD_TABLE(checkLookupDotsOfManyRowsAreCanonical);
}

/// A row of packed codes over three heads followed by k outlier entries
/// (ascending channels spread over the heads; values normal, subnormal,
/// zero and negative), for the outlier kernels.
struct OutlierRow {
  std::vector<uint8_t> codes, block;
  std::vector<int64_t> channel;
  std::vector<uint16_t> value;
  const uint8_t *entries() const {
    return block.data() + packedBytes(static_cast<int64_t>(codes.size()), bits);
  }
  int bits = 0;
};

OutlierRow outlierRow(Rng &rng, int bits, int64_t C, int64_t k) {
  const int64_t L = int64_t{1} << bits;
  OutlierRow r;
  r.bits = bits;
  r.codes.resize(static_cast<size_t>(C));
  for (uint8_t &c : r.codes)
    c = static_cast<uint8_t>(rng.uniform() * static_cast<double>(L)) &
        static_cast<uint8_t>(L - 1);
  r.block.assign(static_cast<size_t>(packedBytes(C, bits) + k * 4), 0);
  packCodesRef(r.codes.data(), C, bits, r.block.data());
  const uint16_t special[] = {0x0001, 0x83ff, 0x0000, 0x8000, 0x7bff};
  uint8_t *entries = r.block.data() + packedBytes(C, bits);
  for (int64_t o = 0; o < k; ++o) {
    const int64_t c = (o * C) / k + (o % 2);
    const uint16_t v =
        o < 5 ? special[o] : floatToHalf(static_cast<float>(rng.normal() * 8));
    r.channel.push_back(c);
    r.value.push_back(v);
    const uint16_t e[2] = {v, static_cast<uint16_t>(c)};
    std::memcpy(entries + 4 * o, e, 4);
  }
  return r;
}

std::vector<float> normals(Rng &rng, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float &v : x)
    v = static_cast<float>(rng.normal());
  return x;
}

/// One case of the outlier kernels' tests.
struct OutlierCase {
  int bits;
  int64_t d, nq, k, heads;
  std::string what() const {
    return "bits " + std::to_string(bits) + " d " + std::to_string(d) + " nq " +
           std::to_string(nq) + " k " + std::to_string(k);
  }
};

/// check(ops, rng, row, case) for 2-4 and 8 bits, head widths 96 (a
/// division) and 128 (a shift), 1 and 3 query vectors, and rows of 1, 16
/// and 37 outliers (whole vectors of 16 and the remainders) over three
/// heads.
template <class Check>
void forEachOutlierRow(const KernelTable &table, uint64_t seed,
                       const Check &check) {
  for (int bits : {2, 3, 4, 8})
    for (int64_t d : {int64_t{96}, int64_t{128}})
      for (int64_t nq : {int64_t{1}, int64_t{3}}) {
        const int64_t heads = 3;
        const AttendOps ops =
            selectAttendOps(table, AttendShape{d, heads, 32, bits, bits});
        Rng rng(seed * static_cast<uint64_t>(bits) +
                static_cast<uint64_t>(d + nq));
        for (int64_t k : {int64_t{1}, int64_t{16}, int64_t{37}}) {
          const OutlierRow row = outlierRow(rng, bits, heads * d, k);
          check(ops, rng, row, OutlierCase{bits, d, nq, k, heads});
          if (testing::Test::HasFatalFailure())
            return;
        }
      }
}

/// outlierScores: a row's outliers against the product tables of the
/// query vectors: each term the float product, then the float difference,
/// added to its head's score in stored order, on every table.
void checkOutlierScoresAreExact(const KernelTable &table) {
  forEachOutlierRow(
      table, 7,
      [](const AttendOps &ops, Rng &rng, const OutlierRow &row,
         const OutlierCase &e) {
        const int64_t L = int64_t{1} << e.bits, d = e.d, nq = e.nq;
        const std::vector<float> q = normals(rng, e.heads * nq * d),
                                 lut = normals(rng, e.heads * nq * d * L);
        std::vector<float> scores = normals(rng, e.heads * nq + 1);
        std::vector<float> want = scores;
        OutlierScores args;
        args.entries = row.entries();
        args.k = e.k;
        args.codes = row.block.data();
        args.bits = e.bits;
        args.q = q.data();
        args.lut = lut.data();
        args.nq = nq;
        args.d = d;
        args.scores = scores.data();
        ops.outlierScores(args);
        for (int64_t o = 0; o < e.k; ++o)
          for (int64_t j = 0; j < nq; ++j) {
            const int64_t c = row.channel[static_cast<size_t>(o)];
            const int64_t i = (c / d * nq + j) * d + c % d;
            const float product =
                q[static_cast<size_t>(i)] *
                halfToFloat(row.value[static_cast<size_t>(o)]);
            const float term =
                product - lut[static_cast<size_t>(
                              i * L + row.codes[static_cast<size_t>(c)])];
            want[static_cast<size_t>(c / d * nq + j)] += term;
          }
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(bitsOf(scores[i]), bitsOf(want[i]))
              << e.what() << " score " << i;
      });
}

TEST(AttendOrder, OutlierScoresAreExact) {
  checkOutlierScoresAreExact(referenceKernels());
  if (HasFatalFailure())
    return;
  FOR_EACH_SIMD_TABLE(checkOutlierScoresAreExact);
}

/// outlierAxpy: a value row's outliers, each acc += w * x - w * level of
/// its channel's slot for every query vector; every accumulator (the
/// untouched ones too) compared bit for bit on every table.
void checkOutlierAxpyIsExact(const KernelTable &table) {
  forEachOutlierRow(
      table, 11,
      [](const AttendOps &ops, Rng &rng, const OutlierRow &row,
         const OutlierCase &e) {
        const int64_t L = int64_t{1} << e.bits, d = e.d, nq = e.nq;
        const std::vector<float> levels = normals(rng, e.heads * L),
                                 w = normals(rng, e.heads * nq);
        std::vector<float> acc = normals(rng, e.heads * nq * d);
        std::vector<float> want = acc;
        OutlierAxpy args;
        args.entries = row.entries();
        args.k = e.k;
        args.codes = row.block.data();
        args.bits = e.bits;
        args.levels = levels.data();
        args.levelCount = L;
        args.w = w.data();
        args.nq = nq;
        args.d = d;
        args.acc = acc.data();
        ops.outlierAxpy(args);
        for (int64_t o = 0; o < e.k; ++o) {
          const int64_t c = row.channel[static_cast<size_t>(o)], h = c / d;
          const float x = halfToFloat(row.value[static_cast<size_t>(o)]);
          const float level = levels[static_cast<size_t>(
              h * L + row.codes[static_cast<size_t>(c)])];
          for (int64_t j = 0; j < nq; ++j) {
            const float wj = w[static_cast<size_t>(h * nq + j)];
            want[static_cast<size_t>((h * nq + j) * d + c % d)] +=
                wj * x - wj * level;
          }
        }
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(bitsOf(acc[i]), bitsOf(want[i]))
              << e.what() << " accumulator " << i;
      });
}

/// The outlier kernels' 32-bit gathers: a list whose last channel is 899
/// (head 7 of 128-channel heads) is bounded by (899 + 128) * nq * scale.
TEST(AttendOrder, OutlierIndicesFitBelowTwoToThe31) {
  uint8_t entries[8] = {};
  const uint16_t first[2] = {0x3c00, 5}, last[2] = {0x3c00, 899};
  std::memcpy(entries, first, 4);
  std::memcpy(entries + 4, last, 4);
  const int64_t nq = (int64_t{1} << 31) / (1027 * 16); // 130688
  EXPECT_TRUE(outlierIndicesFit(entries, 2, nq, 128, 16));
  EXPECT_FALSE(outlierIndicesFit(entries, 2, nq + 1, 128, 16));
  EXPECT_TRUE(outlierIndicesFit(entries, 2, nq + 1, 128, 1));
  // Only the last entry counts; an empty list always fits; nq alone past
  // 2^31 never does.
  EXPECT_TRUE(outlierIndicesFit(entries, 1, nq + 1, 128, 16));
  EXPECT_TRUE(outlierIndicesFit(entries, 0, int64_t{1} << 40, 128, 16));
  EXPECT_FALSE(outlierIndicesFit(entries, 1, int64_t{1} << 31, 1, 1));
}

TEST(AttendOrder, OutlierAxpyIsExact) {
  checkOutlierAxpyIsExact(referenceKernels());
  if (HasFatalFailure())
    return;
  FOR_EACH_SIMD_TABLE(checkOutlierAxpyIsExact);
}

/// levelColumns: up to 16 token rows (each its own allocation, two heads)
/// dequantized into columns by one head's per-channel levels, exactly the
/// table entries, on every table: head widths of one, a part of one and
/// two register transposes at 4 bits; a whole tile, part of its first half
/// and part of its second.
void checkLevelColumnsAreTheLevels(const KernelTable &table) {
  for (int bits : {2, 3, 4})
    for (int64_t d : {int64_t{96}, int64_t{128}, int64_t{256}}) {
      const int64_t heads = 2, L = int64_t{1} << bits;
      const AttendOps ops =
          selectAttendOps(table, AttendShape{d, heads, 32, bits, bits});
      Rng rng(static_cast<uint64_t>(31 * bits + d));
      std::vector<std::vector<uint8_t>> tokens;
      std::vector<const uint8_t *> rows;
      for (int64_t r = 0; r < kLevelColumnRows; ++r) {
        std::vector<uint8_t> codes(static_cast<size_t>(heads * d));
        for (uint8_t &c : codes)
          c = static_cast<uint8_t>(rng.uniform() * static_cast<double>(L)) &
              static_cast<uint8_t>(L - 1);
        tokens.emplace_back(static_cast<size_t>(packedBytes(heads * d, bits)));
        packCodesRef(codes.data(), heads * d, bits, tokens.back().data());
      }
      for (const std::vector<uint8_t> &tok : tokens)
        rows.push_back(tok.data());
      std::vector<float> levels(static_cast<size_t>(d * L));
      for (float &x : levels)
        x = static_cast<float>(rng.normal());
      for (int64_t n : {kLevelColumnRows, int64_t{5}, int64_t{11}})
        for (int64_t h = 0; h < heads; ++h) {
          std::vector<float> cols(static_cast<size_t>(d * kLevelColumnRows),
                                  -9.0f);
          LevelColumns args;
          args.rows = rows.data();
          args.n = n;
          args.first = h * d;
          args.bits = bits;
          args.levels = levels.data();
          args.d = d;
          args.cols = cols.data();
          ops.levelColumns(args);
          for (int64_t c = 0; c < d; ++c)
            for (int64_t r = 0; r < n; ++r)
              ASSERT_EQ(
                  bitsOf(cols[static_cast<size_t>(c * kLevelColumnRows + r)]),
                  bitsOf(levels[static_cast<size_t>(
                      c * L + packedCodeAt(rows[static_cast<size_t>(r)],
                                           h * d + c, bits))]))
                  << "bits " << bits << " d " << d << " rows " << n << " head "
                  << h << " channel " << c << " row " << r;
        }
    }
}

TEST(AttendOrder, LevelColumnsAreTheLevels) {
  checkLevelColumnsAreTheLevels(referenceKernels());
  if (HasFatalFailure())
    return;
  FOR_EACH_SIMD_TABLE(checkLevelColumnsAreTheLevels);
}

/// axpyLevelRows: each row's codes looked up in its own level table, then
/// one FMA per element, query vector and row, rows in order.
void checkLevelSumsAreOneFmaPerElementAndRow(const KernelTable &table) {
  for (int bits : {2, 3, 4})
    for (int64_t nq : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{5}}) {
      const AttendOps ops = opsFor(table, bits);
      const Data t = makeData(bits, 50 + bits);
      const int64_t L = int64_t{1} << bits, stride = L + 3, wStride = nq + 1;
      // Tables of exactly L levels at an odd stride; 16 floats of slack
      // after the last, as the stores keep.
      std::vector<float> levels(static_cast<size_t>(t.rows * stride + 16));
      std::vector<float> w(static_cast<size_t>(t.rows * wStride));
      Rng rng(static_cast<uint64_t>(20 + nq));
      for (float &x : levels)
        x = static_cast<float>(rng.normal());
      for (float &x : w)
        x = static_cast<float>(rng.uniform());
      std::vector<const uint8_t *> rows;
      for (int64_t r = 0; r < t.rows; ++r)
        rows.push_back(t.packed.data() + r * t.d * bits / 8);
      std::vector<float> acc(static_cast<size_t>(nq * t.d), 0.25f), want = acc;
      LevelRowsAxpy args;
      args.rows = rows.data();
      args.n = t.rows;
      args.bits = bits;
      args.levels = levels.data();
      args.levelStride = stride;
      args.w = w.data();
      args.wStride = wStride;
      args.nq = nq;
      args.d = t.d;
      args.acc = acc.data();
      ops.axpyLevelRows(args);
      for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t j = 0; j < nq; ++j)
          for (int64_t c = 0; c < t.d; ++c) {
            float &a = want[static_cast<size_t>(j * t.d + c)];
            a = std::fma(w[static_cast<size_t>(r * wStride + j)],
                         levels[static_cast<size_t>(
                             r * stride +
                             packedCodeAt(t.packed.data(), r * t.d + c, bits))],
                         a);
          }
      for (size_t e = 0; e < acc.size(); ++e)
        ASSERT_EQ(bitsOf(acc[e]), bitsOf(want[e]))
            << "bits " << bits << " nq " << nq << " element " << e;
    }
}

TEST(AttendOrder, LevelSumsAreOneFmaPerElementAndRow) {
  checkLevelSumsAreOneFmaPerElementAndRow(referenceKernels());
  if (HasFatalFailure())
    return;
  FOR_EACH_SIMD_TABLE(checkLevelSumsAreOneFmaPerElementAndRow);
}

void checkPerRowLookupSumsAreOneAdditionPerElement(const KernelTable &table) {
  // 8 bits: the reference on every table (one addition per element too).
  for (int bits : {2, 3, 4, 8}) {
    const AttendOps ops = opsFor(table, bits);
    const Data t = makeData(bits, 110 + bits);
    const int64_t nq = 3, E = lutEntries(bits), stride = nq * E + 5;
    // One table per (row, query vector); rows padded apart by 5 floats.
    std::vector<float> luts(static_cast<size_t>(t.rows * stride));
    Rng rng(9);
    for (float &x : luts)
      x = static_cast<float>(rng.normal());
    // Tables are periodic past 2^bits (lutEntries).
    const int64_t L = int64_t{1} << bits;
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t l = L; l < E; ++l)
          luts[static_cast<size_t>(r * stride + j * E + l)] =
              luts[static_cast<size_t>(r * stride + j * E + l % L)];
    std::vector<const uint8_t *> rows;
    for (int64_t r = 0; r < t.rows; ++r)
      rows.push_back(t.packed.data() + r * t.d * bits / 8);
    std::vector<float> acc(static_cast<size_t>(nq * t.d), 0.5f), want = acc;
    LutRowsAxpy args;
    args.rows = rows.data();
    args.n = t.rows;
    args.bits = bits;
    args.luts = luts.data();
    args.lutStride = stride;
    args.nq = nq;
    args.d = t.d;
    args.acc = acc.data();
    ops.axpyLutRows(args);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t c = 0; c < t.d; ++c)
          want[static_cast<size_t>(j * t.d + c)] += luts[static_cast<size_t>(
              r * stride + j * E +
              packedCodeAt(t.packed.data(), r * t.d + c, bits))];
    for (size_t e = 0; e < acc.size(); ++e)
      ASSERT_EQ(bitsOf(acc[e]), bitsOf(want[e]))
          << "bits " << bits << " element " << e;
  }
}

TEST(AttendOrder, PerRowLookupSumsAreOneAdditionPerElement) {
  FOR_EACH_SIMD_TABLE(checkPerRowLookupSumsAreOneAdditionPerElement);
}

/// The canonical weighted sum of coded rows (kernels.h, axpyCodesRows):
/// one FMA per element and row, except 2-bit rows, which go in pairs and
/// add fma(wb, b, wa * a) once per element and pair.
std::vector<float> canonicalAxpyCodes(const Data &t, int bits,
                                      const std::vector<float> &ws,
                                      int64_t wsStride, int64_t G, int64_t nq,
                                      std::vector<float> acc) {
  const int64_t groups = t.d / G;
  auto code = [&](int64_t r, int64_t c) {
    return static_cast<float>(packedCodeAt(t.packed.data(), r * t.d + c, bits));
  };
  auto weight = [&](int64_t r, int64_t j, int64_t c) {
    return ws[static_cast<size_t>(r * wsStride + j * groups + c / G)];
  };
  int64_t r = 0;
  for (; bits == 2 && r + 2 <= t.rows; r += 2)
    for (int64_t j = 0; j < nq; ++j)
      for (int64_t c = 0; c < t.d; ++c)
        acc[static_cast<size_t>(j * t.d + c)] += std::fma(
            weight(r + 1, j, c), code(r + 1, c), weight(r, j, c) * code(r, c));
  for (; r < t.rows; ++r)
    for (int64_t j = 0; j < nq; ++j)
      for (int64_t c = 0; c < t.d; ++c) {
        float &a = acc[static_cast<size_t>(j * t.d + c)];
        a = std::fma(weight(r, j, c), code(r, c), a);
      }
  return acc;
}

TEST(AttendOrder, WeightedSumsOfCodesAreCanonicalOnEveryTable) {
  std::vector<const KernelTable *> tables = {&referenceKernels()};
  for (const KernelTable *k : simdKernelVariants())
    tables.push_back(k);
  for (int bits : {2, 3, 4, 8}) {
    const Data t = makeData(bits, 90 + bits); // 9 rows: a lone last row
    std::vector<const uint8_t *> rows;
    for (int64_t r = 0; r < t.rows; ++r)
      rows.push_back(t.packed.data() + r * t.d * bits / 8);
    for (int64_t G : {int64_t{8}, int64_t{16}, int64_t{32}, int64_t{64}})
      for (int64_t nq : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{5}}) {
        const int64_t groups = t.d / G, wsStride = nq * groups;
        Rng rng(static_cast<uint64_t>(nq * 100 + G));
        std::vector<float> ws(static_cast<size_t>(t.rows * wsStride));
        for (float &x : ws)
          x = static_cast<float>(rng.normal());
        const std::vector<float> start(static_cast<size_t>(nq * t.d), 0.25f);
        const std::vector<float> want =
            canonicalAxpyCodes(t, bits, ws, wsStride, G, nq, start);
        for (const KernelTable *k : tables) {
          std::vector<float> acc = start;
          CodeRowsAxpy args;
          args.rows = rows.data();
          args.n = t.rows;
          args.bits = bits;
          args.ws = ws.data();
          args.wsStride = wsStride;
          args.G = G;
          args.nq = nq;
          args.d = t.d;
          args.acc = acc.data();
          opsFor(*k, bits, G).axpyCodesRows(args);
          for (size_t e = 0; e < acc.size(); ++e)
            ASSERT_EQ(bitsOf(acc[e]), bitsOf(want[e]))
                << k->name << " bits " << bits << " G " << G << " nq " << nq
                << " element " << e;
        }
      }
  }
}

void checkWeightedSumsOfHalfsAreOneFmaPerElementAndRow(
    const KernelTable &table) {
  const Data t = makeData(4, 94);
  const AttendOps ops = opsFor(table, 16); // fp16 rows: no codes
  std::vector<const uint16_t *> halfRows;
  for (int64_t r = 0; r < t.rows; ++r)
    halfRows.push_back(t.half.data() + r * t.d);
  for (int64_t nq : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{5}}) {
    Rng rng(static_cast<uint64_t>(nq));
    std::vector<float> w(static_cast<size_t>(t.rows * nq));
    for (float &x : w)
      x = static_cast<float>(rng.uniform());
    std::vector<float> acc(static_cast<size_t>(nq * t.d), 0.25f), want = acc;
    HalfRowsAxpy args;
    args.rows = halfRows.data();
    args.n = t.rows;
    args.w = w.data();
    args.wStride = nq;
    args.nq = nq;
    args.d = t.d;
    args.acc = acc.data();
    ops.axpyHalfRows(args);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t c = 0; c < t.d; ++c) {
          const size_t e = static_cast<size_t>(j * t.d + c);
          want[e] = std::fma(
              w[static_cast<size_t>(r * nq + j)],
              halfToFloat(t.half[static_cast<size_t>(r * t.d + c)]), want[e]);
        }
    for (size_t e = 0; e < acc.size(); ++e)
      ASSERT_EQ(bitsOf(acc[e]), bitsOf(want[e]))
          << "fp16, nq " << nq << " element " << e;
  }
}

TEST(AttendOrder, WeightedSumsOfHalfsAreOneFmaPerElementAndRow) {
  FOR_EACH_SIMD_TABLE(checkWeightedSumsOfHalfsAreOneFmaPerElementAndRow);
}

} // namespace
