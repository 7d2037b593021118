//===- shim_test.cpp - The MSL shim and its grid executor -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Barriers and simdgroup functions synchronise for real (fibers), a fiber
// keeps its registers and rounding mode across switches, partial
// simdgroups reduce over their active lanes, divergent barriers and
// barriers in kernels registered as plain abort, and the strict address
// spaces are distinct types.
//
//===----------------------------------------------------------------------===//
#include <metal_stdlib>

#include "shim_test_kernels.metal"

// The shim's Metal keywords end here, before any host header.
#include "shim/undef.h"

#include "emu/launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

using kvq::metal::Arg;
using kvq::metal::Buffer;
using kvq::metal::emu::Id;
using kvq::metal::emu::Launch;

namespace {

Buffer wrap(void *p, size_t n) {
  Buffer b;
  b.data = p;
  b.size = n;
  return b;
}

TEST(MetalShim, BarrierOrdersDeviceMemoryWithinAThreadgroup) {
  const uint32_t n = 96, tg = 48;
  std::vector<uint32_t> slots(n), out(n);
  Buffer bs = wrap(slots.data(), n * 4), bo = wrap(out.data(), n * 4);
  Arg args[] = {Arg::buf(bs), Arg::buf(bo)};
  uint64_t before = kvq::shim::fiberSwitches();
  ASSERT_TRUE((Launch<&shim_rotate, Id::Gid, Id::Tid, Id::TgSize>::run(
      args, 2, n, tg, true)));
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t base = i - i % tg;
    EXPECT_EQ(out[i], (base + (i % tg + 1) % tg) * 10) << i;
  }
  // Every thread was suspended at the barrier at least once.
  EXPECT_GE(kvq::shim::fiberSwitches() - before, 2u * n);
}

/// Five values, with the loop's own state and the caller's, stay live across
/// every barrier of the fiber body below: more than x86_64's six
/// callee-saved registers hold, so some live on the stack.
uint64_t mixed(uint32_t tid, bool atBarriers) {
  uint64_t a = tid * 0x9E3779B97F4A7C15ull, b = tid + 1, c = ~a, d = b << 7,
           e = a ^ d;
  for (int round = 0; round < 4; ++round) {
    if (atBarriers)
      kvq::shim::barrier();
    a = a * 3 + b;
    b ^= c;
    c += d;
    d = d * 5 + e;
    e ^= a >> 3;
  }
  return a ^ b ^ c ^ d ^ e;
}

struct FiberResults {
  uint64_t mixed[64];
  int rounding[64];
  uint32_t thirdBits[64];
};

/// Odd threads round upward and even ones downward, set before the first
/// barrier and read after the last.
void roundingAndRegisters(void *closure, const kvq::shim::ThreadIds &ids) {
  auto &r = *static_cast<FiberResults *>(closure);
  std::fesetround(ids.tid % 2 ? FE_UPWARD : FE_DOWNWARD);
  r.mixed[ids.tid] = mixed(ids.tid, /*atBarriers=*/true);
  volatile float one = 1.0f, three = 3.0f;
  float third = one / three;
  std::memcpy(&r.thirdBits[ids.tid], &third, 4);
  r.rounding[ids.tid] = std::fegetround();
}

