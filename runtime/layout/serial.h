//===- serial.h - Little-endian byte streams of the saved cache -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The saved cache format (saved_cache.cpp, layer_section.cpp; both the CPU
// and the Metal cache) is written and read through these: every integer is
// written byte by byte, little-endian, whatever the host; a reader never reads
// past its end and reports a short read instead. Payload blocks are copied as
// bytes: their fp16 fields are host-order uint16, and both supported hosts
// (x86_64, aarch64) are little-endian (static_assert below), so they are
// little-endian in the file too.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_SERIAL_H
#define KVQ_RUNTIME_LAYOUT_SERIAL_H

#include <cstdint>
#include <cstring>

namespace kvq {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "payload blocks are saved as bytes: a big-endian host would "
              "have to swap their fp16 fields");

/// FNV-1a, 64 bits: the checksum of a saved cache.
inline uint64_t fnv1a64(const uint8_t *p, int64_t n,
                        uint64_t h = 0xcbf29ce484222325ull) {
  for (int64_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/// Appends to out (or only counts bytes when out is null).
class ByteWriter {
public:
  explicit ByteWriter(uint8_t *out) : out_(out) {}
  void u8(uint8_t v) { uint(v, 1); }
  void u16(uint16_t v) { uint(v, 2); }
  void u32(uint32_t v) { uint(v, 4); }
  void u64(uint64_t v) { uint(v, 8); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void bytes(const uint8_t *p, int64_t n) {
    if (out_ && n > 0)
      std::memcpy(out_ + size_, p, static_cast<size_t>(n));
    size_ += n;
  }
  int64_t size() const { return size_; }
  /// A size pass (no buffer): what is written is only counted.
  bool sizing() const { return out_ == nullptr; }

private:
  void uint(uint64_t v, int n) {
    if (out_)
      for (int i = 0; i < n; ++i)
        out_[size_ + i] = static_cast<uint8_t>(v >> (8 * i));
    size_ += n;
  }
  uint8_t *out_;
  int64_t size_ = 0;
};

/// Reads [p, p + n); every read fails (returns false or null) rather than
/// pass the end.
class ByteReader {
public:
  ByteReader(const uint8_t *p, int64_t n) : p_(p), n_(n) {}
  int64_t remaining() const { return n_ - pos_; }
  bool u16(uint16_t &v) { return uint(v, 2); }
  bool u32(uint32_t &v) { return uint(v, 4); }
  bool u64(uint64_t &v) { return uint(v, 8); }
  bool f32(float &v) {
    uint32_t bits;
    if (!u32(bits))
      return false;
    std::memcpy(&v, &bits, 4);
    return true;
  }
  /// n bytes in place, or null when fewer remain (n < 0 is null too).
  const uint8_t *bytes(int64_t n) {
    if (n < 0 || n > remaining())
      return nullptr;
    const uint8_t *at = p_ + pos_;
    pos_ += n;
    return at;
  }

private:
  template <class T> bool uint(T &v, int n) {
    const uint8_t *b = bytes(n);
    if (!b)
      return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i)
      x |= uint64_t{b[i]} << (8 * i);
    v = static_cast<T>(x);
    return true;
  }
  const uint8_t *p_;
  int64_t n_, pos_ = 0;
};

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_SERIAL_H
