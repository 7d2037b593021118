//===- page_buffer.h - A read buffer on 2 MB pages --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The bound of every attention row is the best read bandwidth a tuned loop
// reaches on this machine. On Linux that loop is faster on 2 MB pages than
// on 4 KB ones: fewer TLB misses, and the hardware prefetcher does not
// stop at every 4 KB boundary (AMD EPYC Zen 5 guest, 2026-12-03, the same
// AVX-512 loop: 20 GB/s on 4 KB pages, 30-32 GB/s on 2 MB pages). A
// std::vector of 512 MiB gets 4 KB pages unless transparent huge pages are
// "always", so the baseline also reads a buffer that asks for 2 MB pages
// (madvise), and reports how much of it the kernel granted.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_BENCH_PAGE_BUFFER_H
#define KVQ_TOOLS_KVQ_BENCH_PAGE_BUFFER_H

#include "huge_page_slab.h"

#include <cstddef>
#include <cstdint>

namespace kvqbench {

/// `bytes` of uint64_t words, each 1, on 2 MB pages where the kernel grants
/// them (a region of the runtime's HugePageSlab, the one that maps the
/// caches' large blocks); elsewhere (not Linux, or no region could be
/// mapped) an ordinary allocation.
class HugePageBuffer {
public:
  explicit HugePageBuffer(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer &) = delete;
  HugePageBuffer &operator=(const HugePageBuffer &) = delete;

  const uint64_t *words() const { return words_; }
  size_t count() const { return bytes_ / 8; }
  /// Fraction of the buffer the kernel backs with 2 MB pages (0 when that
  /// cannot be read, e.g. under qemu-user or outside Linux).
  double hugeShare() const { return hugeShare_; }
  bool valid() const { return words_ != nullptr; }

private:
  kvq::HugePageSlab slab_;
  uint64_t *words_ = nullptr;
  bool fromSlab_ = false;
  size_t bytes_ = 0;
  double hugeShare_ = 0;
};

} // namespace kvqbench

#endif // KVQ_TOOLS_KVQ_BENCH_PAGE_BUFFER_H
