//===- rope_table.h - Angle tables of a pre-RoPE Metal cache ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A Metal cache with a RoPE rotates its keys inside the fetch and attention
// kernels (kernels/kvq_rope.h) with the CPU cache's angles: kvq::Rope
// (runtime/kernels/rope/rope.h) computes them on the host and the kernels read
// them from two device tables of (cos, sin) float pairs, [rows][d/2][2]:
//  - RopeLow, one per cache (shared by its layers and forks, immutable):
//    the 256 rows of positions 0..255, Rope's low table;
//  - RopeTable::high, one per layer: the row of position 256 m for every
//    block m below the layer's length, Rope's block row, grown by update
//    and load (d/2 pairs per 256 tokens).
// The kernels combine them with Rope::angles' float operations.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_ROPE_TABLE_H
#define KVQ_RUNTIME_METAL_HOST_ROPE_TABLE_H

#include "device_array.h"
#include "rope.h"

#include <cstdint>
#include <memory>
#include <utility>

namespace kvq::metal {

/// Positions per row of the low table, Rope's block (rope.h: p = 256 m + j).
constexpr int64_t kRopeBlock = 256;

class RopeLow {
public:
  /// The low table of cfg's RoPE on dev: null (and KVQ_OK) when cfg has no
  /// RoPE; KVQ_ERR_OUT_OF_MEMORY when the device or host is out of memory.
  static kvq_status make(const kvq_config &cfg, Device &dev,
                         std::shared_ptr<const RopeLow> &out);
  ~RopeLow() { dev_.release(buffer_); }
  RopeLow(const RopeLow &) = delete;
  RopeLow &operator=(const RopeLow &) = delete;

  const Rope &rope() const { return rope_; }
  int32_t style() const { return style_; }
  int64_t pairs() const { return pairs_; }
  const Buffer &buffer() const { return buffer_; }

private:
  RopeLow(const kvq_config &cfg, Device &dev)
      : rope_(cfg), dev_(dev), style_(cfg.rope_style),
        pairs_(cfg.head_dim / 2) {}

  const Rope rope_;
  Device &dev_;
  const int32_t style_;
  const int64_t pairs_;
  Buffer buffer_;
};

/// The RoPE state of one layer: the cache's low table and the layer's
/// block rows. Disabled (style 0, null buffers) without a RoPE.
class RopeTable {
public:
  RopeTable(std::shared_ptr<const RopeLow> low, Device &dev)
      : low_(std::move(low)), high_(dev) {}

  /// kvq_rope_style for the kernels' view.
  uint32_t style() const {
    return low_ ? static_cast<uint32_t>(low_->style()) : 0u;
  }
  const std::shared_ptr<const RopeLow> &low() const { return low_; }
  /// Block rows for every position below `tokens`; false when the device
  /// is out of memory (the rows already there are kept). No-op without a
  /// RoPE.
  bool cover(int64_t tokens);
  /// Become a copy of o's rows; false when the device is out of memory.
  bool copyFrom(const RopeTable &o) {
    if (!high_.copyFrom(o.high_))
      return false;
    rows_ = o.rows_;
    return true;
  }
  /// Kernel arguments: the low table, then the block rows.
  Arg lowArg() const { return Arg::buf(low_ ? low_->buffer() : empty_); }
  Arg highArg() const { return Arg::buf(high_.buffer()); }

private:
  std::shared_ptr<const RopeLow> low_;
  DeviceArray high_;
  int64_t rows_ = 0;
  Buffer empty_;
};

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_ROPE_TABLE_H
