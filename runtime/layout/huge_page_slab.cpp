//===- huge_page_slab.cpp - Large payload blocks on 2 MB pages ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
#include "huge_page_slab.h"
#include "asan_poison.h"

#include <algorithm>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

using namespace kvq;

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
/// The largest region mapped at once: regions double from one 2 MB page
/// (a small cache maps little) up to this.
constexpr size_t kMaxRegion = size_t{64} << 20;

constexpr size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

#if defined(__linux__)
/// `bytes` (a multiple of 2 MB) of fresh memory starting on a 2 MB boundary
/// and advised as huge pages, or null.
uint8_t *mapAligned(size_t bytes) {
  const size_t len = bytes + kHugePage;
  void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return nullptr;
  auto *raw = static_cast<uint8_t *>(m);
  const uintptr_t at = roundUp(reinterpret_cast<uintptr_t>(raw), kHugePage);
  auto *base = reinterpret_cast<uint8_t *>(at);
  // Return the unaligned head and the tail: the region is exactly bytes.
  if (base > raw)
    munmap(raw, static_cast<size_t>(base - raw));
  if (raw + len > base + bytes)
    munmap(base + bytes, static_cast<size_t>(raw + len - (base + bytes)));
#if defined(MADV_HUGEPAGE)
  madvise(base, bytes, MADV_HUGEPAGE); // a hint: 4 KB pages still work
#endif
  return base;
}
#endif

} // namespace

bool HugePageSlab::takes(size_t size, int64_t liveBytes) {
#if defined(__linux__)
  return size >= kMinBlock && liveBytes >= kMinCacheBytes;
#else
  (void)size;
  (void)liveBytes;
  return false;
#endif
}

HugePageSlab::~HugePageSlab() {
#if defined(__linux__)
  for (const Region &r : regions_) {
    KVQ_UNPOISON(r.base, r.bytes);
    munmap(r.base, r.bytes);
  }
#endif
}

bool HugePageSlab::owns(const void *p) const {
  const auto *b = static_cast<const uint8_t *>(p);
  for (const Region &r : regions_)
    if (b >= r.base && b < r.base + r.used)
      return true;
  return false;
}

void *HugePageSlab::allocate(size_t size) {
#if defined(__linux__)
  const size_t need = roundUp(size, 64);
  // A released block of the same rounded size first (exact fit only: the
  // stores allocate few distinct large sizes).
  FreeBlock *prev = nullptr;
  for (FreeBlock *f = free_; f;) {
    KVQ_UNPOISON(f, sizeof(FreeBlock));
    FreeBlock *next = f->next;
    const size_t fsize = f->size;
    KVQ_POISON(f, sizeof(FreeBlock));
    if (fsize == need) {
      if (prev) {
        KVQ_UNPOISON(prev, sizeof(FreeBlock));
        prev->next = next;
        KVQ_POISON(prev, sizeof(FreeBlock));
      } else {
        free_ = next;
      }
      KVQ_UNPOISON(f, size);
      return f;
    }
    prev = f;
    f = next;
  }
  if (regions_.empty() || regions_.back().bytes - regions_.back().used < need) {
    // Reserve the vector's slot first: a failed push must not leak a map.
    if (regions_.size() == regions_.capacity())
      regions_.reserve(2 * regions_.size() + 4);
    const size_t grow = std::min(kMaxRegion, kHugePage << regions_.size());
    const size_t bytes = roundUp(std::max(grow, need), kHugePage);
    uint8_t *base = mapAligned(bytes);
    if (!base)
      return nullptr;
    KVQ_POISON(base, bytes);
    regions_.push_back({base, bytes, 0});
  }
  Region &r = regions_.back();
  uint8_t *p = r.base + r.used;
  r.used += need;
  KVQ_UNPOISON(p, size);
  return p;
#else
  (void)size;
  return nullptr;
#endif
}

bool HugePageSlab::release(void *p, size_t size) {
  if (!owns(p))
    return false;
  auto *f = static_cast<FreeBlock *>(p);
  KVQ_UNPOISON(f, sizeof(FreeBlock));
  f->next = free_;
  f->size = roundUp(size, 64);
  free_ = f;
  KVQ_POISON(f, roundUp(size, 64));
  return true;
}
