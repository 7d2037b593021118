//===- huge_page_slab.h - Large payload blocks on 2 MB pages ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Where the host hands no allocator, the large blocks of a cache past its
// first 2 MB (the fp16 cache's pages of 64 tokens, 256 KiB at 8 KV heads x
// 128) come from regions that ask Linux for transparent 2 MB pages
// (madvise). malloc maps such blocks one by one on 4 KB pages: the same
// AVX-512 read loop reads 20-27 GB/s there and 28-32 GB/s on 2 MB pages on
// this project's test machine, and the fp16 cache's attention at 32K
// tokens took about a sixth less time (docs/PERFORMANCE.md, "Pages").
// Small blocks, and every block of a cache under 2 MB, stay with malloc.
//
// A released block is kept for the next block of its size: a cache's
// regions are unmapped when the cache is destroyed, so a cache keeps the
// address space of its largest size until then (docs/RUNTIME.md).
// Not thread-safe: one per cache, as the cache's other state.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_HUGE_PAGE_SLAB_H
#define KVQ_RUNTIME_LAYOUT_HUGE_PAGE_SLAB_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvq {

class HugePageSlab {
public:
  /// Blocks below this size go to malloc: a quarter of a 2 MB page holds
  /// at least four of them.
  static constexpr size_t kMinBlock = size_t{64} << 10;
  /// Nor does a cache holding less than this use the slab: its first
  /// region would cost a whole 2 MB page (a huge page is backed entirely
  /// on first touch) for a few blocks, which many small caches (one per
  /// sequence of a batch) would each pay.
  static constexpr int64_t kMinCacheBytes = int64_t{2} << 20;

  HugePageSlab() = default;
  ~HugePageSlab();
  HugePageSlab(const HugePageSlab &) = delete;
  HugePageSlab &operator=(const HugePageSlab &) = delete;

  /// Whether a block of `size` bytes of a cache holding `liveBytes` comes
  /// from here (on Linux only).
  static bool takes(size_t size, int64_t liveBytes);
  /// A block of `size` bytes (takes(size)), 64-byte aligned, or null when
  /// no region can be mapped (the caller then falls back to malloc).
  void *allocate(size_t size);
  /// Release a block of `size` bytes; false when p is not from here.
  bool release(void *p, size_t size);

private:
  struct Region {
    uint8_t *base;
    size_t bytes, used;
  };
  /// A released block's first bytes: the next free block and its size.
  struct FreeBlock {
    FreeBlock *next;
    size_t size;
  };
  bool owns(const void *p) const;

  std::vector<Region> regions_;
  FreeBlock *free_ = nullptr;
};

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_HUGE_PAGE_SLAB_H
