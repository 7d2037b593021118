//===- store_io.h - Loading saved payload blocks ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The checks on saved bytes (fp16 finite, uniform groups that dequantize
// inside the range an update can produce, counts that fit the bytes left),
// used by the section readers (layer_section.cpp), and the copy of checked
// bytes into a payload block, used by the stores' load(). A section is
// read and checked whole before a store allocates for it, so a short or
// corrupt file fails before any allocation sized by it.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_STORE_IO_H
#define KVQ_RUNTIME_LAYOUT_STORE_IO_H

#include "config.h"
#include "fp16.h"
#include "layer_section.h"
#include "payload.h"
#include "serial.h"
#include "status.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace kvq {

/// fp16 bits that are neither Inf nor NaN.
inline bool halfFinite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

/// n fp16 values at p, all finite.
inline bool halvesFinite(const uint8_t *p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!halfFinite(read16(p, i)))
      return false;
  return true;
}

/// A uniform group (fp16 scale, zero) with codes of `bits` bits dequantizes
/// into [zero, zero + (2^bits - 1) * scale]. An update produces scale >= 0
/// and a range within the fp16 range plus its rounding; a saved group may
/// reach at most twice that (so attention keeps its overflow margin).
inline bool uniformGroupOk(uint16_t scale, uint16_t zero, int bits) {
  if (!halfFinite(scale) || !halfFinite(zero))
    return false;
  const float s = halfToFloat(scale), z = halfToFloat(zero);
  return !(s < 0.0f) &&
         std::fabs(z + static_cast<float>((1 << bits) - 1) * s) <= 131008.0f;
}

/// The status of saved bytes that fail a check.
constexpr kvq_status kCorrupt = KVQ_ERR_CORRUPT_DATA;

/// A layer's token count: at most limits::kLayerTokens, and at most what
/// the rest of the layer can hold at `minBytes` (> 0) per token, so that
/// nothing sized by it is allocated for a short file.
inline kvq_status loadTokenCount(ByteReader &r, const char *what,
                                 int64_t minBytes, int64_t *n) {
  uint64_t v = 0;
  if (!r.u64(v))
    return fail(kCorrupt, "%s: no token count", what);
  if (v > static_cast<uint64_t>(limits::kLayerTokens) ||
      v > static_cast<uint64_t>(r.remaining() / minBytes))
    return fail(kCorrupt, "%s: %llu tokens do not fit in %lld bytes", what,
                static_cast<unsigned long long>(v),
                static_cast<long long>(r.remaining()));
  *n = static_cast<int64_t>(v);
  return KVQ_OK;
}

/// The next `size` bytes of r, or null (and a CORRUPT status in *s) when
/// the layer ends first.
inline const uint8_t *takeBytes(ByteReader &r, int64_t size, const char *what,
                                kvq_status *s) {
  const uint8_t *p = r.bytes(size);
  if (!p)
    *s = fail(kCorrupt, "%s: %lld bytes expected, %lld left", what,
              static_cast<long long>(size),
              static_cast<long long>(r.remaining()));
  return p;
}

/// The bytes of a payload block, as a section holds them.
inline Span spanOf(const Blk &b) { return {b.p, b.size}; }

/// A new payload block holding the parts one after another (checked bytes
/// of a section): KVQ_ERR_OUT_OF_MEMORY when the allocator fails.
inline kvq_status copyBlock(Payload &payload, std::initializer_list<Span> parts,
                            Blk &out) {
  int64_t size = 0;
  for (const Span &s : parts)
    size += s.n;
  out = payload.allocate(size);
  if (!out)
    return fail(KVQ_ERR_OUT_OF_MEMORY,
                "kvq_cache_load: allocation of %lld bytes failed",
                static_cast<long long>(size));
  int64_t at = 0;
  for (const Span &s : parts) {
    std::memcpy(out.p + at, s.p, static_cast<size_t>(s.n));
    at += s.n;
  }
  return KVQ_OK;
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_STORE_IO_H
