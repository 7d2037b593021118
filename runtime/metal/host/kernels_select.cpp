//===- kernels_select.cpp - Outlier split/screen, key norm, sink select ---===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Stage, check and dispatch the selection kernels of outlier.metal and
// sink.metal. Sink selection runs as one simdgroup over all tokens.
//
//===----------------------------------------------------------------------===//
#include "guard.h"
#include "kvq/runtime_metal.h"

#include "dispatch.h"
#include "status.h"

#include <cstring>

using namespace kvq;
using namespace kvq::metal;

extern "C" {

KVQ_RT_EXPORT kvq_status kvq_metal_outlier_split(
    void *ctx, const void *x, kvq_dtype dtype, int64_t rows, int64_t cols,
    kvq_axis axis, int32_t group, float fraction, const uint8_t *exclude,
    uint8_t *outlier_mask, float *threshold) {
  return kvq::guarded("kvq_metal_outlier_split", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_outlier_split", &dev))
      return s;
    Geometry g;
    if (kvq_status s = validateOutlierSplitArgs("kvq_metal_outlier_split", x,
                                                dtype, rows, cols, axis, group,
                                                fraction, outlier_mask, &g))
      return s;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(g.vectors(), "kvq_metal_outlier_split"))
      return s;

    Staging st(*dev);
    const Buffer *bx = st.make(n * dtypeSize(dtype), x);
    const Buffer *bex = st.make(exclude ? n : 0, exclude);
    const Buffer *bmask = st.make(n);
    const Buffer *bthr = st.make(4 * g.vectors());
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_outlier_split: device allocation failed");
    kvq_metal_matrix p = matrixParams(g, 8, dtype);
    p.has_exclude = exclude ? 1u : 0u;
    p.fraction = fraction;
    Arg args[] = {Arg::buf(*bx), Arg::buf(*bex), Arg::buf(*bmask),
                  Arg::buf(*bthr), Arg::val(p)};
    if (kvq_status s =
            dev->run("kvq_outlier_split", args, 5,
                     static_cast<uint32_t>(g.vectors()), kPlainThreadgroup))
      return s;
    std::memcpy(outlier_mask, bmask->data, n);
    if (threshold)
      std::memcpy(threshold, bthr->data, 4 * g.vectors());
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_outlier_screen(void *ctx, const void *x,
                                                  kvq_dtype dtype, int64_t rows,
                                                  int64_t cols,
                                                  const float *threshold,
                                                  uint8_t *outlier_mask) {
  return kvq::guarded("kvq_metal_outlier_screen", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_outlier_screen", &dev))
      return s;
    if (kvq_status s =
            validateOutlierScreenArgs("kvq_metal_outlier_screen", x, dtype,
                                      rows, cols, threshold, outlier_mask))
      return s;
    const int64_t n = rows * cols;
    if (kvq_status s = checkGrid(n, "kvq_metal_outlier_screen"))
      return s;

    Staging st(*dev);
    const Buffer *bx = st.make(n * dtypeSize(dtype), x);
    const Buffer *bthr = st.make(4 * cols, threshold);
    const Buffer *bmask = st.make(n);
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_outlier_screen: device allocation failed");
    Geometry g;
    g.rows = rows;
    g.cols = cols;
    g.group = 1;
    kvq_metal_matrix p = matrixParams(g, 8, dtype);
    Arg args[] = {Arg::buf(*bx), Arg::buf(*bthr), Arg::buf(*bmask),
                  Arg::val(p)};
    if (kvq_status s = dev->run("kvq_outlier_screen", args, 4,
                                static_cast<uint32_t>(n), kPlainThreadgroup))
      return s;
    std::memcpy(outlier_mask, bmask->data, n);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_key_norm(void *ctx, const void *keys,
                                            kvq_dtype dtype, int64_t tokens,
                                            int32_t kv_heads, int32_t head_dim,
                                            float *norms) {
  return kvq::guarded("kvq_metal_key_norm", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_key_norm", &dev))
      return s;
    if (kvq_status s = validateKeyNormArgs("kvq_metal_key_norm", keys, dtype,
                                           tokens, kv_heads, head_dim, norms))
      return s;
    const int64_t channels = int64_t{kv_heads} * head_dim;
    if (kvq_status s = checkGrid(tokens, "kvq_metal_key_norm"))
      return s;

    Staging st(*dev);
    const Buffer *bk = st.make(tokens * channels * dtypeSize(dtype), keys);
    const Buffer *bn = st.make(4 * tokens);
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_key_norm: device allocation failed");
    kvq_metal_tokens p{};
    p.tokens = static_cast<uint64_t>(tokens);
    p.kv_heads = static_cast<uint32_t>(kv_heads);
    p.head_dim = static_cast<uint32_t>(head_dim);
    p.dtype = static_cast<uint32_t>(dtype);
    Arg args[] = {Arg::buf(*bk), Arg::buf(*bn), Arg::val(p)};
    if (kvq_status s =
            dev->run("kvq_key_norm", args, 3, static_cast<uint32_t>(tokens),
                     kPlainThreadgroup))
      return s;
    std::memcpy(norms, bn->data, 4 * tokens);
    return KVQ_OK;
  });
}

KVQ_RT_EXPORT kvq_status kvq_metal_sink_select(void *ctx, const float *norms,
                                               int64_t tokens, int32_t k,
                                               int64_t *positions) {
  return kvq::guarded("kvq_metal_sink_select", [&]() -> kvq_status {
    Device *dev;
    if (kvq_status s = deviceOf(ctx, "kvq_metal_sink_select", &dev))
      return s;
    if (kvq_status s = validateSinkSelectArgs("kvq_metal_sink_select", norms,
                                              tokens, k, positions))
      return s;
    if (kvq_status s = checkGrid(tokens, "kvq_metal_sink_select"))
      return s;
    if (k == 0)
      return KVQ_OK;

    Staging st(*dev);
    const Buffer *bn = st.make(4 * tokens, norms);
    const Buffer *bpos = st.make(8 * static_cast<size_t>(k));
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY,
                  "kvq_metal_sink_select: device allocation failed");
    kvq_metal_tokens p{};
    p.tokens = static_cast<uint64_t>(tokens);
    p.k = static_cast<uint32_t>(k);
    Arg args[] = {Arg::buf(*bn), Arg::buf(*bpos), Arg::val(p)};
    if (kvq_status s =
            dev->run("kvq_sink_select", args, 3, kSimdgroup, kSimdgroup))
      return s;
    std::memcpy(positions, bpos->data, 8 * static_cast<size_t>(k));
    return KVQ_OK;
  });
}

} // extern "C"
