//===- fp16_update.cpp - fp16: append, row decode, byte counts ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Appending fills the tail's per-token blocks and repacks them into a
// page when it fills, inside one transaction; loadRow converts a row.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "fp16_store.h"
#include "status.h"

#include <cstring>
#include <vector>

using namespace kvq;

kvq_status Fp16Store::update(const uint16_t *k, const uint16_t *v, int64_t n,
                             const kvq_parallel &) {
  const int64_t rowBytes = channels_ * 2;
  const int64_t T = static_cast<int64_t>(tail_.size()), total = T + n;
  const int64_t newPages = total / P;
  // The tokens left in per-token blocks: the new ones while no page
  // fills, else the last total % P (all new, since T < P).
  const int64_t firstRow = newPages ? newPages * P : T;
  // Token j of the tail followed by the new rows.
  auto keyOf = [&](int64_t j) {
    return reinterpret_cast<const uint8_t *>(
        j < T ? halves(tail_[static_cast<size_t>(j)])
              : k + (j - T) * channels_);
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

void Fp16Store::loadRow(int64_t pos, float *k, float *v) const {
  for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) {
    const uint16_t *kh = keyRow(pos, h), *vh = valueRow(pos, h);
    for (int64_t c = 0; c < d_; ++c) {
      k[h * d_ + c] = halfToFloat(kh[c]);
      v[h * d_ + c] = halfToFloat(vh[c]);
    }
  }
}

void Fp16Store::addStats(kvq_stats &s) const {
  s.tokens += length();
  s.residual_tokens += length();
  for (const Blk &b : pages_)
    s.residual_bytes += b.size;
  for (const Blk &b : tail_)
    s.residual_bytes += b.size;
}

std::unique_ptr<LayerStore> kvq::makeFp16Store(const kvq_config &cfg,
                                               Payload &payload) {
  return std::make_unique<Fp16Store>(cfg, payload);
}
