//===- cache_kvquant.cpp - The KVQuant method of the Metal KV cache -------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One layer of a Metal cache with method kvquant. The host executes the
// update plan of runtime/methods/kvquant_plan.h, as the CPU store does
// (which prefill tokens are fp16 sinks, which batches get a fresh key fit,
// which tokens wait fp16 for their refit), and keeps the segment every key
// row uses, so
// the layer holds the same tokens fp16, the same levels, codes and
// outliers as a CPU cache of the same configuration. The GPU does the
// numerical work with the stateless kernels: rank outlier split
// (kvq_outlier_split), Lloyd-Max fits with the outliers excluded
// (kvq_nuq_fit), nearest-level codes (kvq_nuq_quant), packing
// (kvq_pack_codes), threshold screening of decode keys against the frozen
// prefill thresholds (kvq_outlier_screen). The host only moves bytes: it
// gathers the marked outliers into each row's sparse list and places rows
// in the device arrays. Attention and fetch read the layout described in
// attend_kvquant.metal and docs/METAL.md. With a RoPE the keys are stored
// as they arrive (pre-RoPE) and rotated by those kernels (rope_table.h).
//
//===----------------------------------------------------------------------===//
#include "cache_layer.h"

#include "../kernels/kvq_params.h"
#include "bitpack.h"
#include "device_array.h"
#include "dispatch.h"
#include "fp16.h"
#include "kvquant_plan.h"
#include "layer_section.h"
#include "rope_table.h"
#include "serial.h"
#include "status.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

using namespace kvq;
using namespace kvq::metal;

namespace {

/// Arena offsets are uint32 in the token records.
constexpr int64_t kMaxArenaBytes = 0xffffffffll;

int64_t align4(int64_t n) { return (n + 3) & ~int64_t{3}; }

/// Parameter block of a matrix kernel on [rows, cols] fp16 data cut into
/// vectors of `group` elements along `axis`.
kvq_metal_matrix matrix(int64_t rows, int64_t cols, int64_t group,
                        kvq_axis axis, int bits) {
  kvq_metal_matrix p{};
  p.rows = static_cast<uint64_t>(rows);
  p.cols = static_cast<uint64_t>(cols);
  p.vectors = static_cast<uint64_t>(rows * cols / group);
  p.group = static_cast<uint32_t>(group);
  p.axis = static_cast<uint32_t>(axis);
  p.bits = static_cast<uint32_t>(bits);
  p.dtype = KVQ_DTYPE_F16;
  p.layout = KVQ_CODES_UNPACKED;
  return p;
}

uint8_t *bytesOf(const Buffer *b) { return static_cast<uint8_t *>(b->data); }

class KvquantLayer final : public CacheLayer {
public:
  KvquantLayer(const kvq_config &cfg, Device &dev,
               std::shared_ptr<const RopeLow> rope)
      : cfg_(cfg), dev_(dev), C_(int64_t{cfg.num_kv_heads} * cfg.head_dim),
        H_(cfg.num_kv_heads), D_(cfg.head_dim), kb_(cfg.key_bits),
        vb_(cfg.value_bits), kL_(int64_t{1} << cfg.key_bits),
        vL_(int64_t{1} << cfg.value_bits), frozen_(cfg.refit_interval == 0),
        keyCodes_(kvquantKeyRowLayout(cfg).codeBytes),
        valueCodes_(kvquantValueRowLayout(cfg).codeBytes),
        valueLevels_(kvquantValueRowLayout(cfg).codesOffset()),
        tableBytes_(kvquantTableLayout(cfg).bytes()),
        tableStride_(align4(tableBytes_)), dtok_(dev), dpool_(dev),
        dkarena_(dev), dvarena_(dev), dtables_(dev),
        rope_(std::move(rope), dev) {}

  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n) override;
  int64_t length() const override { return static_cast<int64_t>(tok_.size()); }
  kvq_status fetch(void *kout, void *vout, kvq_dtype dtype) const override;
  kvq_status attend(const float *q, int64_t nq, int32_t qHeads,
                    float *out) const override;
  void addStats(kvq_stats &s) const override;
  void sinkPositions(std::vector<int64_t> &out) const override {
    flaggedPositions(sink_, out);
  }