TEST(MetalShim, FibersKeepTheirRegistersAndRoundingMode) {
  FiberResults r{};
  uint64_t before = kvq::shim::fiberSwitches();
  kvq::shim::dispatch(64, 64, /*cooperative=*/true, roundingAndRegisters, &r);
  EXPECT_GE(kvq::shim::fiberSwitches() - before, 4u * 2 * 64);
  EXPECT_EQ(std::fegetround(), FE_TONEAREST); // the caller's stays its own
  for (uint32_t t = 0; t < 64; ++t) {
    SCOPED_TRACE(t);
    EXPECT_EQ(r.mixed[t], mixed(t, /*atBarriers=*/false));
    EXPECT_EQ(r.rounding[t], t % 2 ? FE_UPWARD : FE_DOWNWARD);
    // 1/3 lies between 0x3eaaaaaa and 0x3eaaaaab.
    EXPECT_EQ(r.thirdBits[t], t % 2 ? 0x3eaaaaabu : 0x3eaaaaaau);
  }
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
/// A pointer to a local of a function that has returned (noinline: the
/// local lives in that function's own frame).
__attribute__((noinline)) int *escapedLocal(uint32_t v) {
  int local[4] = {int(v), 1, 2, 3};
  int *volatile p = local;
  return p;
}

void useAfterReturn(void *, const kvq::shim::ThreadIds &ids) {
  int *p = escapedLocal(ids.tid);
  kvq::shim::barrier();
  if (ids.tid == 5) {
    volatile int x = *p;
    (void)x;
  }
}

void barrierOnly(void *, const kvq::shim::ThreadIds &) { kvq::shim::barrier(); }

// Fibers hand their fake stacks on to the next fiber on the same stack
// (executor.cpp): the sanitizer must still see a use after return in a
// fiber that runs on a handed-on fake stack.
TEST(MetalShimDeathTest, SanitizerSeesAUseAfterReturnOnAReusedFiberStack) {
  EXPECT_DEATH(
      {
        for (int round = 0; round < 3; ++round)
          kvq::shim::dispatch(64, 64, true, barrierOnly, nullptr);
        kvq::shim::dispatch(64, 64, true, useAfterReturn, nullptr);
      },
      "stack-use-after-return");
}
#endif
#endif

TEST(MetalShim, SimdgroupFunctionsReducePerSimdgroup) {
  const uint32_t n = 80; // two full simdgroups and a partial one of 16
  std::vector<float> x(n), sum(n), mx(n);
  std::vector<uint32_t> prefix(n);
  for (uint32_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((i * 7) % 13);
  Buffer bx = wrap(x.data(), n * 4), bsum = wrap(sum.data(), n * 4),
         bmx = wrap(mx.data(), n * 4), bp = wrap(prefix.data(), n * 4);
  Arg args[] = {Arg::buf(bx), Arg::buf(bsum), Arg::buf(bmx), Arg::buf(bp)};
  ASSERT_TRUE((Launch<&shim_simd, Id::Gid>::run(args, 4, n, 64, true)));
  for (uint32_t i = 0; i < n; ++i) {
    // Threadgroups of 64: simdgroups [0,32) [32,64) [64,80).
    uint32_t first = i / 32 * 32, last = std::min(first + 32, n);
    float s = 0, m = 0;
    uint32_t p = 0;
    for (uint32_t j = first; j < last; ++j) {
      s += x[j];
      m = std::max(m, x[j]);
      if (j < i)
        p += j;
    }
    EXPECT_EQ(sum[i], s) << i;
    EXPECT_EQ(mx[i], m) << i;
    EXPECT_EQ(prefix[i], p) << i;
  }
}

TEST(MetalShim, LanesThatReturnedDoNotTakePart) {
  std::vector<float> out(32, -1.0f);
  uint32_t n = 20;
  Buffer bo = wrap(out.data(), 32 * 4);
  Arg args[] = {Arg::buf(bo), Arg::val(n)};
  ASSERT_TRUE(
      (Launch<&shim_simd_partial, Id::Gid>::run(args, 2, 32, 32, true)));
  for (uint32_t i = 0; i < 32; ++i)
    EXPECT_EQ(out[i], i < n ? 20.0f : -1.0f) << i;
}

TEST(MetalShimDeathTest, DivergentBarrierAborts) {
  std::vector<uint32_t> out(8);
  Buffer bo = wrap(out.data(), 32);
  Arg args[] = {Arg::buf(bo)};
  EXPECT_DEATH(
      (Launch<&shim_divergent_barrier, Id::Gid>::run(args, 1, 8, 8, true)),
      "divergent");
}

TEST(MetalShimDeathTest, BarrierInAPlainKernelAborts) {
  std::vector<uint32_t> slots(4), out(4);
  Buffer bs = wrap(slots.data(), 16), bo = wrap(out.data(), 16);
  Arg args[] = {Arg::buf(bs), Arg::buf(bo)};
  EXPECT_DEATH((Launch<&shim_rotate, Id::Gid, Id::Tid, Id::TgSize>::run(
                   args, 2, 4, 4, false)),
               "registered as plain");
}

TEST(MetalShim, ArgumentListsAreChecked) {
  std::vector<uint32_t> out(4);
  Buffer bo = wrap(out.data(), 16);
  Arg wrongCount[] = {Arg::buf(bo)};
  EXPECT_FALSE((Launch<&shim_rotate, Id::Gid, Id::Tid, Id::TgSize>::run(
      wrongCount, 1, 4, 4, true)));
  uint32_t n = 4;
  Arg wrongKind[] = {Arg::val(n), Arg::val(n)};
  EXPECT_FALSE(
      (Launch<&shim_simd_partial, Id::Gid>::run(wrongKind, 2, 4, 4, true)));
}

TEST(MetalShim, StrictModeGivesDistinctAddressSpaces) {
#if !defined(KVQ_SHIM_NO_STRICT)
  using DevicePtr = __attribute__((address_space(1))) float *;
  using ConstantPtr = __attribute__((address_space(2))) float *;
  using ThreadgroupPtr = __attribute__((address_space(3))) float *;
  static_assert(!std::is_same_v<DevicePtr, float *>);
  static_assert(!std::is_convertible_v<DevicePtr, float *>);
  static_assert(!std::is_convertible_v<DevicePtr, ConstantPtr>);
  static_assert(!std::is_convertible_v<ThreadgroupPtr, DevicePtr>);
  // The kernels' own parameter types carry them.
  using ConstantUint = __attribute__((address_space(2))) uint32_t &;
  static_assert(std::is_same_v<decltype(&shim_simd_partial),
                               void (*)(DevicePtr, ConstantUint, uint32_t)>);
  SUCCEED();
#else
  GTEST_SKIP() << "built without strict address spaces";
#endif
}

} // namespace
