//===- quantize_ref_grid.cpp - Reference whole-matrix kernels -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The scalar quantizers behind the stateless C entry points (uniform and
// NUQ codes and back), on a validated grid:
// the oracle every SIMD table is differentially tested against. They read
// fp16/f32 buffers in place and never allocate.
//
//===----------------------------------------------------------------------===//
#include "bitpack.h"
#include "fp16.h"
#include "kernels.h"

#include <cmath>
#include <cstring>

using namespace kvq;

namespace {

uint8_t codeAt(const uint8_t *codes, int layout, int64_t i, int bits) {
  return layout == KVQ_CODES_PACKED ? packedCodeAt(codes, i, bits) : codes[i];
}

void setCode(uint8_t *codes, int layout, int64_t i, int bits, uint8_t code) {
  if (layout == KVQ_CODES_UNPACKED) {
    codes[i] = code;
    return;
  }
  // The packed buffer was zeroed first, so OR-ing the bits in is enough.
  int64_t bit = i * bits;
  uint32_t shifted = static_cast<uint32_t>(code) << (bit & 7);
  codes[bit >> 3] |= static_cast<uint8_t>(shifted & 0xffu);
  if ((bit & 7) + bits > 8)
    codes[(bit >> 3) + 1] |= static_cast<uint8_t>(shifted >> 8);
}

void clearCodes(uint8_t *codes, int layout, int64_t n, int bits) {
  if (layout == KVQ_CODES_PACKED)
    std::memset(codes, 0, static_cast<size_t>(packedBytes(n, bits)));
}

} // namespace

void kvq::groupQuantRef(const GroupQuantArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const uint8_t *exclude = a.exclude;
  uint8_t *codes = a.codes;
  uint16_t *scale = a.scale, *zero = a.zero;
  const float maxCode = static_cast<float>((1 << bits) - 1);
  const int64_t stride = g.stride();
  clearCodes(codes, layout, g.rows * g.cols, bits);
  for (int64_t v = 0; v < g.vectors(); ++v) {
    int64_t base = g.base(v);
    bool any = false;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * stride;
      if (exclude && exclude[e])
        continue;
      float val = loadElement(x, dtype, e);
      lo = any ? (val < lo ? val : lo) : val;
      hi = any ? (val > hi ? val : hi) : val;
      any = true;
    }
    uniformParams(lo, hi, any, bits, &scale[v], &zero[v]);
    float s = halfToFloat(scale[v]), z = halfToFloat(zero[v]);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * stride;
      setCode(codes, layout, e, bits,
              uniformCode(loadElement(x, dtype, e), s, z, maxCode));
    }
  }
}

void kvq::groupDequantRef(const GroupDequantArgs &a) {
  const uint8_t *codes = a.codes;
  const int layout = a.layout, bits = a.bits;
  const uint16_t *scale = a.scale, *zero = a.zero;
  const Grid &g = a.grid;
  void *out = a.out;
  const kvq_dtype dtype = a.dtype;
  const int64_t stride = g.stride();
  for (int64_t v = 0; v < g.vectors(); ++v) {
    float s = halfToFloat(scale[v]), z = halfToFloat(zero[v]);
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * stride;
      storeElement(out, dtype, e,
                   uniformDequant(codeAt(codes, layout, e, bits), s, z));
    }
  }
}

void kvq::nuqQuantRef(const NuqQuantArgs &a) {
  const void *x = a.x;
  const kvq_dtype dtype = a.dtype;
  const Grid &g = a.grid;
  const int bits = a.bits, layout = a.layout;
  const uint16_t *levels = a.levels;
  uint8_t *codes = a.codes;
  const int count = 1 << bits;
  const int64_t stride = g.stride();
  clearCodes(codes, layout, g.rows * g.cols, bits);
  float table[kMaxLevels];
  for (int64_t v = 0; v < g.vectors(); ++v) {
    for (int l = 0; l < count; ++l)
      table[l] = halfToFloat(levels[v * count + l]);
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * stride;
      setCode(codes, layout, e, bits,
              static_cast<uint8_t>(
                  nearestLevel(table, count, loadElement(x, dtype, e))));
    }
  }
}

void kvq::nuqDequantRef(const NuqDequantArgs &a) {
  const uint8_t *codes = a.codes;
  const int layout = a.layout, bits = a.bits;
  const uint16_t *levels = a.levels;
  const Grid &g = a.grid;
  void *out = a.out;
  const kvq_dtype dtype = a.dtype;
  const int count = 1 << bits;
  const int64_t stride = g.stride();
  for (int64_t v = 0; v < g.vectors(); ++v) {
    int64_t base = g.base(v);
    for (int64_t i = 0; i < g.group; ++i) {
      int64_t e = base + i * stride;
      storeElement(
          out, dtype, e,
          halfToFloat(levels[v * count + codeAt(codes, layout, e, bits)]));
    }
  }
}