  /// Only sinks (no fit yet), or a cut at/after the tokens awaiting a refit:
  /// the dropped tokens hold fp16 pool rows only.
  kvq_status checkTruncate(int64_t n) const override {
    if (segments_ == 0 || n >= quantizedUpTo_)
      return KVQ_OK;
    return fail(KVQ_ERR_NOT_EXACT,
                "metal cache: keeping %lld of %lld tokens would drop "
                "quantized kvquant rows (the Metal cache takes only cuts "
                "among tokens awaiting a refit)",
                static_cast<long long>(n), static_cast<long long>(length()));
  }

  void truncate(int64_t n) override {
    for (int64_t p = n; p < length(); ++p)
      for (int32_t r : {tok_[p].kref, tok_[p].vref})
        if (r >= 0)
          freeRows_.push_back(r);
    tok_.resize(n);
    sink_.resize(n);
    quantizedUpTo_ = std::min(quantizedUpTo_, n);
  }

  std::unique_ptr<CacheLayer> clone() const override {
    auto c = std::make_unique<KvquantLayer>(cfg_, dev_, rope_.low());
    c->tok_ = tok_;
    c->sink_ = sink_;
    c->freeRows_ = freeRows_;
    c->thresholds_ = thresholds_;
    c->segments_ = segments_;
    c->poolRows_ = poolRows_;
    c->karena_ = karena_;
    c->varena_ = varena_;
    c->quantizedUpTo_ = quantizedUpTo_;
    c->seg0End_ = seg0End_;
    if (!c->dtok_.copyFrom(dtok_) || !c->dpool_.copyFrom(dpool_) ||
        !c->dkarena_.copyFrom(dkarena_) || !c->dvarena_.copyFrom(dvarena_) ||
        !c->dtables_.copyFrom(dtables_) || !c->rope_.copyFrom(rope_))
      return nullptr;
    return c;
  }

  void save(ByteWriter &w) const override;
  kvq_status load(ByteReader &r) override;

private:
  /// [a, b) positions quantized together: a fresh key fit (segment
  /// `segment`), or decode keys screened against the frozen segment 0.
  struct Batch {
    int64_t a, b;
    bool fresh;
    int64_t segment;
  };

  kvq_metal_kvquant_view view() const;
  /// Keys of batch `bt` (rows [bt.a - first, bt.b - first) of bx): outlier
  /// mask, fresh levels (into btab, fresh batches), codes.
  kvq_status quantizeKeys(Staging &st, const Batch &bt, int64_t first,
                          const Buffer &bx, const Buffer &bmask,
                          const Buffer &bcodes, const Buffer &bscratch,
                          const Buffer &btab, const Buffer &bthr, int64_t fit);
  /// Values of all m rows of bx: per (token, head) split, fit and codes.
  kvq_status quantizeValues(Staging &st, int64_t m, const Buffer &bx,
                            const Buffer &bmask, const Buffer &bcodes,
                            const Buffer &bscratch, const Buffer &blevels);

  const kvq_config cfg_;
  Device &dev_;
  const int64_t C_, H_, D_;
  const int kb_, vb_;
  const int64_t kL_, vL_;
  const bool frozen_; ///< refit_interval == 0: one frozen key segment
  const int64_t keyCodes_, valueCodes_, valueLevels_, tableBytes_, tableStride_;

  // Host bookkeeping (the source of truth; records mirrored to dtok_).
  std::vector<kvq_metal_kvquant_token> tok_;
  std::vector<uint8_t> sink_;
  std::vector<int32_t> freeRows_;
  std::vector<float> thresholds_; ///< frozen: segment 0's, as floats
  int64_t segments_ = 0, poolRows_ = 0, karena_ = 0, varena_ = 0;
  int64_t quantizedUpTo_ = 0; ///< refit mode: [this, L) await a fit
  int64_t seg0End_ = 0; ///< segment 0 was fit on [sinks, seg0End_) (0: none)

