//===- dispatch.h - Kernel launches shared by the entry points --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Small wrappers for launches more than one entry point needs (packing,
// parameter blocks, the cache layers' fetch and attend), so the caches and
// the stateless kernels run the very same dispatches.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_METAL_HOST_DISPATCH_H
#define KVQ_RUNTIME_METAL_HOST_DISPATCH_H

#include "../kernels/kvq_params.h"
#include "staging.h"
#include "status.h"
#include "validate.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace kvq::metal {

/// Pack `rows` streams of n unpacked codes (codes is [rows, n]) into
/// rowBytes-byte rows of `out` starting at outOffset.
kvq_status packCodes(Staging &st, const Buffer &codes, int64_t rows, int64_t n,
                     int32_t bits, const Buffer &out, size_t outOffset,
                     int64_t rowBytes);

/// The parameter block of a matrix kernel.
kvq_metal_matrix matrixParams(const Geometry &g, int32_t bits, kvq_dtype dtype);

/// A cache layer's fetch kernel over n = length * C elements: `state` (the
/// layer's device buffers), two staging outputs, then the parameter block
/// `view` with its dtype set; K and V land in kout / vout as dtype.
template <class View>
kvq_status runCacheFetch(Device &dev, const char *kernel,
                         std::initializer_list<Arg> state, View view, int64_t n,
                         kvq_dtype dtype, void *kout, void *vout) {
  if (n == 0)
    return KVQ_OK;
  if (kvq_status s = checkGrid(n, "kvq_metal_cache_fetch"))
    return s;
  Staging st(dev);
  const size_t bytes = n * dtypeSize(dtype);
  const Buffer *bk = st.make(bytes), *bv = st.make(bytes);
  if (st.failed())
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_metal_cache_fetch: device "
                                       "allocation failed");
  view.dtype = static_cast<uint32_t>(dtype);
  std::vector<Arg> args(state);
  args.push_back(Arg::buf(*bk));
  args.push_back(Arg::buf(*bv));
  args.push_back(Arg::val(view));
  if (kvq_status s = dev.run(kernel, args.data(), args.size(),
                             static_cast<uint32_t>(n), kPlainThreadgroup))
    return s;
  std::memcpy(kout, bk->data, bytes);
  std::memcpy(vout, bv->data, bytes);
  return KVQ_OK;
}

/// A cache layer's attend kernel, one simdgroup per (query, head): the
/// staged queries and output, then `state`, then `view` with the query
/// count, heads and 1/sqrt(head_dim) set.
template <class View>
kvq_status runCacheAttend(Device &dev, const char *kernel,
                          std::initializer_list<Arg> state, View view,
                          const float *q, int64_t nq, int32_t qHeads,
                          int64_t headDim, float *out) {
  const int64_t elems = nq * qHeads * headDim;
  if (kvq_status s = checkGrid(nq * qHeads * int64_t{kSimdgroup},
                               "kvq_metal_cache_attend"))
    return s;
  Staging st(dev);
  const Buffer *bq = st.make(4 * elems, q), *bo = st.make(4 * elems);
  if (st.failed())
    return fail(KVQ_ERR_OUT_OF_MEMORY, "kvq_metal_cache_attend: device "
                                       "allocation failed");
  view.n_queries = static_cast<uint64_t>(nq);
  view.q_heads = static_cast<uint32_t>(qHeads);
  view.scale = static_cast<float>(1.0 / std::sqrt(double(headDim)));
  std::vector<Arg> args = {Arg::buf(*bq), Arg::buf(*bo)};
  args.insert(args.end(), state);
  args.push_back(Arg::val(view));
  if (kvq_status s =
          dev.run(kernel, args.data(), args.size(),
                  static_cast<uint32_t>(nq * qHeads * kSimdgroup), kSimdgroup))
    return s;
  std::memcpy(out, bo->data, 4 * elems);
  return KVQ_OK;
}

} // namespace kvq::metal

#endif // KVQ_RUNTIME_METAL_HOST_DISPATCH_H
