//===- cache_entry.cpp - What the two KV cache ABIs share -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The non-template half of cache_entry.h: argument checks in the order the
// entry points run them (the first failing check decides the status), the
// fp16 input conversion and the derived stats fields.
//
//===----------------------------------------------------------------------===//
#include "cache_entry.h"

#include "checked.h"
#include "config.h"
#include "fp16.h"
#include "kernels.h"
#include "kernel_args.h"

#include <cmath>
#include <cstring>

using namespace kvq;

kvq_status kvq::checkLayerIndex(const kvq_config &cfg, int32_t layer) {
  if (layer < 0 || layer >= cfg.num_layers)
    return fail(KVQ_ERR_LAYER_OUT_OF_RANGE, "layer %d is outside [0, %d)",
                layer, cfg.num_layers);
  return KVQ_OK;
}

kvq_status kvq::checkCacheLayerArgs(const char *entry, const kvq_config *cfg,
                                    bool pointersOk, const char *names,
                                    int32_t layer) {
  if (!cfg || !pointersOk)
    return fail(KVQ_ERR_NULL_POINTER, "%s: %s must be non-null", entry, names);
  return checkLayerIndex(*cfg, layer);
}

kvq_status kvq::validateCacheUpdateArgs(const char *entry,
                                        const kvq_config *cfg, int32_t layer,
                                        const void *keys, const void *values,
                                        int64_t nTokens, kvq_dtype dtype) {
  if (kvq_status s = checkCacheLayerArgs(entry, cfg, keys && values,
                                         "cache, keys and values", layer))
    return s;
  if (nTokens < 0)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "n_tokens %lld < 0",
                static_cast<long long>(nTokens));
  if (nTokens == 0)
    return fail(KVQ_ERR_EMPTY_INPUT, "%s: zero tokens", entry);
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkAligned(entry, keys, dtype, "keys"))
    return s;
  return checkAligned(entry, values, dtype, "values");
}

kvq_status kvq::checkFetchArgs(const char *entry, const void *keysOut,
                               const void *valuesOut, int64_t capacityTokens,
                               kvq_dtype dtype, int64_t length) {
  if (kvq_status s = checkDtype(dtype))
    return s;
  if (kvq_status s = checkAligned(entry, keysOut, dtype, "keys_out"))
    return s;
  if (kvq_status s = checkAligned(entry, valuesOut, dtype, "values_out"))
    return s;
  if (capacityTokens < length)
    return fail(KVQ_ERR_BUFFER_TOO_SMALL, "capacity %lld tokens < %lld cached",
                static_cast<long long>(capacityTokens),
                static_cast<long long>(length));
  return KVQ_OK;
}

kvq_status kvq::checkAttendArgs(const char *entry, const kvq_config &cfg,
                                const float *queries, int64_t nQueries,
                                int32_t qHeads, int64_t length) {
  const int32_t kvHeads = cfg.num_kv_heads;
  if (nQueries <= 0)
    return fail(nQueries == 0 ? KVQ_ERR_EMPTY_INPUT : KVQ_ERR_INVALID_ARGUMENT,
                "%s: n_queries = %lld", entry,
                static_cast<long long>(nQueries));
  if (qHeads > limits::kQHeads)
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: q_heads %d exceeds %d", entry,
                qHeads, limits::kQHeads);
  if (qHeads <= 0 || qHeads % kvHeads != 0)
    return fail(KVQ_ERR_SHAPE_MISMATCH,
                "q_heads %d is not a positive multiple of num_kv_heads %d",
                qHeads, kvHeads);
  if (nQueries > length)
    return fail(
        KVQ_ERR_SHAPE_MISMATCH, "%lld queries but only %lld cached tokens",
        static_cast<long long>(nQueries), static_cast<long long>(length));
  // nQueries <= length <= limits::kLayerTokens, qHeads <= kQHeads and
  // head_dim <= kHeadDim: the product is below 2^56; checked all the same.
  int64_t elems = 0;
  if (!checkedProduct({nQueries, qHeads, cfg.head_dim}, kMaxBufferBytes / 4,
                      &elems))
    return fail(KVQ_ERR_INVALID_ARGUMENT, "%s: queries too large", entry);
  // Finite is not enough: a query element beyond 2^64 can overflow a score
  // to Inf and the softmax to NaN (limits::kQueryMagnitude).
  for (int64_t i = 0; i < elems; ++i)
    if (!(std::fabs(queries[i]) <= limits::kQueryMagnitude)) {
      if (!std::isfinite(queries[i]))
        return fail(KVQ_ERR_NON_FINITE, "query element %lld is not finite",
                    static_cast<long long>(i));
      return fail(KVQ_ERR_INVALID_ARGUMENT,
                  "query element %lld = %g exceeds 2^64 in magnitude (scores "
                  "could overflow)",
                  static_cast<long long>(i), static_cast<double>(queries[i]));
    }
  return KVQ_OK;
}