  DeviceArray dtok_, dpool_, dkarena_, dvarena_, dtables_;
  RopeTable rope_;
};

kvq_metal_kvquant_view KvquantLayer::view() const {
  kvq_metal_kvquant_view p{};
  p.length = static_cast<uint64_t>(length());
  p.kv_heads = static_cast<uint32_t>(H_);
  p.head_dim = static_cast<uint32_t>(D_);
  p.key_bits = static_cast<uint32_t>(kb_);
  p.value_bits = static_cast<uint32_t>(vb_);
  p.table_stride = static_cast<uint32_t>(tableStride_);
  p.key_codes = static_cast<uint32_t>(keyCodes_);
  p.value_codes = static_cast<uint32_t>(valueCodes_);
  p.rope = rope_.style();
  return p;
}

kvq_status KvquantLayer::quantizeKeys(Staging &st, const Batch &bt,
                                      int64_t first, const Buffer &bx,
                                      const Buffer &bmask, const Buffer &bcodes,
                                      const Buffer &bscratch,
                                      const Buffer &btab, const Buffer &bthr,
                                      int64_t fit) {
  const int64_t C = C_, m = bt.b - bt.a, row0 = bt.a - first;
  const size_t xOff = 2 * C * row0, eOff = C * row0;
  // Per-channel vectors over the batch's m rows.
  kvq_metal_matrix p = matrix(m, C, m, KVQ_AXIS_PER_CHANNEL, kb_);
  if (bt.fresh) {
    // Exactly k = ceil(f * m) outliers per channel, left out of the fit.
    kvq_metal_matrix ps = p;
    ps.fraction = cfg_.outlier_fraction;
    Arg split[] = {Arg::buf(bx, xOff), Arg::buf(bmask, eOff),
                   Arg::buf(bmask, eOff), Arg::buf(bthr, 4 * C * fit),
                   Arg::val(ps)};
    if (kvq_status s = dev_.run("kvq_outlier_split", split, 5,
                                static_cast<uint32_t>(C), kPlainThreadgroup))
      return s;
    kvq_metal_matrix pf = p;
    pf.has_exclude = 1;
    pf.iters = static_cast<uint32_t>(cfg_.lloyd_iters);
    Arg lloyd[] = {Arg::buf(bx, xOff), Arg::buf(bmask, eOff),
                   Arg::buf(bscratch), Arg::buf(btab, 2 * C * kL_ * fit),
                   Arg::val(pf)};
    if (kvq_status s = dev_.run("kvq_nuq_fit", lloyd, 5,
                                static_cast<uint32_t>(C), kPlainThreadgroup))
      return s;
  } else {
    // Decode keys: |x| >= the threshold frozen at prefill.
    const Buffer *bfrozen = st.make(4 * C, thresholds_.data());
    if (st.failed())
      return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                         "failed");
    kvq_metal_matrix ps = matrix(m, C, 1, KVQ_AXIS_PER_TOKEN, 8);
    Arg screen[] = {Arg::buf(bx, xOff), Arg::buf(*bfrozen),
                    Arg::buf(bmask, eOff), Arg::val(ps)};
    if (kvq_status s =
            dev_.run("kvq_outlier_screen", screen, 4,
                     static_cast<uint32_t>(m * C), kPlainThreadgroup))
      return s;
  }
  // Every element gets its nearest level, outliers included (their dense
  // slot stays, as in the CPU store).
  const Buffer &levels = bt.fresh ? btab : dtables_.buffer();
  const size_t levelsOff = bt.fresh ? 2 * C * kL_ * fit : 0;
  Arg quant[] = {Arg::buf(bx, xOff), Arg::buf(levels, levelsOff),
                 Arg::buf(bcodes, eOff), Arg::val(p)};
  return dev_.run("kvq_nuq_quant", quant, 4, static_cast<uint32_t>(m * C),
                  kPlainThreadgroup);
}

