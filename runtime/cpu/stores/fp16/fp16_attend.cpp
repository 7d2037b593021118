//===- fp16_attend.cpp - fp16: the attention fast paths -------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Attention over the pages' contiguous head runs and the tail's rows
// (store.h, "Attention fast paths").
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "fp16_store.h"

#include <algorithm>

using namespace kvq;

/// Per page and head, the head's keys are consecutive rows: one dotHalf
/// per row, reading one contiguous run (the hardware prefetcher streams
/// it). The dots are latency-bound, so each row also asks for the same
/// token's value row of the head, which the value pass then finds in
/// L2 (measured at 32K, 8 x 128, one query vector per head: the value
/// pass's share of perf samples 12.6 % -> 5.1 %, attention 11.4-13.7 ->
/// 9.2-11.6 ms cold; prefetching the keys further ahead as well gained
/// nothing measurable). Where the table has dotHalfRows (narrow heads on
/// AVX2, whole 16-channel heads on AVX-512), a page's rows go in runs of
/// about kValueAheadBytes of key rows (whole 16-row blocks), each run's
/// value rows asked for just before it: asking for a whole page's values
/// first stalled the key loads at head_dim 64 (1.4x slower cold), and
/// narrow heads, a whole page within that size, keep one call per page.
/// The tail: per token, one dotHalf per head, as before; each (token,
/// head) score is one call whatever the order.
void Fp16Store::attendKeys(AttendJob &job) const {
  constexpr int64_t kValueAheadBytes = 2048;
  const int64_t d = d_, rowBytes = 2 * d;
  const int64_t run =
      std::max<int64_t>(16, kValueAheadBytes / rowBytes / 16 * 16);
  for (int64_t a = job.t0, b; a < job.t1; a = b) {
    if (a < paged()) {
      b = std::min(job.t1, (a / P + 1) * P);
      for (int64_t h = 0; h < job.heads; ++h) {
        const uint16_t *k = pageKey(a, h);
        const uint8_t *v = reinterpret_cast<const uint8_t *>(pageValue(a, h));
        if (job.ops.dotHalfRows) { // rows in lanes, a run at a time
          for (int64_t t = a; t < b; t += run) {
            const int64_t n = std::min<int64_t>(run, b - t);
            for (int64_t off = 0; off < n * rowBytes; off += 64)
              __builtin_prefetch(v + (t - a) * rowBytes + off);
            HalfRowsDot dot;
            dot.rows = k + (t - a) * d;
            dot.rowStride = d;
            dot.n = n;
            dot.q = job.query(h);
            dot.nq = job.nq;
            dot.d = d;
            dot.out = job.scoreRow(t, h);
            dot.outStride = job.heads * job.nq;
            job.ops.dotHalfRows(dot);
          }
          continue;
        }
        for (int64_t t = a; t < b; ++t, k += d, v += rowBytes) {
          job.ops.dotHalf(k, job.query(h), job.nq, d, job.scoreRow(t, h));
          for (int64_t off = 0; off < rowBytes; off += 64)
            __builtin_prefetch(v + off);
        }
      }
    } else {
      b = job.t1;
      for (int64_t t = a; t < b; ++t) {
        const uint16_t *k = tailRow(t);
        for (int64_t h = 0; h < job.heads; ++h)
          job.ops.dotHalf(k + h * d, job.query(h), job.nq, d,
                          job.scoreRow(t, h));
      }
    }
  }
}

/// Pre-RoPE keys (not used by the key pass, which takes halfKeyRows):
/// each head row converted in one call (exact).
void Fp16Store::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                         float *out) const {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t h = 0; h < cfg_.num_kv_heads; ++h)
      job.ops.halfToFloatN(keyRow(t, h), d_,
                           out + (t - t0) * channels_ + h * d_);
}

/// Inside a page the head's rows follow each other: one address per
/// page run, not per row.
bool Fp16Store::halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                            const uint16_t **rows) const {
  for (int64_t t = t0; t < t1;) {
    if (t < paged()) {
      const int64_t e = std::min(t1, (t / P + 1) * P);
      const uint16_t *k = pageKey(t, h);
      for (; t < e; ++t, k += d_)
        rows[t - t0] = k;
    } else {
      rows[t - t0] = tailRow(t) + h * d_;
      ++t;
    }
  }
  return true;
}

void Fp16Store::prefetchValues(int64_t t0, int64_t t1, int64_t h) const {
  for (int64_t t = t0; t < t1;) {
    const int64_t e = t < paged() ? std::min(t1, (t / P + 1) * P) : t + 1;
    const uint8_t *v = reinterpret_cast<const uint8_t *>(valueRow(t, h));
    const int64_t bytes = 2 * d_ * (e - t);
    for (int64_t off = 0; off < bytes; off += 64)
      __builtin_prefetch(v + off, 0, 2);
    t = e;
  }
}

/// Values of the whole chunk per head: the accumulators stay in
/// registers across tokens (axpyHalfRows); inside a page the head's rows
/// are contiguous.
void Fp16Store::attendValues(AttendJob &job) const {
  const int64_t d = d_, n = job.t1 - job.t0;
  job.halfRows.resize(static_cast<size_t>(n));
  const uint16_t **rows = job.halfRows.data();
  for (int64_t h = 0; h < job.heads; ++h) {
    for (int64_t a = job.t0, b; a < job.t1; a = b) {
      if (a < paged()) {
        b = std::min(job.t1, (a / P + 1) * P);
        const uint16_t *r = pageValue(a, h);
        for (int64_t t = a; t < b; ++t, r += d)
          rows[t - job.t0] = r;
      } else {
        b = job.t1;
        for (int64_t t = a; t < b; ++t)
          rows[t - job.t0] = tailRow(t) + channels_ + h * d;
      }
    }
    HalfRowsAxpy a;
    a.rows = job.halfRows.data();
    a.n = n;
    a.w = job.scoreRow(job.t0, h);
    a.wStride = job.heads * job.nq;
    a.nq = job.nq;
    a.d = d;
    a.acc = job.accumulator(h);
    job.ops.axpyHalfRows(a);
  }
}