namespace {

/// The first element of src that is not finite in fp16, as a status (the
/// branch-free check found one). NaN becomes the fp16 NaN whatever
/// floatToHalf makes of its payload, so the check rejects it.
kvq_status firstNonFinite(const void *src, kvq_dtype dtype, int64_t n,
                          const char *entry, int32_t layer, const char *what) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    if (dtype == KVQ_DTYPE_F16) {
      h = static_cast<const uint16_t *>(src)[i];
    } else {
      float v = static_cast<const float *>(src)[i];
      h = std::isnan(v) ? 0x7e00u : floatToHalf(v);
    }
    if (!halfIsFinite(h))
      return fail(KVQ_ERR_NON_FINITE,
                  "%s: layer %d: %s element %lld is NaN, infinite or outside "
                  "the fp16 range",
                  entry, layer, what, static_cast<long long>(i));
  }
  return KVQ_OK;
}

/// Converted f32 input is kept per thread up to this many halves (K and V
/// of 256 tokens at 8 x 128 channels, 1 MiB), so a decode step's update
/// neither allocates nor faults in fresh pages; a larger (prefill) buffer
/// lives for its call only.
constexpr int64_t kKeptHalves = int64_t{1} << 19;
thread_local std::unique_ptr<uint16_t[]> tKept;

} // namespace

kvq_status kvq::halfKV(const char *entry, int32_t layer, const void *keys,
                       const void *values, kvq_dtype dtype, int64_t n,
                       HalfKV &out) {
  if (dtype == KVQ_DTYPE_F16) {
    if (!allFiniteInHalf(keys, dtype, n))
      return firstNonFinite(keys, dtype, n, entry, layer, "key");
    if (!allFiniteInHalf(values, dtype, n))
      return firstNonFinite(values, dtype, n, entry, layer, "value");
    out.k = static_cast<const uint16_t *>(keys);
    out.v = static_cast<const uint16_t *>(values);
    return KVQ_OK;
  }
  uint16_t *buf;
  if (2 * n <= kKeptHalves) {
    if (!tKept)
      tKept.reset(new uint16_t[static_cast<size_t>(kKeptHalves)]);
    buf = tKept.get();
  } else {
    out.owned.reset(new uint16_t[static_cast<size_t>(2 * n)]);
    buf = out.owned.get();
  }
  // Converted first, then checked on the halves (half the bytes, just
  // written): an f32 element is finite in fp16 exactly when its conversion
  // is (NaN converts to an fp16 NaN, |v| >= 65520 to infinity).
  const auto convert = kernels().floatToHalfN;
  convert(static_cast<const float *>(keys), n, buf);
  if (!allFiniteInHalf(buf, KVQ_DTYPE_F16, n))
    return firstNonFinite(keys, dtype, n, entry, layer, "key");
  convert(static_cast<const float *>(values), n, buf + n);
  if (!allFiniteInHalf(buf + n, KVQ_DTYPE_F16, n))
    return firstNonFinite(values, dtype, n, entry, layer, "value");
  out.k = buf;
  out.v = buf + n;
  return KVQ_OK;
}

void kvq::finishStats(kvq_stats &s, int64_t channels) {
  s.total_bytes = s.code_bytes + s.scale_zero_bytes + s.level_table_bytes +
                  s.outlier_bytes + s.sink_bytes + s.residual_bytes;
  int64_t elements = s.tokens * channels * 2;
  s.fp16_bytes = elements * 2;
  s.effective_bits =
      elements ? 8.0 * static_cast<double>(s.total_bytes) / elements : 0.0;
}
