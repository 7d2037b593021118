//===- blocks.h - Byte layouts of the quantized payload blocks --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every kind of quantized block a store keeps (and the saved format and
// the Metal host's arenas reproduce), written once. ggml fixes its blocks
// at compile time (block_q4_0: a scale and 32 codes); kvq's blocks are
// sized by the configuration (channels C, group G, bits), so each kind is
// a layout computed from the configuration plus a view that names the
// fields of a block's bytes. Fixed-size records are structs whose sizes
// are static_asserted. Multi-byte fields are host-order and may be
// unaligned (blocks are packed back to back): the views use memcpy.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_BLOCKS_H
#define KVQ_RUNTIME_LAYOUT_BLOCKS_H

#include "bitpack.h"
#include "block_layout.h"
#include "kvq/runtime.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvq {

/// One sparse outlier of a KVQuant row: its exact fp16 value and its
/// channel (16 bits, hence kv_heads * head_dim <= 65535).
struct OutlierEntry {
  uint16_t value;
  uint16_t channel;
};
static_assert(sizeof(OutlierEntry) == KVQ_OUTLIER_BYTES &&
                  offsetof(OutlierEntry, value) ==
                      2 * kvq_outlier_value_half(0) &&
                  offsetof(OutlierEntry, channel) ==
                      2 * kvq_outlier_channel_half(0),
              "OutlierEntry is not the entry of block_layout.h");
constexpr int64_t kOutlierBytes = sizeof(OutlierEntry);

/// An offset of block_layout.h as the stores' signed sizes.
constexpr int64_t blockOffset(kvq_block_index offset) {
  return static_cast<int64_t>(offset);
}

/// A list of n outlier entries at p.
template <class Byte> struct OutlierList {
  Byte *p;
  OutlierEntry at(int64_t o) const {
    OutlierEntry e;
    std::memcpy(&e, p + kOutlierBytes * o, sizeof e);
    return e;
  }
  void set(int64_t o, OutlierEntry e) const {
    std::memcpy(p + kOutlierBytes * o, &e, sizeof e);
  }
};

/// A uniform block: `pairs` fp16 scales, then `pairs` fp16 zeros, then
/// packed codes. KIVI's key group (pairs = C: one (scale, zero) per channel
/// over the group's coded tokens) and value row (pairs = C / G: one per
/// group of G channels) are uniform blocks.
struct UniformLayout {
  int64_t pairs = 0;
  int64_t codeBytes = 0;
  int64_t codesOffset() const {
    return blockOffset(
        kvq_uniform_codes_offset(static_cast<kvq_block_index>(pairs)));
  }
  int64_t bytes() const { return codesOffset() + codeBytes; }
};

/// A view of one uniform block's bytes (const or writable).
template <class Byte> struct UniformBlock {
  Byte *p;
  int64_t pairs;
  uint16_t scale(int64_t i) const { return half(scaleAt(i)); }
  uint16_t zero(int64_t i) const { return half(zeroAt(i)); }
  void setScale(int64_t i, uint16_t v) const { setHalf(scaleAt(i), v); }
  void setZero(int64_t i, uint16_t v) const { setHalf(zeroAt(i), v); }
  /// The scales and then the zeros: 2 * pairs consecutive fp16 values.
  Byte *scalesThenZeros() const { return p; }
  Byte *codes() const { return p + UniformLayout{pairs, 0}.codesOffset(); }

private:
  static int64_t scaleAt(int64_t i) {
    return blockOffset(kvq_uniform_scale_half(static_cast<kvq_block_index>(i)));
  }
  int64_t zeroAt(int64_t i) const {
    return blockOffset(kvq_uniform_zero_half(
        static_cast<kvq_block_index>(pairs), static_cast<kvq_block_index>(i)));
  }
  uint16_t half(int64_t i) const {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  }
  void setHalf(int64_t i, uint16_t v) const { std::memcpy(p + 2 * i, &v, 2); }
};
template <class Byte>
UniformBlock<Byte> uniformBlock(Byte *p, const UniformLayout &l) {
  return {p, l.pairs};
}

inline int64_t channelsOf(const kvq_config &c) {
  return int64_t{c.num_kv_heads} * c.head_dim;
}

/// KIVI key group with `coded` non-sink rows (sink rows have no codes).
inline UniformLayout kiviKeyGroupLayout(const kvq_config &c, int64_t coded) {
  const int64_t C = channelsOf(c);
  return {C, packedBytes(coded * C, c.key_bits)};
}

/// KIVI value row (one token).
inline UniformLayout kiviValueRowLayout(const kvq_config &c) {
  const int64_t C = channelsOf(c);
  return {C / c.group_size, packedBytes(C, c.value_bits)};
}

/// A KVQuant key row: C packed level indices, then its outliers. The
/// levels live in the segment's table.
struct KvquantKeyRowLayout {
  int64_t codeBytes = 0;
  int64_t outliersOffset() const { return codeBytes; }
  int64_t bytes(int64_t outliers) const {
    return codeBytes + kOutlierBytes * outliers;
  }
};
inline KvquantKeyRowLayout kvquantKeyRowLayout(const kvq_config &c) {
  return {packedBytes(channelsOf(c), c.key_bits)};
}

/// A KVQuant value row: per head its 2^bits fp16 levels, then C packed
/// level indices, then its outliers.
struct KvquantValueRowLayout {
  int64_t heads = 0, bits = 0;
  int64_t codeBytes = 0;
  /// fp16 levels of all heads.
  int64_t levels() const {
    return blockOffset(kvq_level_half(static_cast<kvq_block_index>(heads),
                                      static_cast<kvq_block_index>(bits), 0));
  }
  int64_t codesOffset() const {
    return blockOffset(
        kvq_kvquant_value_codes_offset(static_cast<kvq_block_index>(heads),
                                       static_cast<kvq_block_index>(bits)));
  }
  int64_t outliersOffset() const { return codesOffset() + codeBytes; }
  int64_t bytes(int64_t outliers) const {
    return outliersOffset() + kOutlierBytes * outliers;
  }
};
inline KvquantValueRowLayout kvquantValueRowLayout(const kvq_config &c) {
  return {c.num_kv_heads, c.value_bits,
          packedBytes(channelsOf(c), c.value_bits)};
}

/// A KVQuant key segment's table: per channel its 2^bits fp16 levels, then
/// (frozen levels only) per channel the fp16 outlier threshold that screens
/// decode keys.
struct KvquantTableLayout {
  int64_t channels = 0, bits = 0;
  bool thresholds = false;
  int64_t levels() const { return int64_t{1} << bits; }
  int64_t levelAt(int64_t c, int64_t l) const {
    return blockOffset(kvq_level_half(static_cast<kvq_block_index>(c),
                                      static_cast<kvq_block_index>(bits),
                                      static_cast<kvq_block_index>(l)));
  }
  int64_t thresholdAt(int64_t c) const { return levelAt(channels, 0) + c; }
  int64_t bytes() const {
    return 2 * (levelAt(channels, 0) + (thresholds ? channels : 0));
  }
};
inline KvquantTableLayout kvquantTableLayout(const kvq_config &c) {
  return {channelsOf(c), c.key_bits, c.refit_interval == 0};
}

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_BLOCKS_H