kvq_status KvquantLayer::quantizeValues(Staging &, int64_t m, const Buffer &bx,
                                        const Buffer &bmask,
                                        const Buffer &bcodes,
                                        const Buffer &bscratch,
                                        const Buffer &blevels) {
  // One vector per (token, head): head_dim elements of a row.
  const int64_t C = C_, vectors = m * H_;
  kvq_metal_matrix p = matrix(m, C, D_, KVQ_AXIS_PER_TOKEN, vb_);
  kvq_metal_matrix ps = p;
  ps.fraction = cfg_.outlier_fraction;
  Arg split[] = {Arg::buf(bx), Arg::buf(bmask), Arg::buf(bmask),
                 Arg::buf(bscratch), Arg::val(ps)};
  // The split's thresholds are not kept: scratch holds them until the fit
  // overwrites it.
  if (kvq_status s =
          dev_.run("kvq_outlier_split", split, 5,
                   static_cast<uint32_t>(vectors), kPlainThreadgroup))
    return s;
  kvq_metal_matrix pf = p;
  pf.has_exclude = 1;
  pf.iters = static_cast<uint32_t>(cfg_.lloyd_iters);
  Arg lloyd[] = {Arg::buf(bx), Arg::buf(bmask), Arg::buf(bscratch),
                 Arg::buf(blevels), Arg::val(pf)};
  if (kvq_status s =
          dev_.run("kvq_nuq_fit", lloyd, 5, static_cast<uint32_t>(vectors),
                   kPlainThreadgroup))
    return s;
  Arg quant[] = {Arg::buf(bx), Arg::buf(blevels), Arg::buf(bcodes),
                 Arg::val(p)};
  return dev_.run("kvq_nuq_quant", quant, 4, static_cast<uint32_t>(m * C),
                  kPlainThreadgroup);
}

