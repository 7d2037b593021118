//===- store_fp16.cpp - The fp16 baseline store ---------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Tokens in full pages of kFp16PageTokens (store.h): one exact-size block
// per page holding the page's keys [head][token][head_dim], then its values
// in the same order, in fp16. Decode attention thus reads each head's keys
// and values as contiguous runs of rows (the layout of fast attention
// kernels) instead of one row per token with a stride of a whole token.
// The tokens after the last full page (the tail, fewer than a page) are one
// block each, K row then V row; when the tail fills a page it is repacked
// into one. All tokens count as residual (fp16) tokens; a page is exactly
// the bytes of its tokens' rows, so the byte counts do not depend on the
// layout.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "fp16.h"
#include "layer_section.h"
#include "serial.h"
#include "status.h"
#include "store.h"
#include "store_io.h"

#include <algorithm>
#include <cstring>

using namespace kvq;

namespace {
constexpr int64_t P = kFp16PageTokens;

const uint16_t *halves(const Blk &b) {
  return reinterpret_cast<const uint16_t *>(b.p);
}

class Fp16Store final : public LayerStore {
public:
  Fp16Store(const kvq_config &cfg, Payload &payload)
      : LayerStore(cfg, payload), d_(cfg.head_dim) {
    // Never more than a page's worth: the commits below push without
    // allocating.
    tail_.reserve(static_cast<size_t>(P));
    pending_.reserve(static_cast<size_t>(P));
  }

  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                    const kvq_parallel &) override {
    const int64_t rowBytes = channels_ * 2;
    const int64_t T = static_cast<int64_t>(tail_.size()), total = T + n;
    const int64_t newPages = total / P;
    // The tokens left in per-token blocks: the new ones while no page
    // fills, else the last total % P (all new, since T < P).
    const int64_t firstRow = newPages ? newPages * P : T;
    // Token j of the tail followed by the new rows.
    auto keyOf = [&](int64_t j) {
      return reinterpret_cast<const uint8_t *>(
          j < T ? halves(tail_[static_cast<size_t>(j)]) : k + (j - T) * channels_);
    };
    auto valueOf = [&](int64_t j) {
      return reinterpret_cast<const uint8_t *>(
          j < T ? halves(tail_[static_cast<size_t>(j)]) + channels_
                : v + (j - T) * channels_);
    };
    Txn txn(payload_);
    std::vector<Blk> pages, rows;
    pages.reserve(static_cast<size_t>(newPages));
    rows.reserve(static_cast<size_t>(total - firstRow));
    reserveGeometric(pages_, pages_.size() + static_cast<size_t>(newPages));
    for (int64_t p = 0; p < newPages; ++p) {
      Blk b = txn.allocate(pageBytes());
      if (!b)
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "fp16 cache: allocation of %lld bytes failed",
                    static_cast<long long>(pageBytes()));
      for (int64_t i = 0; i < P; ++i)
        putToken(b.p, i, keyOf(p * P + i), valueOf(p * P + i));
      pages.push_back(b);
    }
    for (int64_t j = firstRow; j < total; ++j) {
      Blk b = txn.allocate(2 * rowBytes);
      if (!b)
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "fp16 cache: allocation of %lld bytes failed",
                    static_cast<long long>(2 * rowBytes));
      std::memcpy(b.p, keyOf(j), static_cast<size_t>(rowBytes));
      std::memcpy(b.p + rowBytes, valueOf(j), static_cast<size_t>(rowBytes));
      rows.push_back(b);
    }
    if (newPages) {
      // The old tail now lives in the first new page (retire may throw:
      // still before any change).
      for (const Blk &b : tail_)
        txn.retire(b);
      tail_.clear();
    }
    for (const Blk &b : pages)
      pages_.push_back(b);
    for (const Blk &b : rows)
      tail_.push_back(b);
    txn.commit();
    return KVQ_OK;
  }

  int64_t length() const override { return paged() + tailLength(); }

  void loadRow(int64_t pos, float *k, float *v) const override {
    for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
      const uint16_t *kh = keyRow(pos, h), *vh = valueRow(pos, h);
      for (int64_t c = 0; c < d_; ++c) {
        k[h * d_ + c] = halfToFloat(kh[c]);
        v[h * d_ + c] = halfToFloat(vh[c]);
      }
    }
  }

  void addStats(kvq_stats &s) const override {
    s.tokens += length();
    s.residual_tokens += length();
    for (const Blk &b : pages_)
      s.residual_bytes += b.size;
    for (const Blk &b : tail_)
      s.residual_bytes += b.size;
  }

  /// Per page and head, the head's keys are consecutive rows: one dotHalf
  /// per row, reading one contiguous run (the hardware prefetcher streams
  /// it). The dots are latency-bound, so each row also asks for the same
  /// token's value row of the head, which the value pass then finds in
  /// L2 (measured at 32K, 8 x 128, one query vector per head: the value
  /// pass's share of perf samples 12.6 % -> 5.1 %, attention 11.4-13.7 ->
  /// 9.2-11.6 ms cold; prefetching the keys further ahead as well gained
  /// nothing measurable). Where the table has dotHalfRows (heads too narrow
  /// to fill a vector), the page's run of rows is one call instead, its
  /// value rows asked for first. The tail: per token, one dotHalf per head,
  /// as before; each (token, head) score is one call whatever the order.
  void attendKeys(AttendJob &job) const override {
    const int64_t d = d_;
    for (int64_t a = job.t0, b; a < job.t1; a = b) {
      if (a < paged()) {
        b = std::min(job.t1, (a / P + 1) * P);
        const int64_t rowBytes = 2 * d;
        for (int64_t h = 0; h < job.heads; ++h) {
          const uint16_t *k = pageKey(a, h);
          const uint8_t *v = reinterpret_cast<const uint8_t *>(pageValue(a, h));
          if (job.ops.dotHalfRows) { // narrow rows: the run in one call
            for (int64_t off = 0; off < (b - a) * rowBytes; off += 64)
              __builtin_prefetch(v + off);
            HalfRowsDot dot;
            dot.rows = k;
            dot.rowStride = d;
            dot.n = b - a;
            dot.q = job.query(h);
            dot.nq = job.nq;
            dot.d = d;
            dot.out = job.scoreRow(a, h);
            dot.outStride = job.heads * job.nq;
            job.ops.dotHalfRows(dot);
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
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < cfg_.num_kv_heads; ++h)
        job.ops.halfToFloatN(keyRow(t, h), d_,
                             out + (t - t0) * channels_ + h * d_);
  }

  /// Inside a page the head's rows follow each other: one address per
  /// page run, not per row.
  bool halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                   const uint16_t **rows) const override {
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

  void prefetchValues(int64_t t0, int64_t t1, int64_t h) const override {
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
  void attendValues(AttendJob &job) const override {
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

  void releaseAll() override {
    for (Blk &b : pages_)
      payload_.release(b);
    for (Blk &b : tail_)
      payload_.release(b);
    for (Blk &b : pending_)
      payload_.release(b);
    pages_.clear();
    tail_.clear();
    pending_.clear();
  }

  /// Every token is stored as received: any cut is exact.
  kvq_status checkTruncate(int64_t) const override { return KVQ_OK; }

  /// A cut inside a page returns the page's kept tokens to per-token
  /// blocks (the layout of a layer of n tokens): allocate them here.
  kvq_status prepareTruncate(int64_t n) override {
    cancelTruncate();
    const int64_t rowBytes = channels_ * 2;
    for (int64_t t = n / P * P; t < std::min(n, paged()); ++t) {
      Blk b = payload_.allocate(2 * rowBytes);
      if (!b) {
        cancelTruncate();
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "fp16 cache: allocation of %lld bytes failed",
                    static_cast<long long>(2 * rowBytes));
      }
      for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
        std::memcpy(b.p + 2 * h * d_, pageKey(t, h),
                    static_cast<size_t>(2 * d_));
        std::memcpy(b.p + rowBytes + 2 * h * d_, pageValue(t, h),
                    static_cast<size_t>(2 * d_));
      }
      pending_.push_back(b); // within the reserved page's worth
    }
    return KVQ_OK;
  }

  void cancelTruncate() override {
    for (Blk &b : pending_)
      payload_.release(b);
    pending_.clear();
  }

  void truncate(int64_t n) override {
    if (n >= paged()) {
      for (size_t t = static_cast<size_t>(n - paged()); t < tail_.size(); ++t)
        payload_.release(tail_[t]);
      tail_.resize(static_cast<size_t>(n - paged()));
      return;
    }
    for (Blk &b : tail_)
      payload_.release(b);
    tail_.clear();
    for (size_t p = static_cast<size_t>(n / P); p < pages_.size(); ++p)
      payload_.release(pages_[p]);
    pages_.resize(static_cast<size_t>(n / P));
    for (const Blk &b : pending_)
      tail_.push_back(b);
    pending_.clear();
  }

  /// Each token's K row and V row (layer_section.h), a page's tokens
  /// gathered at a time.
  void save(ByteWriter &w) const override {
    const int64_t rowBytes = 2 * channels_;
    writeFp16Tokens(w, length());
    Fp16Section sec;
    if (!pages_.empty()) {
      std::vector<uint8_t> buf(static_cast<size_t>(pageBytes()));
      sec.k.resize(static_cast<size_t>(P));
      sec.v.resize(static_cast<size_t>(P));
      for (int64_t i = 0; i < P; ++i) {
        sec.k[static_cast<size_t>(i)] = {buf.data() + 2 * i * rowBytes,
                                         rowBytes};
        sec.v[static_cast<size_t>(i)] = {
            buf.data() + (2 * i + 1) * rowBytes, rowBytes};
      }
      for (const Blk &page : pages_) {
        if (!w.sizing())
          for (int64_t i = 0; i < P; ++i)
            getToken(page.p, i, buf.data() + 2 * i * rowBytes,
                     buf.data() + (2 * i + 1) * rowBytes);
        writeFp16Rows(w, sec);
      }
    }
    sec.k.clear();
    sec.v.clear();
    for (const Blk &b : tail_) {
      sec.k.push_back({b.p, rowBytes});
      sec.v.push_back({b.p + rowBytes, rowBytes});
    }
    writeFp16Rows(w, sec);
  }

  kvq_status load(ByteReader &r) override {
    Fp16Section sec;
    if (kvq_status s = readSection(r, cfg_, sec))
      return s;
    const int64_t n = static_cast<int64_t>(sec.k.size());
    pages_.reserve(static_cast<size_t>(n / P));
    for (int64_t p = 0; p < n / P; ++p) {
      Blk b = payload_.allocate(pageBytes());
      if (!b)
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "kvq_cache_load: allocation of %lld bytes failed",
                    static_cast<long long>(pageBytes()));
      pages_.push_back(b);
      for (int64_t i = 0; i < P; ++i)
        putToken(b.p, i, sec.k[static_cast<size_t>(p * P + i)].p,
                 sec.v[static_cast<size_t>(p * P + i)].p);
    }
    for (int64_t t = n / P * P; t < n; ++t) {
      Blk b;
      if (kvq_status s = copyBlock(
              payload_, {sec.k[static_cast<size_t>(t)], sec.v[static_cast<size_t>(t)]},
              b))
        return s;
      tail_.push_back(b);
    }
    return KVQ_OK;
  }

private:
  int64_t paged() const { return static_cast<int64_t>(pages_.size()) * P; }
  int64_t tailLength() const { return static_cast<int64_t>(tail_.size()); }
  int64_t pageBytes() const { return P * 4 * channels_; }

  /// The page layout, in halves from the page's start: head h's key row
  /// of the page's token i, and its value row (written once; every access
  /// below goes through these two).
  int64_t keyAt(int64_t i, int64_t h) const { return (h * P + i) * d_; }
  int64_t valueAt(int64_t i, int64_t h) const {
    return P * channels_ + keyAt(i, h);
  }
  /// Head h's key / value row of token t of a full page.
  const uint16_t *pageKey(int64_t t, int64_t h) const {
    return halves(pages_[static_cast<size_t>(t / P)]) + keyAt(t % P, h);
  }
  const uint16_t *pageValue(int64_t t, int64_t h) const {
    return halves(pages_[static_cast<size_t>(t / P)]) + valueAt(t % P, h);
  }
  /// Token t of the tail: its K row then its V row.
  const uint16_t *tailRow(int64_t t) const {
    return halves(tail_[static_cast<size_t>(t - paged())]);
  }
  const uint16_t *keyRow(int64_t t, int64_t h) const {
    return t < paged() ? pageKey(t, h) : tailRow(t) + h * d_;
  }
  const uint16_t *valueRow(int64_t t, int64_t h) const {
    return t < paged() ? pageValue(t, h) : tailRow(t) + channels_ + h * d_;
  }

  /// Token i of a page from its K and V rows (C halves each, any
  /// alignment), and back.
  void putToken(uint8_t *page, int64_t i, const uint8_t *k,
                const uint8_t *v) const {
    const size_t row = static_cast<size_t>(2 * d_);
    for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
      std::memcpy(page + 2 * keyAt(i, h), k + 2 * h * d_, row);
      std::memcpy(page + 2 * valueAt(i, h), v + 2 * h * d_, row);
    }
  }
  void getToken(const uint8_t *page, int64_t i, uint8_t *k,
                uint8_t *v) const {
    const size_t row = static_cast<size_t>(2 * d_);
    for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
      std::memcpy(k + 2 * h * d_, page + 2 * keyAt(i, h), row);
      std::memcpy(v + 2 * h * d_, page + 2 * valueAt(i, h), row);
    }
  }

  const int64_t d_;
  std::vector<Blk> pages_; ///< full pages, in order
  std::vector<Blk> tail_;  ///< tokens after the last page: K row, V row
  std::vector<Blk> pending_; ///< prepareTruncate's tail blocks
};
} // namespace

std::unique_ptr<LayerStore> kvq::makeFp16Store(const kvq_config &cfg,
                                               Payload &payload) {
  return std::make_unique<Fp16Store>(cfg, payload);
}
