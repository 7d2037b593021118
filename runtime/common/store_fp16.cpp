//===- store_fp16.cpp - The fp16 baseline store ---------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every token is one exact-size block holding its K row then its V row in
// fp16; all tokens count as residual (fp16) tokens.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "fp16.h"
#include "layer_section.h"
#include "serial.h"
#include "status.h"
#include "store.h"
#include "store_io.h"

#include <cstring>

using namespace kvq;

namespace {
class Fp16Store final : public LayerStore {
public:
  using LayerStore::LayerStore;

  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n) override {
    const int64_t rowBytes = channels_ * 2;
    Txn txn(payload_);
    std::vector<Blk> fresh;
    fresh.reserve(static_cast<size_t>(n));
    reserveGeometric(rows_, rows_.size() + static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      Blk b = txn.allocate(2 * rowBytes);
      if (!b)
        return fail(KVQ_ERR_OUT_OF_MEMORY,
                    "fp16 cache: allocation of %lld bytes failed",
                    static_cast<long long>(2 * rowBytes));
      std::memcpy(b.p, k + t * channels_, static_cast<size_t>(rowBytes));
      std::memcpy(b.p + rowBytes, v + t * channels_,
                  static_cast<size_t>(rowBytes));
      fresh.push_back(b);
    }
    for (const Blk &b : fresh)
      rows_.push_back(b);
    txn.commit();
    return KVQ_OK;
  }

  int64_t length() const override { return static_cast<int64_t>(rows_.size()); }

  void loadRow(int64_t pos, float *k, float *v) const override {
    const uint16_t *h =
        reinterpret_cast<const uint16_t *>(rows_[static_cast<size_t>(pos)].p);
    for (int64_t i = 0; i < channels_; ++i) {
      k[i] = halfToFloat(h[i]);
      v[i] = halfToFloat(h[channels_ + i]);
    }
  }

  void addStats(kvq_stats &s) const override {
    s.tokens += length();
    s.residual_tokens += length();
    for (const Blk &b : rows_)
      s.residual_bytes += b.size;
  }

  /// Each token's block is its K row then its V row: one dotHalf /
  /// axpyHalf per KV head, converting fp16 in registers.
  void attendKeys(AttendJob &job) const override {
    const int64_t d = job.d;
    for (int64_t t = job.t0; t < job.t1; ++t) {
      const uint16_t *k =
          reinterpret_cast<const uint16_t *>(rows_[static_cast<size_t>(t)].p);
      for (int64_t h = 0; h < job.heads; ++h)
        job.ops.dotHalf(k + h * d, job.query(h), job.nq, d, job.scoreRow(t, h));
    }
  }

  /// Pre-RoPE keys: each token's K row converted in one call (exact).
  void loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                float *out) const override {
    for (int64_t t = t0; t < t1; ++t)
      job.ops.halfToFloatN(
          reinterpret_cast<const uint16_t *>(rows_[static_cast<size_t>(t)].p),
          channels_, out + (t - t0) * channels_);
  }

  bool halfKeyRows(int64_t t0, int64_t t1,
                   const uint16_t **rows) const override {
    for (int64_t t = t0; t < t1; ++t)
      rows[t - t0] =
          reinterpret_cast<const uint16_t *>(rows_[static_cast<size_t>(t)].p);
    return true;
  }

  /// Values of the whole chunk per head: the accumulators stay in
  /// registers across tokens (axpyHalfRows).
  void attendValues(AttendJob &job) const override {
    const int64_t d = job.d, n = job.t1 - job.t0;
    job.halfRows.resize(static_cast<size_t>(n));
    for (int64_t h = 0; h < job.heads; ++h) {
      for (int64_t t = job.t0; t < job.t1; ++t)
        job.halfRows[static_cast<size_t>(t - job.t0)] =
            reinterpret_cast<const uint16_t *>(
                rows_[static_cast<size_t>(t)].p) +
            channels_ + h * d;
      job.ops.axpyHalfRows(job.halfRows.data(), n, job.scoreRow(job.t0, h),
                           job.heads * job.nq, job.nq, d, job.accumulator(h));
    }
  }

  void releaseAll() override {
    for (Blk &b : rows_)
      payload_.release(b);
    rows_.clear();
  }

  /// Every token is stored as received: any cut is exact.
  kvq_status checkTruncate(int64_t) const override { return KVQ_OK; }

  void truncate(int64_t n) override {
    for (size_t t = static_cast<size_t>(n); t < rows_.size(); ++t)
      payload_.release(rows_[t]);
    rows_.resize(static_cast<size_t>(n));
  }

  /// Each token's block is its K row then its V row (layer_section.h).
  void save(ByteWriter &w) const override {
    const int64_t row = 2 * channels_;
    Fp16Section sec;
    for (const Blk &b : rows_) {
      sec.k.push_back({b.p, row});
      sec.v.push_back({b.p + row, row});
    }
    writeSection(w, sec);
  }

  kvq_status load(ByteReader &r) override {
    Fp16Section sec;
    if (kvq_status s = readSection(r, cfg_, sec))
      return s;
    rows_.reserve(sec.k.size());
    for (size_t t = 0; t < sec.k.size(); ++t) {
      Blk b;
      if (kvq_status s = copyBlock(payload_, {sec.k[t], sec.v[t]}, b))
        return s;
      rows_.push_back(b);
    }
    return KVQ_OK;
  }

private:
  std::vector<Blk> rows_;
};
} // namespace

std::unique_ptr<LayerStore> kvq::makeFp16Store(const kvq_config &cfg,
                                               Payload &payload) {
  return std::make_unique<Fp16Store>(cfg, payload);
}