kvq_status KvquantLayer::update(const uint16_t *k, const uint16_t *v,
                                int64_t n) {
  const int64_t C = C_, L0 = length(), L1 = L0 + n, row = 2 * C;
  auto oom = [] {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  };

  // 1. The policy (kvquant_plan.h), as the CPU store executes it; fresh
  // batches get the next segment numbers.
  const KvquantPlan plan =
      planKvquantUpdate(cfg_, L0, quantizedUpTo_, segments_, n);
  const int64_t sinks = plan.sinks, first = plan.first,
                quantEnd = plan.quantEnd;
  std::vector<Batch> batches;
  for (const KvquantBatch &b : plan.batches)
    batches.push_back({b.from, b.to, b.fresh, 0});
  int64_t fits = 0;
  for (Batch &b : batches)
    if (b.fresh)
      b.segment = segments_ + fits++;
  const int64_t m = quantEnd - first;
  auto isSink = [&](int64_t p) { return p < L0 ? sink_[p] != 0 : p < sinks; };

  // 2. The rows to quantize, then the kernels, into staging buffers.
  Staging st(dev_);
  const Buffer *bk = nullptr, *bv = nullptr, *bkmask = nullptr,
               *bkcodes = nullptr, *bkpacked = nullptr, *btab = nullptr,
               *bthr = nullptr, *bscratch = nullptr, *bvmask = nullptr,
               *bvcodes = nullptr, *bvpacked = nullptr, *bvlevels = nullptr;
  if (m > 0) {
    // The element-wise kernels run one thread per element of the batch.
    if (kvq_status s = checkGrid(m * C, "kvq_metal_cache_update"))
      return s;
    bk = st.make(row * m);
    bv = st.make(row * m);
    bkmask = st.make(m * C);
    bkcodes = st.make(m * C);
    bkpacked = st.make(m * keyCodes_);
    btab = st.make(2 * C * kL_ * std::max<int64_t>(fits, 1));
    bthr = st.make(4 * C * std::max<int64_t>(fits, 1));
    bscratch = st.make(4 * m * C);
    bvmask = st.make(m * C);
    bvcodes = st.make(m * C);
    bvpacked = st.make(m * valueCodes_);
    bvlevels = st.make(2 * m * H_ * vL_);
    if (st.failed())
      return oom();
    for (int64_t p = first; p < quantEnd; ++p) {
      const int64_t i = p - first;
      const void *kr = p >= L0 ? static_cast<const void *>(k + (p - L0) * C)
                               : dpool_.bytes() + row * tok_[p].kref;
      const void *vr = p >= L0 ? static_cast<const void *>(v + (p - L0) * C)
                               : dpool_.bytes() + row * tok_[p].vref;
      std::memcpy(bytesOf(bk) + row * i, kr, row);
      std::memcpy(bytesOf(bv) + row * i, vr, row);
    }
    int64_t fit = 0;
    for (const Batch &b : batches)
      if (kvq_status s =
              quantizeKeys(st, b, first, *bk, *bkmask, *bkcodes, *bscratch,
                           *btab, *bthr, b.fresh ? fit++ : 0))
        return s;
    if (kvq_status s =
            packCodes(st, *bkcodes, m, C, kb_, *bkpacked, 0, keyCodes_))
      return s;
    if (kvq_status s =
            quantizeValues(st, m, *bv, *bvmask, *bvcodes, *bscratch, *bvlevels))
      return s;
    if (kvq_status s =
            packCodes(st, *bvcodes, m, C, vb_, *bvpacked, 0, valueCodes_))
      return s;
  }

  // 3. Sizes of everything the update adds, then device space, before any
  // state changes.
  std::vector<uint32_t> kOut(static_cast<size_t>(m)), vOut(kOut.size());
  int64_t karenaNeed = karena_, varenaNeed = varena_;
  for (int64_t i = 0; i < m; ++i) {
    const uint8_t *km = bytesOf(bkmask) + C * i, *vm = bytesOf(bvmask) + C * i;
    kOut[i] = static_cast<uint32_t>(std::count(km, km + C, uint8_t{1}));
    vOut[i] = static_cast<uint32_t>(std::count(vm, vm + C, uint8_t{1}));
    karenaNeed += align4(keyCodes_ + kOutlierBytes * kOut[i]);
    varenaNeed += align4(valueLevels_ + valueCodes_ + kOutlierBytes * vOut[i]);
  }
  if (karenaNeed > kMaxArenaBytes || varenaNeed > kMaxArenaBytes)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "metal cache: a code arena would exceed 4 GiB");
  int64_t newRows = 0;
  for (int64_t p = L0; p < L1; ++p)
    newRows += (isSink(p) || p >= quantEnd) ? 2 : 0;
  const int64_t rowsAfter =
      poolRows_ +
      std::max<int64_t>(0, newRows - static_cast<int64_t>(freeRows_.size()));
  const int64_t segmentsAfter = segments_ + fits;
  const int64_t rec = sizeof(kvq_metal_kvquant_token);
  if (!dtok_.reserve(rec * L1) ||
      !dpool_.reserve(row * std::max<int64_t>(rowsAfter, 1)) ||
      !dkarena_.reserve(std::max<int64_t>(karenaNeed, 1)) ||
      !dvarena_.reserve(std::max<int64_t>(varenaNeed, 1)) ||
      !dtables_.reserve(tableStride_ * std::max<int64_t>(segmentsAfter, 1)) ||
      !rope_.cover(L1))
    return oom();

  // 4. Write the new payload where no committed state lives: fresh pool
  // rows (from a copy of the free list), arena space past the end, new
  // table slots. Nothing below fails.
  std::vector<kvq_metal_kvquant_token> tok(tok_.begin(), tok_.end());
  tok.resize(static_cast<size_t>(L1), kvq_metal_kvquant_token{});
  std::vector<int32_t> freeRows = freeRows_, retired;
  int64_t poolRows = poolRows_;
  auto takeRow = [&]() -> int32_t {
    if (!freeRows.empty()) {
      int32_t r = freeRows.back();
      freeRows.pop_back();
      return r;
    }
    return static_cast<int32_t>(poolRows++);
  };
  for (int64_t p = L0; p < L1; ++p) {
    kvq_metal_kvquant_token &t = tok[p];
    t.kref = t.vref = -1;
    if (isSink(p) || p >= quantEnd) {
      t.kref = takeRow();
      std::memcpy(dpool_.bytes() + row * t.kref, k + (p - L0) * C, row);
      t.vref = takeRow();
      std::memcpy(dpool_.bytes() + row * t.vref, v + (p - L0) * C, row);
    }
  }
  // Outliers are the row's own fp16 elements, in channel order.
  auto outliers = [&](const uint8_t *x, const uint8_t *mask, uint8_t *out) {
    for (int64_t c = 0; c < C; ++c)
      if (mask[c]) {
        std::memcpy(out, x + 2 * c, 2);
        out[2] = static_cast<uint8_t>(c & 0xff);
        out[3] = static_cast<uint8_t>(c >> 8);
        out += kOutlierBytes;
      }
  };
  int64_t karena = karena_, varena = varena_;
  size_t bi = 0;
  for (int64_t p = first; p < quantEnd; ++p) {
    const int64_t i = p - first;
    while (p >= batches[bi].b)
      ++bi;
    kvq_metal_kvquant_token &t = tok[p];
    if (p < L0) { // a token that waited fp16 for its refit
      retired.push_back(t.kref);
      retired.push_back(t.vref);
    }
    t.kref = t.vref = -1;
    t.segment = static_cast<uint32_t>(batches[bi].segment);
    t.kblock = static_cast<uint32_t>(karena);
    t.kout = kOut[i];
    uint8_t *kblk = dkarena_.bytes() + karena;
    std::memcpy(kblk, bytesOf(bkpacked) + keyCodes_ * i, keyCodes_);
    outliers(bytesOf(bk) + row * i, bytesOf(bkmask) + C * i, kblk + keyCodes_);
    karena += align4(keyCodes_ + kOutlierBytes * kOut[i]);
    t.vblock = static_cast<uint32_t>(varena);
    t.vout = vOut[i];
    uint8_t *vblk = dvarena_.bytes() + varena;
    std::memcpy(vblk, bytesOf(bvlevels) + valueLevels_ * i, valueLevels_);
    std::memcpy(vblk + valueLevels_, bytesOf(bvpacked) + valueCodes_ * i,
                valueCodes_);
    outliers(bytesOf(bv) + row * i, bytesOf(bvmask) + C * i,
             vblk + valueLevels_ + valueCodes_);
    varena += align4(valueLevels_ + valueCodes_ + kOutlierBytes * vOut[i]);
  }
  // Fresh tables: C x 2^kb levels, then (frozen) the C thresholds in fp16
  // (the k-th largest |x| of an fp16 channel, or +inf: exact).
  std::vector<float> thresholds = thresholds_;
  for (int64_t f = 0; f < fits; ++f) {
    uint8_t *table = dtables_.bytes() + tableStride_ * (segments_ + f);
    std::memcpy(table, bytesOf(btab) + 2 * C * kL_ * f, 2 * C * kL_);
    if (!frozen_)
      continue;
    const float *thr = reinterpret_cast<const float *>(bytesOf(bthr)) + C * f;
    thresholds.resize(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const uint16_t h = floatToHalf(thr[c]);
      std::memcpy(table + 2 * C * kL_ + 2 * c, &h, 2);
      thresholds[c] = halfToFloat(h);
    }
  }

  // 5. Commit.
  for (int32_t r : retired)
    freeRows.push_back(r);
  const int64_t changedFrom = std::min(first, L0);
  sink_.resize(static_cast<size_t>(L1), 0);
  for (int64_t p = L0; p < L0 + sinks; ++p)
    sink_[p] = 1;
  tok_.swap(tok);
  freeRows_.swap(freeRows);
  thresholds_.swap(thresholds);
  poolRows_ = poolRows;
  karena_ = karena;
  varena_ = varena;
  if (segments_ == 0 && fits > 0)
    seg0End_ = batches.front().b; // the prefill fit
  segments_ = segmentsAfter;
  quantizedUpTo_ = quantEnd;
  std::memcpy(dtok_.bytes() + rec * changedFrom, tok_.data() + changedFrom,
              rec * (L1 - changedFrom));
  return KVQ_OK;
}

