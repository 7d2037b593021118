//===- store_util.h - Small helpers shared by the method stores -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Row conversion, per-thread scratch, and the pieces of an update that the
// KIVI and KVQuant stores share (the unaligned fp16 reads and writes inside
// payload blocks, read16/write16, are fp16.h's).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_STORES_STORE_UTIL_H
#define KVQ_RUNTIME_CPU_STORES_STORE_UTIL_H

#include "attention.h"
#include "fp16.h"
#include "status.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace kvq {

/// A per-thread work buffer of at least n elements of T, not zeroed; `Tag`
/// names the buffer, so two live at once need two tags. A store's per-call
/// scratch (a KIVI key group's rows and codes, 96 KiB at 8 x 128) taken
/// fresh and zero-filled per call cost more than the quantization: the
/// zeroing, and the heap's top trimmed and faulted back in on every group.
/// Callers write every element they read; the buffer keeps the largest
/// size asked for on its thread. May throw std::bad_alloc.
template <class T, class Tag> T *threadScratch(size_t n) {
  thread_local std::unique_ptr<T[]> buf;
  thread_local size_t size = 0;
  if (size < n) {
    buf.reset(); // free the old one first: peak is one buffer
    size = 0;
    buf.reset(new T[n]);
    size = n;
  }
  return buf.get();
}

/// n fp16 values (host-order uint16 array) to floats.
inline void halfRowToFloat(const uint16_t *h, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

/// n fp16 values stored in a payload block to floats.
inline void blockRowToFloat(const uint8_t *p, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(read16(p, i));
}

/// Tokens [begin, end) of a key pass's run of n tokens from t0 whose value
/// blocks (or next rows) head h's turn asks for: the h-th of `heads`
/// near-equal shares. Each turn asks for its share while the key
/// arithmetic runs; asked for all at one head they stalled that turn on
/// full miss buffers (docs/PERFORMANCE.md, "Prefetches by head").
struct TokenSpan {
  int64_t begin, end;
};
inline TokenSpan headShare(int64_t t0, int64_t n, int64_t heads, int64_t h) {
  const int64_t share = (n + heads - 1) / heads;
  return {t0 + std::min(n, h * share), t0 + std::min(n, (h + 1) * share)};
}

/// Asks for `bytes` bytes from p a cache line at a time: the attention
/// passes' look-ahead over blocks the hardware prefetcher cannot see
/// coming (each its own allocation). A hint: it never faults.
inline void prefetchBytes(const void *p, int64_t bytes) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (int64_t off = 0; off < bytes; off += 64)
    __builtin_prefetch(b + off);
}

/// The fp16 K/V rows an update reads. Position p >= oldLength is one of
/// the appended tokens (the caller's input); an older one is still held
/// fp16 in its slot's kf/vf block, since a store only re-reads rows it has
/// not quantized yet (window, sinks, tokens awaiting a refit).
template <class Slots> class UpdateRows {
public:
  UpdateRows(const Slots &slots, const uint16_t *k, const uint16_t *v,
             int64_t oldLength, int64_t channels)
      : slots_(slots), k_(k), v_(v), l0_(oldLength), c_(channels) {}
  const uint16_t *key(int64_t p) const {
    return p >= l0_ ? k_ + (p - l0_) * c_
                    : reinterpret_cast<const uint16_t *>(
                          slots_[static_cast<size_t>(p)].kf.p);
  }
  const uint16_t *value(int64_t p) const {
    return p >= l0_ ? v_ + (p - l0_) * c_
                    : reinterpret_cast<const uint16_t *>(
                          slots_[static_cast<size_t>(p)].vf.p);
  }

private:
  const Slots &slots_;
  const uint16_t *k_, *v_;
  int64_t l0_, c_;
};

/// The status of a payload allocation that failed inside an update of a
/// `method` store (the update then changes nothing).
inline kvq_status allocationFailed(const char *method, int64_t bytes) {
  return fail(KVQ_ERR_OUT_OF_MEMORY,
              "%s cache: allocation of %lld bytes failed", method,
              static_cast<long long>(bytes));
}

/// The positions whose slot is a sink, ascending (LayerStore::sinkPositions
/// of the stores with a per-token slot table).
template <class Slots>
void sinkPositionsOf(const Slots &slots, std::vector<int64_t> &out) {
  out.clear();
  for (size_t p = 0; p < slots.size(); ++p)
    if (slots[p].sink)
      out.push_back(static_cast<int64_t>(p));
}

/// The first walk of a value pass over job's chunk (stores whose slots have
/// an fp16 row `vf` or a quantized block `vq`): fp16 rows (window, sinks)
/// are summed in place, head by head; each coded token is recorded as
/// job.halfRows[i] = its block (an fp16 header first), codes[i] = block +
/// codeOffset and job.positions[i] = t - t0. Returns the coded count.
template <class Slots>
int64_t walkValueRows(AttendJob &job, const Slots &slots, int64_t codeOffset,
                      const uint8_t **codes) {
  const int64_t H = job.heads, d = job.d, nq = job.nq;
  job.halfRows.resize(static_cast<size_t>(job.t1 - job.t0));
  job.positions.resize(static_cast<size_t>(job.t1 - job.t0));
  int64_t n = 0;
  for (int64_t t = job.t0; t < job.t1; ++t) {
    const auto &s = slots[static_cast<size_t>(t)];
    if (s.vf) {
      const uint16_t *v = reinterpret_cast<const uint16_t *>(s.vf.p);
      for (int64_t h = 0; h < H; ++h)
        job.ops.axpyHalf(v + h * d, job.scoreRow(t, h), nq, d,
                         job.accumulator(h));
      continue;
    }
    job.halfRows[static_cast<size_t>(n)] =
        reinterpret_cast<const uint16_t *>(s.vq.p);
    codes[n] = s.vq.p + codeOffset;
    job.positions[static_cast<size_t>(n++)] = t - job.t0;
  }
  return n;
}

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_STORES_STORE_UTIL_H
