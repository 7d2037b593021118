//===- payload.cpp - Exact-size payload blocks and transactions -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Allocation through kvq_config.allocator; when unset, large blocks from
// the cache's HugePageSlab (2 MB pages) and the others from the cache's
// spare blocks or malloc.
//
//===----------------------------------------------------------------------===//
#include "payload.h"

#include <cstdlib>

using namespace kvq;

Blk Payload::allocate(int64_t size) {
  Blk block;
  if (size <= 0)
    return block;
  const auto bytes = static_cast<size_t>(size);
  void *p = nullptr;
  if (allocator_.alloc) {
    p = allocator_.alloc(allocator_.user, bytes);
  } else {
    if (HugePageSlab::takes(bytes, live_))
      p = slab_.allocate(bytes);
    else
      p = spare_.take(bytes);
    if (!p) // a small cache, no region could be mapped, or no spare
      p = std::malloc(bytes);
  }
  if (!p)
    return block;
  block.p = static_cast<uint8_t *>(p);
  block.size = size;
  live_ += size;
  return block;
}

void Payload::release(Blk &block) {
  if (!block.p)
    return;
  if (allocator_.release)
    allocator_.release(allocator_.user, block.p,
                       static_cast<size_t>(block.size));
  else if (!slab_.release(block.p, static_cast<size_t>(block.size)) &&
           !spare_.keep(block.p, static_cast<size_t>(block.size)))
    std::free(block.p);
  live_ -= block.size;
  block = Blk();
}

Blk Txn::allocate(int64_t size) {
  if (failed_)
    return Blk();
  if (fresh_.size() == fresh_.capacity()) // may throw before the allocation
    fresh_.reserve(2 * fresh_.size() + 8);
  Blk block = payload_.allocate(size);
  if (!block)
    failed_ = true;
  else
    fresh_.push_back(block);
  return block;
}

void Txn::commit() {
  for (Blk &b : retired_)
    payload_.release(b);
  fresh_.clear();
  retired_.clear();
  done_ = true;
}

void Txn::rollback() {
  for (Blk &b : fresh_)
    payload_.release(b);
  fresh_.clear();
  retired_.clear();
  done_ = true;
}