kvq_status KvquantLayer::fetch(void *kout, void *vout, kvq_dtype dtype) const {
  return runCacheFetch(
      dev_, "kvq_kvquant_fetch",
      {Arg::buf(dtok_.buffer()), Arg::buf(dpool_.buffer()),
       Arg::buf(dkarena_.buffer()), Arg::buf(dvarena_.buffer()),
       Arg::buf(dtables_.buffer()), rope_.lowArg(), rope_.highArg()},
      view(), length() * C_, dtype, kout, vout);
}

kvq_status KvquantLayer::attend(const float *q, int64_t nq, int32_t qHeads,
                                float *out) const {
  return runCacheAttend(
      dev_, "kvq_kvquant_attend",
      {Arg::buf(dtok_.buffer()), Arg::buf(dpool_.buffer()),
       Arg::buf(dkarena_.buffer()), Arg::buf(dvarena_.buffer()),
       Arg::buf(dtables_.buffer()), rope_.lowArg(), rope_.highArg()},
      view(), q, nq, qHeads, D_, out);
}

/// The CPU store's accounting: fp16 rows are sinks or residual (waiting
/// for a refit); a quantized token counts its codes, its value levels and
/// its outliers; every key segment counts its table.
void KvquantLayer::addStats(kvq_stats &s) const {
  const int64_t rows = 2 * (2 * C_); // K and V fp16 rows
  s.tokens += length();
  for (int64_t p = 0; p < length(); ++p) {
    const kvq_metal_kvquant_token &t = tok_[p];
    if (sink_[p]) {
      ++s.sink_tokens;
      s.sink_bytes += rows;
    } else if (t.kref >= 0) {
      ++s.residual_tokens;
      s.residual_bytes += rows;
    } else {
      ++s.compressed_tokens;
      s.code_bytes += keyCodes_ + valueCodes_;
      s.level_table_bytes += valueLevels_;
      s.outlier_count += t.kout + t.vout;
      s.outlier_bytes += kOutlierBytes * (t.kout + t.vout);
    }
  }
  s.level_table_bytes += segments_ * tableBytes_;
}

