//===- fp16_lifecycle.cpp - fp16: truncate, save, load --------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The cache lifecycle of an fp16 layer (docs/RUNTIME.md, "Cache
// lifecycle"): every cut is exact; a cut inside a page returns its kept
// tokens to per-token blocks.
//
//===----------------------------------------------------------------------===//
#include "fp16_store.h"
#include "layer_section.h"
#include "serial.h"
#include "status.h"
#include "store_io.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace kvq;

void Fp16Store::releaseAll() {
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
kvq_status Fp16Store::checkTruncate(int64_t) const { return KVQ_OK; }

/// A cut inside a page returns the page's kept tokens to per-token
/// blocks (the layout of a layer of n tokens): allocate them here.
kvq_status Fp16Store::prepareTruncate(int64_t n) {
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
      std::memcpy(b.p + 2 * h * d_, pageKey(t, h), static_cast<size_t>(2 * d_));
      std::memcpy(b.p + rowBytes + 2 * h * d_, pageValue(t, h),
                  static_cast<size_t>(2 * d_));
    }
    pending_.push_back(b); // within the reserved page's worth
  }
  return KVQ_OK;
}

void Fp16Store::cancelTruncate() {
  for (Blk &b : pending_)
    payload_.release(b);
  pending_.clear();
}

void Fp16Store::truncate(int64_t n) {
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
void Fp16Store::save(ByteWriter &w) const {
  const int64_t rowBytes = 2 * channels_;
  writeFp16Tokens(w, length());
  Fp16Section sec;
  if (!pages_.empty()) {
    std::vector<uint8_t> buf(static_cast<size_t>(pageBytes()));
    sec.k.resize(static_cast<size_t>(P));
    sec.v.resize(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) {
      sec.k[static_cast<size_t>(i)] = {buf.data() + 2 * i * rowBytes, rowBytes};
      sec.v[static_cast<size_t>(i)] = {buf.data() + (2 * i + 1) * rowBytes,
                                       rowBytes};
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

kvq_status Fp16Store::load(ByteReader &r) {
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
            payload_,
            {sec.k[static_cast<size_t>(t)], sec.v[static_cast<size_t>(t)]}, b))
      return s;
    tail_.push_back(b);
  }
  return KVQ_OK;
}
