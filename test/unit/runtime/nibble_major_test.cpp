//===- nibble_major_test.cpp - Nibble-major key blocks and their dots -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The nibble-major layout of KIVI key groups (bitpack.h) against the
// row-major packed stream, and AttendOps::dotNibbleRows of the reference
// and of every SIMD table this CPU runs (AVX-512 and AVX2-only on x86_64,
// NEON under qemu) against a scalar model of kernels.h's canonical order,
// bit for bit: cross-ISA identity of KIVI key scores rests on it.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace kvq;
using kvqtest::Rng;

namespace {

std::vector<uint8_t> randomCodes(int64_t n, int bits, Rng &rng) {
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  for (uint8_t &c : codes)
    c = static_cast<uint8_t>(rng.uniform() * (1 << bits)) & ((1 << bits) - 1);
  return codes;
}

TEST(NibbleMajor, FitsOnlyWholeNibbleRowsOfTwoAndFourBits) {
  EXPECT_TRUE(nibbleMajorFits(128, 2));
  EXPECT_TRUE(nibbleMajorFits(6, 2));
  EXPECT_FALSE(nibbleMajorFits(5, 2));
  EXPECT_TRUE(nibbleMajorFits(5, 4));
  EXPECT_FALSE(nibbleMajorFits(128, 3));
  EXPECT_FALSE(nibbleMajorFits(128, 8));
}

TEST(NibbleMajor, NibbleIOfEveryRowSitsSideBySide) {
  Rng rng(7);
  for (int bits : {2, 4})
    for (int64_t rows : {1, 7, 31, 32}) {
      const int64_t cols = 24;
      const std::vector<uint8_t> codes = randomCodes(rows * cols, bits, rng);
      std::vector<uint8_t> packed(
          static_cast<size_t>(packedBytes(rows * cols, bits)), 0xee);
      packNibbleMajor(codes.data(), rows, cols, bits, packed.data());
      const int perNibble = 4 / bits;
      for (int64_t r = 0; r < rows; ++r) { // a whole row in one walk
        std::vector<uint8_t> row(static_cast<size_t>(cols), 0xee);
        unpackNibbleMajorRow(packed.data(), rows, r, cols, bits, row.data());
        ASSERT_EQ(row, std::vector<uint8_t>(codes.begin() + r * cols,
                                            codes.begin() + (r + 1) * cols))
            << "bits " << bits << " rows " << rows << " row " << r;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const uint8_t want = codes[static_cast<size_t>(r * cols + c)];
          ASSERT_EQ(nibbleMajorCodeAt(packed.data(), rows, r, c, bits), want);
          // The documented position: nibble (c / perNibble) * rows + r,
          // code c % perNibble inside it.
          const int64_t k = (c / perNibble) * rows + r;
          const unsigned x =
              (packed[static_cast<size_t>(k / 2)] >> (k % 2 * 4)) & 15u;
          ASSERT_EQ((x >> (c % perNibble * bits)) & ((1u << bits) - 1), want)
              << "bits " << bits << " rows " << rows << " r " << r << " c "
              << c;
        }
      // Same size as the row-major stream; an odd nibble count leaves the
      // last byte's high nibble zero.
      if (rows * cols * bits / 4 % 2 == 1)
        EXPECT_EQ(packed.back() >> 4, 0);
    }
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The canonical order of dotNibbleRows, written out independently of the
/// runtime: four chains over the nibbles i = a (mod 4), then (S0 + S1) +
/// (S2 + S3); 2-bit terms fma(q[2i+1], hi, q[2i] * lo), 4-bit q[i] * x.
float modelDot(const std::vector<uint8_t> &codes, int64_t cols, int64_t row,
               int64_t c0, const float *q, int64_t d, int bits) {
  float S[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int64_t P = d * bits / 4;
  for (int64_t i = 0; i < P; ++i) {
    float term;
    if (bits == 2) {
      const float lo = codes[static_cast<size_t>(row * cols + c0 + 2 * i)];
      const float hi = codes[static_cast<size_t>(row * cols + c0 + 2 * i + 1)];
      term = std::fma(q[2 * i + 1], hi, q[2 * i] * lo);
    } else {
      term = q[i] * static_cast<float>(
                        codes[static_cast<size_t>(row * cols + c0 + i)]);
    }
    S[i % 4] += term;
  }
  return (S[0] + S[1]) + (S[2] + S[3]);
}

struct NamedOps {
  std::string name;
  AttendOps ops;
};

/// The ops every table gives a cache of head_dim d with `bits`-bit keys.
std::vector<NamedOps> allOps(int64_t d, int bits) {
  const AttendShape shape{d, 3, 0, bits, bits};
  std::vector<NamedOps> out = {
      {"reference", selectAttendOps(referenceKernels(), shape)}};
  for (const KernelTable *t : simdKernelVariants())
    out.push_back({t->name, selectAttendOps(*t, shape)});
  return out;
}

TEST(NibbleMajor, PackWritesEveryByteWhateverTheBufferHeld) {
  // Even row counts take the pairwise path (each byte written once, not
  // cleared first): the same bytes as the model of the layout, nibble
  // k = (c / perNibble) * rows + r at byte k / 2, over any prior contents.
  Rng rng(11);
  for (int bits : {2, 4})
    for (int64_t rows : {1, 2, 3, 6, 32, 64})
      for (int64_t cols : {4, 24, 128}) {
        const std::vector<uint8_t> codes =
            randomCodes(rows * cols, bits, rng);
        const size_t bytes = static_cast<size_t>(packedBytes(rows * cols, bits));
        std::vector<uint8_t> model(bytes, 0);
        const int perNibble = 4 / bits;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t k = (c / perNibble) * rows + r;
            model[static_cast<size_t>(k / 2)] |= static_cast<uint8_t>(
                codes[static_cast<size_t>(r * cols + c)]
                << (k % 2 * 4 + c % perNibble * bits));
          }
        for (uint8_t fill : {0x00, 0xee, 0x11}) {
          std::vector<uint8_t> packed(bytes, fill);
          packNibbleMajor(codes.data(), rows, cols, bits, packed.data());
          ASSERT_EQ(packed, model) << "bits " << bits << " rows " << rows
                                   << " cols " << cols << " fill " << int(fill);
        }
      }
}

TEST(NibbleMajor, RowDotsFollowTheCanonicalOrderOnEveryTable) {
  Rng rng(11);
  // head_dim 6 at 2 bits has 3 nibbles per head: no SIMD version covers it,
  // so the selection gives the reference, which must still match the model.
  for (int bits : {2, 4})
    for (int64_t d : {int64_t{128}, int64_t{8}, int64_t{24}, int64_t{6}})
      for (int64_t n : {int64_t{32}, int64_t{31}, int64_t{7}, int64_t{40}}) {
        const int64_t heads = 3, cols = heads * d;
        const std::vector<uint8_t> codes = randomCodes(n * cols, bits, rng);
        std::vector<uint8_t> packed(
            static_cast<size_t>(packedBytes(n * cols, bits)));
        packNibbleMajor(codes.data(), n, cols, bits, packed.data());
        for (int64_t nq : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{6}, int64_t{9}}) {
          std::vector<float> q(static_cast<size_t>(nq * d));
          for (float &x : q)
            x = static_cast<float>(rng.normal());
          for (int64_t r0 : {int64_t{0}, int64_t{1}, int64_t{2}})
            for (const NamedOps &o : allOps(d, bits))
              for (int64_t h = 0; h < heads; ++h) {
                const int64_t m = n - r0, stride = nq + 3;
                std::vector<float> out(static_cast<size_t>(m * stride), -7.0f);
                NibbleRowsDot args;
                args.codes = packed.data();
                args.n = n;
                args.r0 = r0;
                args.m = m;
                args.nib0 = h * d * bits / 4;
                args.bits = bits;
                args.q = q.data();
                args.nq = nq;
                args.d = d;
                args.out = out.data();
                args.outStride = stride;
                o.ops.dotNibbleRows(args);
                for (int64_t r = 0; r < m; ++r)
                  for (int64_t j = 0; j < stride; ++j) {
                    const float got = out[static_cast<size_t>(r * stride + j)];
                    if (j >= nq) { // untouched between the rows' outputs
                      ASSERT_EQ(got, -7.0f);
                      continue;
                    }
                    const float want = modelDot(codes, cols, r0 + r, h * d,
                                                q.data() + j * d, d, bits);
                    ASSERT_EQ(bitsOf(got), bitsOf(want))
                        << o.name << " bits " << bits << " d " << d << " n "
                        << n << " nq " << nq << " r0 " << r0 << " h " << h
                        << " row " << r << " query " << j;
                  }
              }
        }
      }
}

#if defined(__x86_64__)
TEST(NibbleMajor, X86OffersTheAvx2OnlyTableNextToAvx512) {
  // The differential test above covers every table in simdKernelVariants;
  // on an AVX-512 machine that must include the AVX2-only one.
  const std::vector<const KernelTable *> v = simdKernelVariants();
  ASSERT_FALSE(v.empty()) << "x86_64 machines running kvq have AVX2";
  EXPECT_STREQ(v.back()->name, "avx2");
  ASSERT_LE(v.size(), 2u);
  if (v.size() == 2)
    EXPECT_STREQ(v[0]->name, "avx512");
}
#endif

} // namespace