/// The saved section: fp16 rows from the pool, key and value rows from
/// the arenas (the CPU store's blocks without the 4-byte padding), the
/// segment tables: the CPU store's bytes.
void KvquantLayer::save(ByteWriter &w) const {
  const int64_t row = 2 * C_;
  auto pooled = [&](int32_t r) { return Span{dpool_.bytes() + row * r, row}; };
  KvquantSection sec;
  sec.tokens = length();
  sec.sinks = std::count(sink_.begin(), sink_.end(), uint8_t{1});
  sec.seg0End = seg0End_;
  sec.quantizedUpTo = quantizedUpTo_;
  for (int64_t j = 0; j < segments_; ++j)
    sec.tables.push_back({dtables_.bytes() + tableStride_ * j, tableBytes_});
  for (const kvq_metal_kvquant_token &t : tok_) {
    KvquantSection::Row r;
    if (t.kref >= 0) {
      r.kf = pooled(t.kref);
      r.vf = pooled(t.vref);
    } else {
      r.kq = {dkarena_.bytes() + t.kblock, keyCodes_ + kOutlierBytes * t.kout};
      r.vq = {dvarena_.bytes() + t.vblock,
              valueLevels_ + valueCodes_ + kOutlierBytes * t.vout};
      r.kOut = static_cast<uint16_t>(t.kout);
      r.vOut = static_cast<uint16_t>(t.vout);
    }
    sec.rows.push_back(r);
  }
  writeSection(w, sec);
}

