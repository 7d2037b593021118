//===- spare_blocks_test.cpp - Released small blocks kept for reuse -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A kept block comes back for the next block of its exact size only, the
// byte and size limits hold (a refused block stays the caller's), and a
// Payload without a host allocator reuses its released small blocks while
// counting only live bytes.
//
//===----------------------------------------------------------------------===//
#include "payload.h"
#include "spare_blocks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

using namespace kvq;

namespace {

TEST(SpareBlocks, ReturnsAKeptBlockForItsExactSizeOnly) {
  SpareBlocks spare;
  void *a = std::malloc(4096);
  ASSERT_TRUE(spare.keep(a, 4096));
  EXPECT_EQ(spare.take(4095), nullptr);
  EXPECT_EQ(spare.take(4097), nullptr);
  EXPECT_EQ(spare.take(4096), a);
  EXPECT_EQ(spare.take(4096), nullptr);
  std::free(a);
}

TEST(SpareBlocks, RefusesLargeBlocksAndBlocksPastTheLimits) {
  SpareBlocks spare;
  void *big = std::malloc(SpareBlocks::kMaxBlock);
  EXPECT_FALSE(spare.keep(big, SpareBlocks::kMaxBlock));
  std::free(big);
  // Bytes: blocks of 32 KiB up to kMaxBytes, then none.
  const size_t size = size_t{32} << 10;
  std::vector<void *> kept;
  for (size_t b = 0; b + size <= SpareBlocks::kMaxBytes; b += size) {
    kept.push_back(std::malloc(size));
    ASSERT_TRUE(spare.keep(kept.back(), size));
  }
  void *extra = std::malloc(size);
  EXPECT_FALSE(spare.keep(extra, size));
  std::free(extra);
  // Sizes: with every bin holding a block, a new size is refused; once a
  // bin is empty, it takes the new size.
  SpareBlocks sizes;
  for (size_t s = 1; s <= SpareBlocks::kMaxSizes; ++s)
    ASSERT_TRUE(sizes.keep(std::malloc(s), s));
  void *other = std::malloc(100);
  EXPECT_FALSE(sizes.keep(other, 100));
  std::free(sizes.take(1));
  EXPECT_TRUE(sizes.keep(other, 100));
  EXPECT_EQ(sizes.take(100), other);
  std::free(other);
} // the destructors free what they keep

TEST(SpareBlocks, PayloadReusesReleasedSmallBlocksAndCountsLiveBytes) {
  Payload payload(kvq_allocator{});
  Blk a = payload.allocate(4096);
  uint8_t *p = a.p;
  payload.release(a);
  EXPECT_EQ(payload.liveBytes(), 0);
  Blk b = payload.allocate(4096);
  EXPECT_EQ(b.p, p);
  EXPECT_EQ(payload.liveBytes(), 4096);
  payload.release(b);
}

} // namespace
