//===- spare_blocks.h - Released small payload blocks kept for reuse -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Where the host hands no allocator, small blocks come from malloc, and an
// append releases many of one size soon after allocating them (the fp16
// cache's per-token rows when their page fills). Given back to malloc they
// are often returned to the kernel (the heap's top is trimmed), and the
// next rows fault their pages in again: a quarter of a one-token fp16
// append's time on this project's VM. A few of the latest released blocks
// are kept here, by exact size, for the next allocation of that size.
// Not thread-safe: one per cache, as the cache's other state.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_SPARE_BLOCKS_H
#define KVQ_RUNTIME_LAYOUT_SPARE_BLOCKS_H

#include "huge_page_slab.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvq {

class SpareBlocks {
public:
  /// Only blocks below this size are kept: the larger ones of a large
  /// cache come from its HugePageSlab, which keeps its own.
  static constexpr size_t kMaxBlock = HugePageSlab::kMinBlock;
  /// Bytes kept at most (four fp16 pages' worth of rows at 8 x 128), and
  /// distinct sizes kept at once.
  static constexpr size_t kMaxBytes = size_t{1} << 20;
  static constexpr size_t kMaxSizes = 8;

  SpareBlocks() = default;
  ~SpareBlocks();
  SpareBlocks(const SpareBlocks &) = delete;
  SpareBlocks &operator=(const SpareBlocks &) = delete;

  /// A kept block of exactly `size` bytes, or null.
  void *take(size_t size);
  /// Keep the malloc'd block p of `size` bytes; false (p not kept) when it
  /// is not below kMaxBlock or would pass the limits.
  bool keep(void *p, size_t size) noexcept;

private:
  struct Bin {
    size_t size;
    std::vector<void *> blocks;
  };
  std::vector<Bin> bins_;
  size_t bytes_ = 0;
};

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_SPARE_BLOCKS_H