kvq_status KvquantLayer::load(ByteReader &r) {
  KvquantSection sec;
  if (kvq_status s = readSection(r, cfg_, sec))
    return s;
  const int64_t L = sec.tokens, row = 2 * C_;
  const int64_t nSegs = static_cast<int64_t>(sec.tables.size());
  if (L == 0)
    return KVQ_OK;
  int64_t rows = 0, karena = 0, varena = 0;
  for (const KvquantSection::Row &t : sec.rows) {
    rows += t.kf ? 2 : 0;
    karena += t.kq ? align4(t.kq.n) : 0;
    varena += t.vq ? align4(t.vq.n) : 0;
  }
  if (karena > kMaxArenaBytes || varena > kMaxArenaBytes)
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "metal cache: a code arena would exceed 4 GiB");
  const int64_t rec = sizeof(kvq_metal_kvquant_token);
  if (!dtok_.reserve(rec * L) ||
      !dpool_.reserve(row * std::max<int64_t>(rows, 1)) ||
      !dkarena_.reserve(std::max<int64_t>(karena, 1)) ||
      !dvarena_.reserve(std::max<int64_t>(varena, 1)) ||
      !dtables_.reserve(tableStride_ * std::max<int64_t>(nSegs, 1)) ||
      !rope_.cover(L))
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  for (int64_t j = 0; j < nSegs; ++j)
    std::memcpy(dtables_.bytes() + tableStride_ * j, sec.tables[j].p,
                static_cast<size_t>(tableBytes_));
  if (frozen_ && nSegs > 0) {
    thresholds_.resize(static_cast<size_t>(C_));
    const uint8_t *thr = sec.tables[0].p + 2 * C_ * kL_;
    for (int64_t c = 0; c < C_; ++c) {
      uint16_t h;
      std::memcpy(&h, thr + 2 * c, 2);
      thresholds_[c] = halfToFloat(h);
    }
  }
  auto place = [&](uint8_t *arena, int64_t &end, const Span &block) {
    std::memcpy(arena + end, block.p, static_cast<size_t>(block.n));
    const int64_t at = end;
    end += align4(block.n);
    return static_cast<uint32_t>(at);
  };
  tok_.assign(static_cast<size_t>(L), kvq_metal_kvquant_token{});
  sink_.assign(static_cast<size_t>(L), 0);
  int64_t segment = 0;
  for (int64_t p = 0; p < L; ++p) {
    const KvquantSection::Row &from = sec.rows[p];
    kvq_metal_kvquant_token &t = tok_[p];
    sink_[p] = p < sec.sinks;
    t.kref = t.vref = -1;
    if (from.kf) {
      std::memcpy(dpool_.bytes() + row * poolRows_, from.kf.p, row);
      t.kref = static_cast<int32_t>(poolRows_++);
      std::memcpy(dpool_.bytes() + row * poolRows_, from.vf.p, row);
      t.vref = static_cast<int32_t>(poolRows_++);
      continue;
    }
    while (segment + 1 < nSegs &&
           kvquantSegmentStart(cfg_, sec, segment + 1) <= p)
      ++segment;
    t.segment = static_cast<uint32_t>(segment);
    t.kblock = place(dkarena_.bytes(), karena_, from.kq);
    t.kout = from.kOut;
    t.vblock = place(dvarena_.bytes(), varena_, from.vq);
    t.vout = from.vOut;
  }
  segments_ = nSegs;
  quantizedUpTo_ = sec.quantizedUpTo;
  seg0End_ = sec.seg0End;
  std::memcpy(dtok_.bytes(), tok_.data(), static_cast<size_t>(rec * L));
  return KVQ_OK;
}

} // namespace

std::unique_ptr<CacheLayer>
kvq::metal::makeKvquantLayer(const kvq_config &cfg, Device &dev,
                             std::shared_ptr<const RopeLow> rope) {
  return std::make_unique<KvquantLayer>(cfg, dev, std::move(rope));
}
