//===- payload.h - Exact-size payload blocks and transactions ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every byte of cache payload (codes, scales, levels, outliers, fp16 rows) is
// its own exact-size allocation through the configured allocator, so the
// bytes kvq_cache_stats reports are exactly the bytes allocated. A Txn makes
// an update all-or-nothing: new blocks are released on failure, and blocks
// being replaced are released only on commit.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_PAYLOAD_H
#define KVQ_RUNTIME_LAYOUT_PAYLOAD_H

#include "huge_page_slab.h"
#include "spare_blocks.h"
#include "kvq/runtime.h"

#include <cstdint>
#include <vector>

namespace kvq {

/// One payload allocation.
struct Blk {
  uint8_t *p = nullptr;
  int64_t size = 0;
  explicit operator bool() const { return p != nullptr; }
};

/// The cache's allocator plus a live-byte counter.
class Payload {
public:
  explicit Payload(const kvq_allocator &allocator) : allocator_(allocator) {}
  /// size bytes, or a null block when the allocator fails.
  Blk allocate(int64_t size);
  void release(Blk &block);
  int64_t liveBytes() const { return live_; }

private:
  kvq_allocator allocator_;
  int64_t live_ = 0;
  /// Without a host allocator: the large blocks, on 2 MB pages.
  HugePageSlab slab_;
  /// Without a host allocator: released small blocks, for the next ones.
  SpareBlocks spare_;
};

/// All-or-nothing group of payload changes.
class Txn {
public:
  explicit Txn(Payload &payload) : payload_(payload) {}
  ~Txn() {
    if (!done_)
      rollback();
  }
  Txn(const Txn &) = delete;
  Txn &operator=(const Txn &) = delete;

  /// A new block; on failure returns a null block and marks the Txn failed.
  Blk allocate(int64_t size);
  /// Release `block` when (and only when) the transaction commits.
  void retire(const Blk &block) { retired_.push_back(block); }
  bool failed() const { return failed_; }
  /// Release the retired blocks; the new ones now belong to the cache.
  void commit();
  /// Release every block allocated through this Txn.
  void rollback();

private:
  Payload &payload_;
  std::vector<Blk> fresh_, retired_;
  bool failed_ = false, done_ = false;
};

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_PAYLOAD_H
