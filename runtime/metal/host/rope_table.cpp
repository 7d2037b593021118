//===- rope_table.cpp - Angle tables of a pre-RoPE Metal cache ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Both tables are read out of kvq::Rope's own computation, so the kernels
// see the CPU's floats: Rope::angles(p) leaves the block row of p's block
// in Cursor::cosHi / sinHi, and for p = j < 256 (block 0, whose row is
// cos 0 = 1, sin 0 = 0) its cos/sin are exactly the low table's row j
// (1 * cl - 0 * sl == cl, 0 * cl + 1 * sl == sl in IEEE float).
//
//===----------------------------------------------------------------------===//
#include "rope_table.h"

#include "status.h"

#include <new>
#include <vector>

using namespace kvq;
using namespace kvq::metal;

namespace {

/// Write one row of (cos, sin) pairs.
void putRow(float *to, const std::vector<float> &cos,
            const std::vector<float> &sin) {
  for (size_t i = 0; i < cos.size(); ++i) {
    to[2 * i] = cos[i];
    to[2 * i + 1] = sin[i];
  }
}

} // namespace

kvq_status RopeLow::make(const kvq_config &cfg, Device &dev,
                         std::shared_ptr<const RopeLow> &out) {
  out.reset();
  if (cfg.rope_style == KVQ_ROPE_NONE)
    return KVQ_OK;
  std::shared_ptr<RopeLow> low;
  try {
    low.reset(new RopeLow(cfg, dev));
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: out of memory");
  }
  const size_t rowFloats = static_cast<size_t>(2 * low->pairs_);
  if (!dev.allocate(4 * rowFloats * kRopeBlock, low->buffer_))
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  float *to = static_cast<float *>(low->buffer_.data);
  try {
    Rope::Cursor cursor;
    for (int64_t j = 0; j < kRopeBlock; ++j) {
      low->rope_.angles(j, cursor);
      putRow(to + rowFloats * j, cursor.cos, cursor.sin);
    }
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: out of memory");
  }
  out = std::move(low);
  return KVQ_OK;
}

bool RopeTable::cover(int64_t tokens) {
  if (!low_)
    return true;
  const int64_t rows = (tokens + kRopeBlock - 1) / kRopeBlock;
  if (rows <= rows_)
    return true;
  const int64_t rowFloats = 2 * low_->pairs();
  if (!high_.reserve(static_cast<size_t>(4 * rowFloats * rows)))
    return false;
  float *to = reinterpret_cast<float *>(high_.bytes());
  Rope::Cursor cursor;
  for (int64_t m = rows_; m < rows; ++m) {
    low_->rope().angles(m * kRopeBlock, cursor);
    putRow(to + rowFloats * m, cursor.cosHi, cursor.sinHi);
  }
  rows_ = rows;
  return true;
}
