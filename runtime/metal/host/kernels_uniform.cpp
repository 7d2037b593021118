//===- kernels_uniform.cpp - kvq_metal_group_quant / _dequant -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Stage the inputs, run kvq_uniform_quant (one thread per vector) and, for
// the packed layout, kvq_pack_codes (one thread per byte); dequantization is
// one thread per element reading packed or unpacked codes directly.
//
//===----------------------------------------------------------------------===//
#include "guard.h"
#include "kvq/runtime_metal.h"

#include "../kernels/kvq_params.h"
#include "bitpack.h"
#include "dispatch.h"
#include "staging.h"
#include "status.h"
#include "validate.h"

#include <cstring>

using namespace kvq;
using namespace kvq::metal;

kvq_status kvq::metal::packCodes(Staging &st, const Buffer &codes, int64_t rows,
                                 int64_t n, int32_t bits, const Buffer &out,
                                 size_t outOffset, int64_t rowBytes) {
  kvq_metal_pack p{};
  p.rows = static_cast<uint64_t>(rows);
  p.n = static_cast<uint64_t>(n);
  p.row_bytes = static_cast<uint64_t>(rowBytes);
  p.bits = static_cast<uint32_t>(bits);
  if (kvq_status s = checkGrid(rows * rowBytes, "pack codes"))
    return s;
  Arg args[] = {Arg::buf(codes), Arg::buf(out, outOffset), Arg::val(p)};
  return st.device().run("kvq_pack_codes", args, 3,
                         static_cast<uint32_t>(rows * rowBytes),
                         kPlainThreadgroup);
}

kvq_metal_matrix kvq::metal::matrixParams(const Geometry &g, int32_t bits,
                                          kvq_dtype dtype) {
  kvq_metal_matrix p{};
  p.rows = static_cast<uint64_t>(g.rows);
  p.cols = static_cast<uint64_t>(g.cols);
  p.vectors = static_cast<uint64_t>(g.vectors());
  p.group = static_cast<uint32_t>(g.group);
  p.axis = static_cast<uint32_t>(g.axis);
  p.bits = static_cast<uint32_t>(bits);
  p.dtype = static_cast<uint32_t>(dtype);
  return p;
}

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_metal_group_quant(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, const uint8_t *exclude,
    kvq_code_layout layout, uint8_t *codes, uint16_t *scale, uint16_t *zero) {
  return kvq::guarded("kvq_metal_group_quant", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_group_quant", &dev))
      return s;
    Geometry g;
    if (kvq_status s = validateGroupQuantArgs("kvq_metal_group_quant", x, dtype,
                                              rows, cols, axis, group, bits,
                                              layout, codes, scale, zero, &g))
      return s;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(n, "kvq_metal_group_quant"))
      return s;

    Staging st(*dev);
    const Buffer *bx = st.make(n * dtypeSize(dtype), x);
    const Buffer *bex = st.make(exclude ? n : 0, exclude);
    const Buffer *bcodes = st.make(n);
    const Buffer *bscale = st.make(2 * g.vectors());
    const Buffer *bzero = st.make(2 * g.vectors());
    const int64_t packed = packedBytes(n, bits);
    const Buffer *bpacked =
        layout == KVQ_CODES_PACKED ? st.make(packed) : bcodes;
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_metal_group_quant: device "
                                         "allocation failed");
    kvq_metal_matrix p = matrixParams(g, bits, dtype);
    p.has_exclude = exclude ? 1u : 0u;
    Arg args[] = {Arg::buf(*bx),     Arg::buf(*bex),   Arg::buf(*bcodes),
                  Arg::buf(*bscale), Arg::buf(*bzero), Arg::val(p)};
    if (kvq_status s =
            dev->run("kvq_uniform_quant", args, 6,
                     static_cast<uint32_t>(g.vectors()), kPlainThreadgroup))
      return s;
    if (layout == KVQ_CODES_PACKED)
      if (kvq_status s =
              packCodes(st, *bcodes, 1, n, bits, *bpacked, 0, packed))
        return s;
    std::memcpy(codes, bpacked->data, layout == KVQ_CODES_PACKED ? packed : n);
    std::memcpy(scale, bscale->data, 2 * g.vectors());
    std::memcpy(zero, bzero->data, 2 * g.vectors());
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_group_dequant(
    void *ctx, const uint8_t *codes, kvq_code_layout layout,
    const uint16_t *scale, const uint16_t *zero, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, void *out, kvq_dtype dtype) {
  return kvq::guarded("kvq_metal_group_dequant", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_group_dequant", &dev))
      return s;
    Geometry g;
    if (kvq_status s = validateGroupDequantArgs(
            "kvq_metal_group_dequant", codes, layout, scale, zero, rows, cols,
            axis, group, bits, out, dtype, &g))
      return s;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(n, "kvq_metal_group_dequant"))
      return s;

    Staging st(*dev);
    const int64_t codeBytes =
        layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
    const Buffer *bcodes = st.make(codeBytes, codes);
    const Buffer *bscale = st.make(2 * g.vectors(), scale);
    const Buffer *bzero = st.make(2 * g.vectors(), zero);
    const Buffer *bout = st.make(n * dtypeSize(dtype));
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_metal_group_dequant: device "
                                         "allocation failed");
    kvq_metal_matrix p = matrixParams(g, bits, dtype);
    p.layout = static_cast<uint32_t>(layout);
    Arg args[] = {Arg::buf(*bcodes), Arg::buf(*bscale), Arg::buf(*bzero),
                  Arg::buf(*bout), Arg::val(p)};
    if (kvq_status s = dev->run("kvq_uniform_dequant", args, 5,
                                static_cast<uint32_t>(n), kPlainThreadgroup))
      return s;
    std::memcpy(out, bout->data, n * dtypeSize(dtype));
    return KVQ_OK;
  });
}

} // extern "C"
