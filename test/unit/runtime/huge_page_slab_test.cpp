//===- huge_page_slab_test.cpp - Large blocks on 2 MB pages ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The slab behind the default allocation of large payload blocks: blocks
// are disjoint, aligned and writable, a released block is reused for the
// next block of its rounded size only, foreign pointers are refused, and a
// Payload routes by block and cache size (and not at all with a host
// allocator).
//
//===----------------------------------------------------------------------===//
#include "huge_page_slab.h"
#include "payload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

using namespace kvq;

namespace {

constexpr size_t kBlock = HugePageSlab::kMinBlock * 4; // 256 KiB, an fp16 page

TEST(HugePageSlab, TakesOnlyLargeBlocksOfLargeCachesOnLinux) {
  constexpr int64_t big = HugePageSlab::kMinCacheBytes;
#if defined(__linux__)
  EXPECT_FALSE(HugePageSlab::takes(HugePageSlab::kMinBlock - 1, big));
  EXPECT_TRUE(HugePageSlab::takes(HugePageSlab::kMinBlock, big));
  // A cache under one huge page keeps malloc, large blocks included.
  EXPECT_FALSE(HugePageSlab::takes(kBlock, big - 1));
  EXPECT_FALSE(HugePageSlab::takes(kBlock, 0));
#else
  EXPECT_FALSE(HugePageSlab::takes(kBlock, big));
#endif
}

#if defined(__linux__)
TEST(HugePageSlab, BlocksAreDisjointAlignedAndHoldTheirBytes) {
  HugePageSlab slab;
  std::vector<std::pair<uint8_t *, size_t>> blocks;
  // More than one region (the first is one 2 MB page), odd sizes included.
  for (int i = 0; i < 40; ++i) {
    const size_t n = kBlock + static_cast<size_t>(i % 3) * 1000;
    auto *p = static_cast<uint8_t *>(slab.allocate(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, i + 1, n);
    blocks.push_back({p, n});
  }
  std::vector<std::pair<uint8_t *, size_t>> sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    EXPECT_LE(sorted[i - 1].first + sorted[i - 1].second, sorted[i].first);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, n] = blocks[i];
    EXPECT_EQ(p[0], static_cast<uint8_t>(i + 1));
    EXPECT_EQ(p[n - 1], static_cast<uint8_t>(i + 1));
  }
  for (const auto &[p, n] : blocks)
    EXPECT_TRUE(slab.release(p, n));
}

TEST(HugePageSlab, ReusesAReleasedBlockOfTheSameSizeOnly) {
  HugePageSlab slab;
  void *a = slab.allocate(kBlock);
  void *b = slab.allocate(kBlock);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(slab.release(a, kBlock));
  // Another size does not take a's place; the same size does.
  void *c = slab.allocate(2 * kBlock);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c, a);
  EXPECT_EQ(slab.allocate(kBlock), a);
  EXPECT_TRUE(slab.release(a, kBlock));
  EXPECT_TRUE(slab.release(b, kBlock));
  EXPECT_TRUE(slab.release(c, 2 * kBlock));
}

TEST(HugePageSlab, RefusesPointersItDidNotHandOut) {
  HugePageSlab slab;
  void *own = slab.allocate(kBlock);
  ASSERT_NE(own, nullptr);
  void *heap = std::malloc(kBlock);
  ASSERT_NE(heap, nullptr);
  EXPECT_FALSE(slab.release(heap, kBlock));
  std::free(heap);
  EXPECT_TRUE(slab.release(own, kBlock));
}
#endif

/// A host allocator counting its calls.
struct Counting {
  int allocs = 0, releases = 0;
  static void *alloc(void *u, size_t n) {
    ++static_cast<Counting *>(u)->allocs;
    return std::malloc(n);
  }
  static void release(void *u, void *p, size_t) {
    ++static_cast<Counting *>(u)->releases;
    std::free(p);
  }
};

TEST(HugePageSlab, APayloadWithAHostAllocatorNeverUsesIt) {
  Counting count;
  kvq_allocator a{&Counting::alloc, &Counting::release, &count};
  Payload payload(a);
  Blk big = payload.allocate(static_cast<int64_t>(kBlock));
  Blk small = payload.allocate(100);
  ASSERT_TRUE(big);
  ASSERT_TRUE(small);
  EXPECT_EQ(count.allocs, 2); // both went to the host
  EXPECT_EQ(payload.liveBytes(), static_cast<int64_t>(kBlock) + 100);
  payload.release(big);
  payload.release(small);
  EXPECT_EQ(count.releases, 2);
  EXPECT_EQ(payload.liveBytes(), 0);
}

TEST(HugePageSlab, ADefaultPayloadRoutesAndCountsEveryKindOfBlock) {
  // Past kMinCacheBytes large blocks come from the slab: a cache of 16
  // large blocks (4 MiB) and small ones has both kinds of each size, and
  // each must be released where it came from (the sanitizer build reports
  // a free() of a slab block or a munmap of a malloc'd one).
  Payload payload(kvq_allocator{});
  std::vector<Blk> blocks;
  int64_t want = 0;
  for (int i = 0; i < 16; ++i)
    for (int64_t n : {int64_t{100}, static_cast<int64_t>(kBlock), int64_t{5000},
                      static_cast<int64_t>(kBlock) + 7}) {
      blocks.push_back(payload.allocate(n));
      ASSERT_TRUE(blocks.back());
      std::memset(blocks.back().p, i, static_cast<size_t>(n));
      want += n;
    }
  EXPECT_GE(want, 2 * HugePageSlab::kMinCacheBytes);
  EXPECT_EQ(payload.liveBytes(), want);
  // Release every other block, reallocate them (reusing slab blocks), then
  // release everything.
  for (size_t i = 0; i < blocks.size(); i += 2) {
    const int64_t n = blocks[i].size;
    payload.release(blocks[i]);
    blocks[i] = payload.allocate(n);
    ASSERT_TRUE(blocks[i]);
    std::memset(blocks[i].p, 0x5a, static_cast<size_t>(n));
  }
  EXPECT_EQ(payload.liveBytes(), want);
  for (size_t i = 1; i < blocks.size(); i += 2)
    EXPECT_EQ(blocks[i].p[blocks[i].size - 1], static_cast<uint8_t>(i / 4))
        << "a reused block overlaps block " << i;
  for (Blk &b : blocks)
    payload.release(b);
  EXPECT_EQ(payload.liveBytes(), 0);
}

} // namespace
