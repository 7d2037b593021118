//===- page_buffer.cpp - A read buffer on 2 MB pages ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
#include "page_buffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace kvqbench;

namespace {

#if defined(__linux__)
/// AnonHugePages of the mapping that starts at `start`, in bytes (-1 when
/// /proc/self/smaps has no such mapping or cannot be read).
long long anonHugeBytes(const void *start) {
  FILE *f = std::fopen("/proc/self/smaps", "r");
  if (!f)
    return -1;
  char line[512];
  bool inMapping = false;
  long long found = -1;
  const auto want = reinterpret_cast<uintptr_t>(start);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    // A mapping's header line: "lo-hi perms ...", both hexadecimal.
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
        std::strchr(line, '-') < std::strchr(line, ' ')) {
      inMapping = lo <= want && want < hi;
      continue;
    }
    long long kb = 0;
    if (inMapping && std::sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
      found = (found < 0 ? 0 : found) + kb * 1024;
  }
  std::fclose(f);
  return found;
}
#endif

} // namespace

HugePageBuffer::HugePageBuffer(size_t bytes) : bytes_(bytes / 8 * 8) {
  words_ = static_cast<uint64_t *>(slab_.allocate(bytes_));
  fromSlab_ = words_ != nullptr;
  if (!words_)
    words_ = static_cast<uint64_t *>(std::malloc(bytes_));
  if (!words_)
    return;
  for (size_t i = 0; i < count(); ++i) // touch every page: faults now
    words_[i] = 1;
#if defined(__linux__)
  if (fromSlab_) {
    const long long huge = anonHugeBytes(words_);
    hugeShare_ = huge > 0 ? static_cast<double>(huge) / bytes_ : 0.0;
    if (hugeShare_ > 1.0)
      hugeShare_ = 1.0;
  }
#endif
}

HugePageBuffer::~HugePageBuffer() {
  if (fromSlab_)
    slab_.release(words_, bytes_); // the slab unmaps its region after
  else
    std::free(words_);
}
