//===- fp16_convert_test.cpp - floatToHalfN against floatToHalf -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_cache_update converts f32 K/V input with the branch-free floatToHalfN;
// the scalar floatToHalf is the reference it must match bit for bit, on
// every input class: floats whose fp16 result is subnormal (where the
// rounding position moves), the rounding bits of every normal binade, the
// overflow edge, infinities, NaNs and float subnormals, at every vector
// tail length. Each SIMD table's floatToHalfN (F16C on x86_64) is held to
// the same bits on the same inputs.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

using namespace kvq;

namespace {

using ConvertN = void (*)(const float *, int64_t, uint16_t *);

/// The reference floatToHalfN, then each SIMD table's.
std::vector<std::pair<const char *, ConvertN>> converters() {
  std::vector<std::pair<const char *, ConvertN>> out = {
      {"reference", floatToHalfN}};
  for (const KernelTable *t : simdKernelVariants())
    out.push_back({t->name, t->floatToHalfN});
  return out;
}

/// Every converter over bit patterns, compared with floatToHalf one by one.
void expectSame(const std::vector<uint32_t> &bits) {
  std::vector<float> in(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    in[i] = bitsToFloat(bits[i]);
  for (const auto &[name, convert] : converters()) {
    std::vector<uint16_t> out(in.size());
    convert(in.data(), static_cast<int64_t>(in.size()), out.data());
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], floatToHalf(in[i]))
          << name << ": float bits 0x" << std::hex << bits[i];
  }
}

} // namespace

TEST(Fp16Convert, FloatsWithASubnormalHalfResult) {
  // Exponents 95..113 round at mantissa bit 126 - exponent (the fp16
  // subnormals and the smallest normal): every mantissa prefix above that
  // bit with the bits below at zero, one, just below, at and just above
  // halfway, all ones and one random pattern; then random floats of every
  // exponent up to 113 (zero and float subnormals included).
  std::mt19937 rng(3);
  std::vector<uint32_t> bits;
  for (uint32_t e = 95; e <= 113; ++e) {
    const uint32_t s = std::min<uint32_t>(126 - e, 23); // bits below
    const uint32_t h = 1u << (s - 1), mask = (1u << s) - 1;
    for (uint32_t top = 0; top < (1u << (23 - s)); ++top)
      for (uint32_t low : {0u, 1u, h - 1, h, h + 1, mask,
                           static_cast<uint32_t>(rng()) & mask})
        for (uint32_t sign : {0u, 0x80000000u})
          bits.push_back(sign | (e << 23) | (top << s) | low);
  }
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t e = rng() % 114;
    bits.push_back((e << 23) | (rng() & 0x807fffffu));
  }
  expectSame(bits);
}

TEST(Fp16Convert, RoundingBitsOfEveryBinade) {
  // Every sign, exponent and kept 10-bit mantissa, with the 13 dropped
  // bits at zero, just below, at and just above the halfway point, all
  // ones, and one random pattern.
  std::mt19937 rng(5);
  std::vector<uint32_t> bits;
  for (uint32_t top = 0; top < (1u << 19); ++top) {
    const uint32_t head = top << 13;
    for (uint32_t low : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu,
                         static_cast<uint32_t>(rng() & 0x1fffu)})
      bits.push_back(head | low);
  }
  expectSame(bits);
}

TEST(Fp16Convert, OverflowInfinitiesAndNaNs) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> bits;
  for (float f : {65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, 1e30f,
                  std::numeric_limits<float>::max(), inf,
                  std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), 0.0f})
    for (float s : {1.0f, -1.0f})
      bits.push_back(floatBits(s * f));
  // NaNs with every class of payload, both signs.
  for (uint32_t payload : {1u, 0x3ffu, 0x2000u, 0x400000u, 0x7fffffu})
    for (uint32_t sign : {0u, 0x80000000u})
      bits.push_back(sign | 0x7f800000u | payload);
  expectSame(bits);
}

TEST(Fp16Convert, EveryTailLengthAndOffset) {
  // Lengths 0..70 at offsets 0..3: the vector body and its scalar tail
  // each see every remainder; elements outside [0, n) stay untouched.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  std::vector<float> in(80);
  for (float &f : in)
    f = u(rng) * (rng() % 2 ? 1.0f : 1e-6f);
  for (const auto &[name, convert] : converters())
    for (int64_t off = 0; off < 4; ++off)
      for (int64_t n = 0; n <= 70; ++n) {
        std::vector<uint16_t> out(80, 0xabcd);
        convert(in.data() + off, n, out.data() + off);
        for (int64_t i = 0; i < 80; ++i)
          ASSERT_EQ(out[static_cast<size_t>(i)],
                    i >= off && i < off + n
                        ? floatToHalf(in[static_cast<size_t>(i)])
                        : uint16_t{0xabcd})
              << name << ": n " << n << " offset " << off << " element " << i;
      }
}
