//===- fp16_store.h - The fp16 baseline store -------------------*- C++ -*-===//
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
// fp16_update.cpp appends and decodes rows, fp16_attend.cpp holds the
// attention fast paths, fp16_lifecycle.cpp truncate, save, load and
// release.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_STORES_FP16_FP16_STORE_H
#define KVQ_RUNTIME_CPU_STORES_FP16_FP16_STORE_H

#include "payload.h"
#include "store.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kvq {

class Fp16Store final : public LayerStore {
public:
  Fp16Store(const kvq_config &cfg, Payload &payload)
      : LayerStore(cfg, payload), d_(cfg.head_dim) {
    // Never more than a page's worth: the commits below push without
    // allocating.
    tail_.reserve(static_cast<size_t>(P));
    pending_.reserve(static_cast<size_t>(P));
  }

  // fp16_update.cpp
  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n,
                    const kvq_parallel &) override;
  int64_t length() const override { return paged() + tailLength(); }
  void loadRow(int64_t pos, float *k, float *v) const override;
  void addStats(kvq_stats &s) const override;

  // fp16_attend.cpp: the attention fast paths
  void attendKeys(AttendJob &job) const override;
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override;
  bool halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                   const uint16_t **rows) const override;
  void prefetchValues(int64_t t0, int64_t t1, int64_t h) const override;
  void attendValues(AttendJob &job) const override;

  // fp16_lifecycle.cpp
  void releaseAll() override;
  kvq_status checkTruncate(int64_t n) const override;
  kvq_status prepareTruncate(int64_t n) override;
  void cancelTruncate() override;
  void truncate(int64_t n) override;
  void save(ByteWriter &w) const override;
  kvq_status load(ByteReader &r) override;

private:
  static constexpr int64_t P = kFp16PageTokens;
  static const uint16_t *halves(const Blk &b) {
    return reinterpret_cast<const uint16_t *>(b.p);
  }

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
  void getToken(const uint8_t *page, int64_t i, uint8_t *k, uint8_t *v) const {
    const size_t row = static_cast<size_t>(2 * d_);
    for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
      std::memcpy(k + 2 * h * d_, page + 2 * keyAt(i, h), row);
      std::memcpy(v + 2 * h * d_, page + 2 * valueAt(i, h), row);
    }
  }

  const int64_t d_;
  std::vector<Blk> pages_;   ///< full pages, in order
  std::vector<Blk> tail_;    ///< tokens after the last page: K row, V row
  std::vector<Blk> pending_; ///< prepareTruncate's tail blocks
};

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_STORES_FP16_FP16_STORE_H
