//===- kernels_nuq.cpp - kvq_metal_nuq_fit / _quant / _dequant ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Stage, check and dispatch the non-uniform kernels of nuq.metal. The fit
// gives each GPU thread its own slice of a device scratch buffer, so the
// caller's one-vector scratch is only checked (for ABI parity), not used.
//
//===----------------------------------------------------------------------===//
#include "guard.h"
#include "kvq/runtime_metal.h"

#include "bitpack.h"
#include "dispatch.h"
#include "status.h"

#include <cstring>

using namespace kvq;
using namespace kvq::metal;

extern "C" {

KVQ_RT_EXPORT kvq_status
kvq_metal_nuq_fit(void *ctx, const void *x, kvq_dtype dtype, int64_t rows,
                  int64_t cols, kvq_axis axis, int32_t group, int32_t bits,
                  int32_t iters, const uint8_t *exclude, float *scratch,
                  int64_t scratch_floats, uint16_t *levels) {
  return kvq::guarded("kvq_metal_nuq_fit", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_nuq_fit", &dev))
      return s;
    Geometry g;
    if (kvq_status s = validateNuqFitArgs("kvq_metal_nuq_fit", x, dtype, rows,
                                          cols, axis, group, bits, iters,
                                          scratch, scratch_floats, levels, &g))
      return s;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(g.vectors(), "kvq_metal_nuq_fit"))
      return s;

    const int64_t count = int64_t{1} << bits;
    Staging st(*dev);
    const Buffer *bx = st.make(n * dtypeSize(dtype), x);
    const Buffer *bex = st.make(exclude ? n : 0, exclude);
    const Buffer *bscratch = st.make(4 * n);
    const Buffer *blevels = st.make(2 * g.vectors() * count);
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_nuq_fit: device allocation failed");
    kvq_metal_matrix p = matrixParams(g, bits, dtype);
    p.has_exclude = exclude ? 1u : 0u;
    p.iters = static_cast<uint32_t>(iters);
    Arg args[] = {Arg::buf(*bx), Arg::buf(*bex), Arg::buf(*bscratch),
                  Arg::buf(*blevels), Arg::val(p)};
    if (kvq_status s =
            dev->run("kvq_nuq_fit", args, 5, static_cast<uint32_t>(g.vectors()),
                     kPlainThreadgroup))
      return s;
    std::memcpy(levels, blevels->data, 2 * g.vectors() * count);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_nuq_quant(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, int32_t bits, const uint16_t *levels,
    kvq_code_layout layout, uint8_t *codes) {
  return kvq::guarded("kvq_metal_nuq_quant", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_nuq_quant", &dev))
      return s;
    Geometry g;
    if (kvq_status s =
            validateNuqQuantArgs("kvq_metal_nuq_quant", x, dtype, rows, cols,
                                 axis, group, bits, levels, layout, codes, &g))
      return s;
    const int64_t count = int64_t{1} << bits;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(n, "kvq_metal_nuq_quant"))
      return s;

    Staging st(*dev);
    const Buffer *bx = st.make(n * dtypeSize(dtype), x);
    const Buffer *blevels = st.make(2 * g.vectors() * count, levels);
    const Buffer *bcodes = st.make(n);
    const int64_t packed = packedBytes(n, bits);
    const Buffer *bpacked =
        layout == KVQ_CODES_PACKED ? st.make(packed) : bcodes;
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_nuq_quant: device allocation failed");
    kvq_metal_matrix p = matrixParams(g, bits, dtype);
    Arg args[] = {Arg::buf(*bx), Arg::buf(*blevels), Arg::buf(*bcodes),
                  Arg::val(p)};
    if (kvq_status s = dev->run("kvq_nuq_quant", args, 4,
                                static_cast<uint32_t>(n), kPlainThreadgroup))
      return s;
    if (layout == KVQ_CODES_PACKED)
      if (kvq_status s =
              packCodes(st, *bcodes, 1, n, bits, *bpacked, 0, packed))
        return s;
    std::memcpy(codes, bpacked->data, layout == KVQ_CODES_PACKED ? packed : n);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_nuq_dequant(
    void *ctx, const uint8_t *codes, kvq_code_layout layout,
    const uint16_t *levels, int64_t rows, int64_t cols, kvq_axis axis,
    int32_t group, int32_t bits, void *out, kvq_dtype dtype) {
  return kvq::guarded("kvq_metal_nuq_dequant", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_nuq_dequant", &dev))
      return s;
    Geometry g;
    if (kvq_status s = validateNuqDequantArgs("kvq_metal_nuq_dequant", codes,
                                              layout, levels, rows, cols, axis,
                                              group, bits, out, dtype, &g))
      return s;
    const int64_t count = int64_t{1} << bits;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(n, "kvq_metal_nuq_dequant"))
      return s;

    Staging st(*dev);
    const int64_t codeBytes =
        layout == KVQ_CODES_PACKED ? packedBytes(n, bits) : n;
    const Buffer *bcodes = st.make(codeBytes, codes);
    const Buffer *blevels = st.make(2 * g.vectors() * count, levels);
    const Buffer *bout = st.make(n * dtypeSize(dtype));
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_nuq_dequant: device allocation failed");
    kvq_metal_matrix p = matrixParams(g, bits, dtype);
    p.layout = static_cast<uint32_t>(layout);
    Arg args[] = {Arg::buf(*bcodes), Arg::buf(*blevels), Arg::buf(*bout),
                  Arg::val(p)};
    if (kvq_status s = dev->run("kvq_nuq_dequant", args, 4,
                                static_cast<uint32_t>(n), kPlainThreadgroup))
      return s;
    std::memcpy(out, bout->data, n * dtypeSize(dtype));
    return KVQ_OK;
  });
}

} // extern "C"
