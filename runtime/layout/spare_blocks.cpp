//===- spare_blocks.cpp - Released small payload blocks kept for reuse ----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
#include "spare_blocks.h"
#include "asan_poison.h"

#include <cstdlib>

using namespace kvq;

SpareBlocks::~SpareBlocks() {
  for (Bin &b : bins_)
    for (void *p : b.blocks) {
      KVQ_UNPOISON(p, b.size);
      std::free(p);
    }
}

void *SpareBlocks::take(size_t size) {
  for (Bin &b : bins_)
    if (b.size == size && !b.blocks.empty()) {
      void *p = b.blocks.back();
      b.blocks.pop_back();
      bytes_ -= size;
      KVQ_UNPOISON(p, size);
      return p;
    }
  return nullptr;
}

bool SpareBlocks::keep(void *p, size_t size) noexcept {
  if (size >= kMaxBlock || size > kMaxBytes - bytes_)
    return false;
  Bin *bin = nullptr;
  for (Bin &b : bins_)
    if (b.size == size)
      bin = &b;
  // An empty bin gives its place to a new size.
  for (Bin &b : bins_)
    if (!bin && b.blocks.empty()) {
      b.size = size;
      bin = &b;
    }
  try {
    if (!bin) {
      if (bins_.size() == kMaxSizes)
        return false;
      bins_.push_back({size, {}});
      bin = &bins_.back();
    }
    bin->blocks.push_back(p);
  } catch (...) { // no room for the record: the caller frees p
    return false;
  }
  bytes_ += size;
  KVQ_POISON(p, size);
  return true;
}
