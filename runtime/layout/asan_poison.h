//===- asan_poison.h - Poisoning of memory a cache keeps for reuse -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Blocks a cache keeps after releasing them (huge_page_slab.h,
// spare_blocks.h) are poisoned under AddressSanitizer, as freed heap
// memory is: a store reading a released block is still reported.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_ASAN_POISON_H
#define KVQ_RUNTIME_LAYOUT_ASAN_POISON_H

#if defined(__SANITIZE_ADDRESS__)
#define KVQ_SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVQ_SLAB_ASAN 1
#endif
#endif

#if defined(KVQ_SLAB_ASAN)
#include <sanitizer/asan_interface.h>
#define KVQ_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KVQ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KVQ_POISON(p, n) ((void)(p), (void)(n))
#define KVQ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif // KVQ_RUNTIME_LAYOUT_ASAN_POISON_H
