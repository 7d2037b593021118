//===- cache_uniform.cpp - The uniform methods of the Metal KV cache -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One layer of a Metal cache with method fp16, kivi or kivi_sink. The host
// keeps the bookkeeping (which tokens are fp16, which are quantized, the
// running sink top-k) and executes the update plan of
// runtime/methods/kivi_plan.h, as the CPU store does, so a Metal cache holds
// the same tokens fp16, the same codes and the same sinks as a CPU cache of
// the same configuration. The payload (fp16 pool, key-group blocks, value
// blocks, per-token references) lives in device buffers, written by the GPU
// kernels (quantization, packing) or by the host through shared memory
// (fp16 rows, block placement), and read by the attention and fetch
// kernels. Layout: attention.metal and docs/METAL.md. With a RoPE the layer
// stores the keys it receives (pre-RoPE) and its fetch and attention
// kernels rotate them at their positions (rope_table.h).
//
//===----------------------------------------------------------------------===//
#include "cache_layer.h"

#include "../kernels/kvq_params.h"
#include "bitpack.h"
#include "device_array.h"
#include "dispatch.h"
#include "fp16.h"
#include "kivi_plan.h"
#include "layer_section.h"
#include "rope_table.h"
#include "serial.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <utility>
#include <vector>

using namespace kvq;
using namespace kvq::metal;

namespace {

/// kgoff entry of a key group that stores nothing (all rows are sinks).
constexpr uint32_t kNoBlock = 0xffffffffu;

int64_t align4(int64_t n) { return (n + 3) & ~int64_t{3}; }

/// One layer of a Metal cache with uniform quantization (or none).
class Layer final : public CacheLayer {
public:
  Layer(const kvq_config &cfg, Device &dev, std::shared_ptr<const RopeLow> rope)
      : cfg_(cfg), dev_(dev), C_(int64_t{cfg.num_kv_heads} * cfg.head_dim),
        G_(cfg.group_size), kb_(cfg.key_bits), vb_(cfg.value_bits),
        fp16_(cfg.method == KVQ_METHOD_FP16), k_(kiviSinkBudget(cfg)),
        vBlockBytes_(fp16_ ? 0 : kiviValueRowLayout(cfg).bytes()),
        vStride_(align4(vBlockBytes_)), dkref_(dev), dvref_(dev), dpool_(dev),
        dkarena_(dev), dkgoff_(dev), dvq_(dev), rope_(std::move(rope), dev) {}

  kvq_status update(const uint16_t *k, const uint16_t *v, int64_t n) override;
  int64_t length() const override { return static_cast<int64_t>(kref_.size()); }
  kvq_status fetch(void *kout, void *vout, kvq_dtype dtype) const override;
  kvq_status attend(const float *q, int64_t nq, int32_t qHeads,
                    float *out) const override;
  void addStats(kvq_stats &s) const override;
  void sinkPositions(std::vector<int64_t> &out) const override {
    flaggedPositions(sink_, out);
  }
  kvq_status checkTruncate(int64_t n) const override;
  void truncate(int64_t n) override;
  std::unique_ptr<CacheLayer> clone() const override;
  void save(ByteWriter &w) const override;
  kvq_status load(ByteReader &r) override;

private:
  using TopK = KiviTopK;
  int64_t keyDone() const { return static_cast<int64_t>(kgoff_.size()) * G_; }
  int64_t keyTarget(int64_t L) const { return kiviKeyTarget(cfg_, L); }
  int64_t valueTarget(int64_t L) const { return kiviValueTarget(cfg_, L); }
  kvq_metal_cache_view view() const;
  kvq_status updateFp16(const uint16_t *k, const uint16_t *v, int64_t n);
  void syncRefs(int64_t from);
  /// Pool row r as a saved block (null for r < 0).
  Span poolRow(int32_t r) const {
    return r < 0 ? Span() : Span{dpool_.bytes() + 2 * C_ * r, 2 * C_};
  }
  /// Copy a loaded fp16 row into the next pool row: its index, or -1 for
  /// a null span.
  int32_t placeRow(const Span &row);
  /// Non-sink rows of key group g (those with code slots).
  int64_t codedRows(int64_t g) const {
    return G_ - std::count(sink_.begin() + g * G_, sink_.begin() + (g + 1) * G_,
                           uint8_t{1});
  }

  const kvq_config cfg_;
  Device &dev_;
  const int64_t C_, G_;
  const int kb_, vb_;
  const bool fp16_;
  const int64_t k_;
  const int64_t vBlockBytes_, vStride_;

  // Host bookkeeping (the source of truth; refs are mirrored to the device).
  std::vector<int32_t> kref_, vref_; ///< >= 0 pool row, < 0 quantized
  std::vector<uint8_t> sink_;
  std::vector<uint32_t> kgoff_; ///< arena offset per key group
  std::vector<int32_t> freeRows_;
  int64_t poolRows_ = 0, arenaBytes_ = 0, vDone_ = 0, decided_ = 0, nSinks_ = 0;
  int64_t keyCodeBytes_ = 0, keyScaleBytes_ = 0;
  TopK top_;

  DeviceArray dkref_, dvref_, dpool_, dkarena_, dkgoff_, dvq_;
  RopeTable rope_;
};

kvq_metal_cache_view Layer::view() const {
  kvq_metal_cache_view p{};
  p.length = static_cast<uint64_t>(length());
  p.kv_heads = static_cast<uint32_t>(cfg_.num_kv_heads);
  p.head_dim = static_cast<uint32_t>(cfg_.head_dim);
  p.group = static_cast<uint32_t>(G_);
  p.key_bits = static_cast<uint32_t>(kb_);
  p.value_bits = static_cast<uint32_t>(vb_);
  p.value_stride = static_cast<uint32_t>(vStride_);
  p.rope = rope_.style();
  return p;
}

void Layer::syncRefs(int64_t from) {
  const size_t bytes = 4 * static_cast<size_t>(length() - from);
  if (bytes == 0)
    return;
  std::memcpy(dkref_.bytes() + 4 * from, kref_.data() + from, bytes);
  std::memcpy(dvref_.bytes() + 4 * from, vref_.data() + from, bytes);
}

kvq_status Layer::updateFp16(const uint16_t *k, const uint16_t *v, int64_t n) {
  const int64_t L0 = length(), L1 = L0 + n, row = 2 * C_;
  if (!dkref_.reserve(4 * L1) || !dvref_.reserve(4 * L1) ||
      !dpool_.reserve(row * (poolRows_ + 2 * n)) || !rope_.cover(L1))
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  kref_.reserve(L1), vref_.reserve(L1), sink_.reserve(L1);
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(dpool_.bytes() + row * poolRows_, k + t * C_, row);
    kref_.push_back(static_cast<int32_t>(poolRows_++));
    std::memcpy(dpool_.bytes() + row * poolRows_, v + t * C_, row);
    vref_.push_back(static_cast<int32_t>(poolRows_++));
    sink_.push_back(0);
  }
  syncRefs(L0);
  return KVQ_OK;
}

kvq_status Layer::update(const uint16_t *k, const uint16_t *v, int64_t n) {
  if (fp16_)
    return updateFp16(k, v, n);
  const int64_t C = C_, L0 = length(), L1 = L0 + n, row = 2 * C;
  auto oom = [] {
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  };
  Staging st(dev_);
  const Buffer *bk = st.make(row * n, k);
  if (st.failed())
    return oom();

  // 1. The policy (kivi_plan.h, shared with the CPU store) from the GPU's
  // key norms of the new tokens.
  const float *norms = nullptr;
  if (k_ > 0) {
    const Buffer *bn = st.make(4 * n);
    if (st.failed())
      return oom();
    kvq_metal_tokens p{};
    p.tokens = static_cast<uint64_t>(n);
    p.kv_heads = static_cast<uint32_t>(cfg_.num_kv_heads);
    p.head_dim = static_cast<uint32_t>(cfg_.head_dim);
    p.dtype = KVQ_DTYPE_F16;
    Arg args[] = {Arg::buf(*bk), Arg::buf(*bn), Arg::val(p)};
    if (kvq_status s = dev_.run("kvq_key_norm", args, 3,
                                static_cast<uint32_t>(n), kPlainThreadgroup))
      return s;
    norms = static_cast<const float *>(bn->data);
  }
  KiviPlan plan = planKiviUpdate(
      cfg_, {L0, keyDone(), vDone_, decided_, nSinks_}, top_, norms, n);
  const int64_t kT = plan.keyTo, vT = plan.valueTo, leaveT = plan.decidedTo;
  auto isSink = [&](int64_t p) {
    return p < decided_ ? sink_[static_cast<size_t>(p)] != 0
                        : plan.becomesSink(p);
  };

  // 2. Device space for everything below, before any state changes.
  int64_t newRows = 0;
  for (int64_t p = L0; p < L1; ++p)
    newRows += (isSink(p) || p >= kT) + (isSink(p) || p >= vT);
  int64_t arenaNeed = arenaBytes_;
  std::vector<int64_t> coded;
  for (int64_t start = keyDone(); start < kT; start += G_) {
    int64_t c = 0;
    for (int64_t i = 0; i < G_; ++i)
      c += !isSink(start + i);
    coded.push_back(c);
    if (c > 0)
      arenaNeed += align4(kiviKeyGroupLayout(cfg_, c).bytes());
  }
  if (arenaNeed > static_cast<int64_t>(kNoBlock))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "metal cache: the key arena would exceed 4 GiB");
  const int64_t rowsAfter =
      poolRows_ + std::max<int64_t>(0, newRows - (int64_t)freeRows_.size());
  const size_t groupsAfter = kgoff_.size() + coded.size();
  if (!dkref_.reserve(4 * L1) || !dvref_.reserve(4 * L1) ||
      !dpool_.reserve(row * std::max<int64_t>(rowsAfter, 1)) ||
      !dkarena_.reserve(std::max<int64_t>(arenaNeed, 1)) ||
      !dkgoff_.reserve(4 * std::max<size_t>(groupsAfter, 1)) ||
      !dvq_.reserve(vStride_ * std::max<int64_t>(vT, 1)) || !rope_.cover(L1))
    return oom();

  // 3. New tokens: fp16 rows into pool rows (taken from a copy of the free
  // list, so a failure below changes nothing).
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
  std::vector<int32_t> kref(kref_.begin(), kref_.end()),
      vref(vref_.begin(), vref_.end());
  kref.resize(L1, -1);
  vref.resize(L1, -1);
  for (int64_t p = L0; p < L1; ++p) {
    const bool s = isSink(p);
    if (s || p >= kT) {
      kref[p] = takeRow();
      std::memcpy(dpool_.bytes() + row * kref[p], k + (p - L0) * C, row);
    }
    if (s || p >= vT) {
      vref[p] = takeRow();
      std::memcpy(dpool_.bytes() + row * vref[p], v + (p - L0) * C, row);
    }
  }
  auto keyRow = [&](int64_t p) -> const void * {
    return p >= L0 ? static_cast<const void *>(k + (p - L0) * C)
                   : dpool_.bytes() + row * kref_[p];
  };
  auto valueRow = [&](int64_t p) -> const void * {
    return p >= L0 ? static_cast<const void *>(v + (p - L0) * C)
                   : dpool_.bytes() + row * vref_[p];
  };

  // 4. Values leaving the window: per-token groups of G channels.
  std::vector<int64_t> vpos;
  for (int64_t p = vDone_; p < vT; ++p)
    if (!isSink(p))
      vpos.push_back(p);
  if (!vpos.empty()) {
    const UniformLayout layout = kiviValueRowLayout(cfg_); // blocks.h
    const int64_t m = static_cast<int64_t>(vpos.size()), groups = layout.pairs;
    const int64_t packedRow = layout.codeBytes;
    const Buffer *bx = st.make(row * m);
    const Buffer *bcodes = st.make(m * C);
    const Buffer *bscale = st.make(2 * m * groups);
    const Buffer *bzero = st.make(2 * m * groups);
    const Buffer *bpacked = st.make(m * packedRow);
    if (st.failed())
      return oom();
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(static_cast<uint8_t *>(bx->data) + row * i, valueRow(vpos[i]),
                  row);
    Geometry g{m, C, G_, KVQ_AXIS_PER_TOKEN};
    kvq_metal_matrix p = matrixParams(g, vb_, KVQ_DTYPE_F16);
    Arg args[] = {Arg::buf(*bx),     Arg::buf(*bx),    Arg::buf(*bcodes),
                  Arg::buf(*bscale), Arg::buf(*bzero), Arg::val(p)};
    if (kvq_status s =
            dev_.run("kvq_uniform_quant", args, 6,
                     static_cast<uint32_t>(m * groups), kPlainThreadgroup))
      return s;
    if (kvq_status s =
            packCodes(st, *bcodes, m, C, vb_, *bpacked, 0, packedRow))
      return s;
    for (int64_t i = 0; i < m; ++i) {
      const UniformBlock<uint8_t> blk =
          uniformBlock(dvq_.bytes() + vStride_ * vpos[i], layout);
      std::memcpy(blk.scalesThenZeros(),
                  static_cast<uint8_t *>(bscale->data) + 2 * groups * i,
                  2 * groups);
      std::memcpy(blk.scalesThenZeros() + 2 * groups,
                  static_cast<uint8_t *>(bzero->data) + 2 * groups * i,
                  2 * groups);
      std::memcpy(blk.codes(),
                  static_cast<uint8_t *>(bpacked->data) + packedRow * i,
                  packedRow);
      if (vpos[i] < L0)
        retired.push_back(vref_[vpos[i]]);
      vref[vpos[i]] = -1;
    }
  }

  // 5. Key groups leaving the window: per-channel groups of G tokens, sink
  // rows left out of the min/max and of the stored codes.
  std::vector<uint32_t> kgoff = kgoff_;
  int64_t arena = arenaBytes_, keyCode = keyCodeBytes_,
          keyScale = keyScaleBytes_;
  size_t gi = 0;
  for (int64_t start = keyDone(); start < kT; start += G_, ++gi) {
    if (coded[gi] == 0) {
      kgoff.push_back(kNoBlock); // an all-sink group stores nothing
      continue;
    }
    const Buffer *bx = st.make(row * G_);
    const Buffer *bex = st.make(G_ * C);
    const Buffer *bcodes = st.make(G_ * C);
    const Buffer *bscale = st.make(2 * C);
    const Buffer *bzero = st.make(2 * C);
    if (st.failed())
      return oom();
    for (int64_t i = 0; i < G_; ++i) {
      std::memcpy(static_cast<uint8_t *>(bx->data) + row * i, keyRow(start + i),
                  row);
      if (isSink(start + i))
        std::memset(static_cast<uint8_t *>(bex->data) + C * i, 1, C);
    }
    Geometry g{G_, C, G_, KVQ_AXIS_PER_CHANNEL};
    kvq_metal_matrix p = matrixParams(g, kb_, KVQ_DTYPE_F16);
    p.has_exclude = coded[gi] < G_ ? 1u : 0u;
    Arg args[] = {Arg::buf(*bx),     Arg::buf(*bex),   Arg::buf(*bcodes),
                  Arg::buf(*bscale), Arg::buf(*bzero), Arg::val(p)};
    if (kvq_status s = dev_.run("kvq_uniform_quant", args, 6,
                                static_cast<uint32_t>(C), kPlainThreadgroup))
      return s;
    // Sink rows have no code slots: compact the coded rows, then pack.
    uint8_t *codes = static_cast<uint8_t *>(bcodes->data);
    int64_t c = 0;
    for (int64_t i = 0; i < G_; ++i) {
      if (isSink(start + i))
        continue;
      if (c != i)
        std::memmove(codes + c * C, codes + i * C, C);
      const int64_t pos = start + i;
      if (pos < L0)
        retired.push_back(kref_[pos]);
      kref[pos] = -static_cast<int32_t>(c + 1);
      ++c;
    }
    // The CPU store's key group block (blocks.h): scales, zeros, codes.
    const UniformLayout group = kiviKeyGroupLayout(cfg_, c);
    const UniformBlock<uint8_t> blk =
        uniformBlock(dkarena_.bytes() + arena, group);
    std::memcpy(blk.scalesThenZeros(), bscale->data, 2 * C);
    std::memcpy(blk.scalesThenZeros() + 2 * C, bzero->data, 2 * C);
    if (kvq_status s = packCodes(st, *bcodes, 1, c * C, kb_, dkarena_.buffer(),
                                 arena + group.codesOffset(), group.codeBytes))
      return s;
    kgoff.push_back(static_cast<uint32_t>(arena));
    arena += align4(group.bytes());
    keyCode += group.codeBytes;
    keyScale += group.codesOffset();
  }

  // 6. Commit: nothing below fails.
  for (int32_t r : retired)
    freeRows.push_back(r);
  sink_.resize(L1, 0);
  for (int64_t p = decided_; p < leaveT; ++p)
    sink_[p] = plan.becomesSink(p) ? 1 : 0;
  const int64_t changedFrom = std::min(std::min(keyDone(), vDone_), L0);
  kref_.swap(kref);
  vref_.swap(vref);
  kgoff_.swap(kgoff);
  freeRows_.swap(freeRows);
  poolRows_ = poolRows;
  arenaBytes_ = arena;
  keyCodeBytes_ = keyCode;
  keyScaleBytes_ = keyScale;
  vDone_ = vT;
  decided_ = leaveT;
  nSinks_ = plan.sinks;
  top_.swap(plan.top);
  syncRefs(changedFrom);
  if (!kgoff_.empty())
    std::memcpy(dkgoff_.bytes(), kgoff_.data(), 4 * kgoff_.size());
  return KVQ_OK;
}

kvq_status Layer::fetch(void *kout, void *vout, kvq_dtype dtype) const {
  return runCacheFetch(dev_, "kvq_cache_fetch",
                       {Arg::buf(dkref_.buffer()), Arg::buf(dvref_.buffer()),
                        Arg::buf(dpool_.buffer()), Arg::buf(dkarena_.buffer()),
                        Arg::buf(dkgoff_.buffer()), Arg::buf(dvq_.buffer()),
                        rope_.lowArg(), rope_.highArg()},
                       view(), length() * C_, dtype, kout, vout);
}

kvq_status Layer::attend(const float *q, int64_t nq, int32_t qHeads,
                         float *out) const {
  return runCacheAttend(dev_, "kvq_cache_attend",
                        {Arg::buf(dkref_.buffer()), Arg::buf(dvref_.buffer()),
                         Arg::buf(dpool_.buffer()), Arg::buf(dkarena_.buffer()),
                         Arg::buf(dkgoff_.buffer()), Arg::buf(dvq_.buffer()),
                         rope_.lowArg(), rope_.highArg()},
                        view(), q, nq, qHeads, cfg_.head_dim, out);
}

void Layer::addStats(kvq_stats &s) const {
  const int64_t row = 2 * C_;
  s.tokens += length();
  for (int64_t p = 0; p < length(); ++p) {
    const int64_t fp16Rows = (kref_[p] >= 0) + (vref_[p] >= 0);
    if (sink_[p]) {
      ++s.sink_tokens;
      s.sink_bytes += row * fp16Rows;
    } else if (fp16Rows > 0) {
      ++s.residual_tokens;
      s.residual_bytes += row * fp16Rows;
    } else {
      ++s.compressed_tokens;
    }
    if (vref_[p] < 0) {
      s.scale_zero_bytes += 4 * (C_ / G_);
      s.code_bytes += kiviValueRowLayout(cfg_).codeBytes;
    }
  }
  s.scale_zero_bytes += keyScaleBytes_;
  s.code_bytes += keyCodeBytes_;
}

/// fp16: every cut. kivi(_sink): the kivi_lifecycle.cpp rule without its
/// rollback history: keys and values quantized exactly as far as a layer
/// of n tokens quantizes them, and a full top-k free of dropped positions.
kvq_status Layer::checkTruncate(int64_t n) const {
  if (fp16_)
    return KVQ_OK;
  if (keyDone() != keyTarget(n) || vDone_ != valueTarget(n))
    return fail(KVQ_ERR_NOT_EXACT,
                "metal cache: keeping %lld of %lld tokens would return "
                "quantized rows to fp16 (the Metal cache keeps no rollback "
                "history)",
                static_cast<long long>(n), static_cast<long long>(length()));
  if (int64_t p = droppedTopKPosition(top_, k_, n); p >= 0)
    return fail(KVQ_ERR_NOT_EXACT,
                "metal cache: dropped token %lld is in the running "
                "top-%lld of key norms",
                static_cast<long long>(p), static_cast<long long>(k_));
  return KVQ_OK;
}

void Layer::truncate(int64_t n) {
  // The dropped tokens hold fp16 pool rows only (checkTruncate), no sink
  // (sinks lie below decided_ <= n) and no key group or value block.
  if (fp16_) {
    poolRows_ = 2 * n; // updateFp16 appends K, V rows in token order
  } else {
    for (int64_t p = n; p < length(); ++p)
      for (int32_t r : {kref_[p], vref_[p]})
        if (r >= 0)
          freeRows_.push_back(r);
  }
  kref_.resize(n);
  vref_.resize(n);
  sink_.resize(n);
  top_.erase(std::remove_if(top_.begin(), top_.end(),
                            [&](const auto &e) { return e.second >= n; }),
             top_.end());
}

std::unique_ptr<CacheLayer> Layer::clone() const {
  auto c = std::make_unique<Layer>(cfg_, dev_, rope_.low());
  c->kref_ = kref_;
  c->vref_ = vref_;
  c->sink_ = sink_;
  c->kgoff_ = kgoff_;
  c->freeRows_ = freeRows_;
  c->poolRows_ = poolRows_;
  c->arenaBytes_ = arenaBytes_;
  c->vDone_ = vDone_;
  c->decided_ = decided_;
  c->nSinks_ = nSinks_;
  c->keyCodeBytes_ = keyCodeBytes_;
  c->keyScaleBytes_ = keyScaleBytes_;
  c->top_ = top_;
  if (!c->dkref_.copyFrom(dkref_) || !c->dvref_.copyFrom(dvref_) ||
      !c->dpool_.copyFrom(dpool_) || !c->dkarena_.copyFrom(dkarena_) ||
      !c->dkgoff_.copyFrom(dkgoff_) || !c->dvq_.copyFrom(dvq_) ||
      !c->rope_.copyFrom(rope_))
    return nullptr;
  return c;
}

/// The saved section: fp16 rows from the pool, value blocks from their
/// slots, key groups with their codes turned nibble-major where the CPU
/// layout has them so (kiviKeysNibbleMajor): the CPU store's bytes.
void Layer::save(ByteWriter &w) const {
  const int64_t L = length();
  if (fp16_) {
    Fp16Section sec;
    for (int64_t p = 0; p < L; ++p) {
      sec.k.push_back(poolRow(kref_[p]));
      sec.v.push_back(poolRow(vref_[p]));
    }
    writeSection(w, sec);
    return;
  }
  KiviSection sec;
  sec.tokens = L;
  sinkPositions(sec.sinks);
  sec.top = top_;
  for (int64_t p = 0; p < L; ++p) {
    sec.kf.push_back(poolRow(kref_[p]));
    sec.vf.push_back(poolRow(vref_[p]));
    sec.vq.push_back(vref_[p] >= 0
                         ? Span()
                         : Span{dvq_.bytes() + vStride_ * p, vBlockBytes_});
  }
  const bool nibble = kiviKeysNibbleMajor(cfg_);
  std::vector<std::vector<uint8_t>> converted;
  converted.reserve(kgoff_.size()); // never reallocates: the spans hold
  std::vector<uint8_t> codes;
  for (size_t g = 0; g < kgoff_.size(); ++g) {
    if (kgoff_[g] == kNoBlock) {
      sec.keyGroups.push_back(Span());
      continue;
    }
    const int64_t rows = codedRows(static_cast<int64_t>(g));
    const Span block{dkarena_.bytes() + kgoff_[g],
                     kiviKeyGroupLayout(cfg_, rows).bytes()};
    if (!nibble) {
      sec.keyGroups.push_back(block);
      continue;
    }
    std::vector<uint8_t> &b =
        converted.emplace_back(block.p, block.p + block.n);
    codes.resize(static_cast<size_t>(rows * C_));
    unpackCodesRef(block.p + 4 * C_, rows * C_, kb_, codes.data());
    packNibbleMajor(codes.data(), rows, C_, kb_, b.data() + 4 * C_);
    sec.keyGroups.push_back({b.data(), block.n});
  }
  writeSection(w, sec);
}

int32_t Layer::placeRow(const Span &row) {
  if (!row)
    return -1;
  std::memcpy(dpool_.bytes() + 2 * C_ * poolRows_, row.p,
              static_cast<size_t>(row.n));
  return static_cast<int32_t>(poolRows_++);
}

kvq_status Layer::load(ByteReader &r) {
  Fp16Section plain;
  KiviSection sec;
  if (kvq_status s =
          fp16_ ? readSection(r, cfg_, plain) : readSection(r, cfg_, sec))
    return s;
  if (fp16_) { // as a kivi section with every row in the window
    sec.tokens = static_cast<int64_t>(plain.k.size());
    sec.kf.swap(plain.k);
    sec.vf.swap(plain.v);
    sec.vq.assign(sec.kf.size(), Span());
  }
  const int64_t L = sec.tokens;
  if (L == 0)
    return KVQ_OK;
  int64_t rows = 0, arena = 0;
  for (int64_t p = 0; p < L; ++p)
    rows += !!sec.kf[p] + !!sec.vf[p];
  for (const Span &b : sec.keyGroups)
    if (b)
      arena += align4(b.n);
  if (arena > static_cast<int64_t>(kNoBlock))
    return fail(KVQ_ERR_INVALID_ARGUMENT,
                "metal cache: the key arena would exceed 4 GiB");
  const int64_t vT = fp16_ ? 0 : valueTarget(L);
  if (!dkref_.reserve(4 * L) || !dvref_.reserve(4 * L) ||
      !dpool_.reserve(2 * C_ * std::max<int64_t>(rows, 1)) ||
      !dkarena_.reserve(std::max<int64_t>(arena, 1)) ||
      !dkgoff_.reserve(4 * std::max<size_t>(sec.keyGroups.size(), 1)) ||
      !dvq_.reserve(vStride_ * std::max<int64_t>(vT, 1)) || !rope_.cover(L))
    return fail(KVQ_ERR_OUT_OF_MEMORY, "metal cache: device allocation "
                                       "failed");
  sink_.assign(static_cast<size_t>(L), 0);
  for (int64_t p : sec.sinks)
    sink_[static_cast<size_t>(p)] = 1;
  kref_.resize(static_cast<size_t>(L));
  vref_.resize(static_cast<size_t>(L));
  for (int64_t p = 0; p < L; ++p) {
    kref_[p] = placeRow(sec.kf[p]); // quantized keys: set below
    vref_[p] = placeRow(sec.vf[p]);
    if (sec.vq[p])
      std::memcpy(dvq_.bytes() + vStride_ * p, sec.vq[p].p,
                  static_cast<size_t>(sec.vq[p].n));
  }
  const bool nibble = kiviKeysNibbleMajor(cfg_);
  std::vector<uint8_t> codes;
  for (size_t g = 0; g < sec.keyGroups.size(); ++g) {
    const Span &b = sec.keyGroups[g];
    if (!b) {
      kgoff_.push_back(kNoBlock);
      continue;
    }
    const int64_t start = static_cast<int64_t>(g) * G_;
    int32_t coded = 0;
    for (int64_t p = start; p < start + G_; ++p)
      if (!sink_[p])
        kref_[p] = -(++coded);
    uint8_t *to = dkarena_.bytes() + arenaBytes_;
    std::memcpy(to, b.p, static_cast<size_t>(b.n));
    if (nibble) {
      codes.resize(static_cast<size_t>(coded * C_));
      unpackNibbleMajor(b.p + 4 * C_, coded, C_, kb_, codes.data());
      packCodesRef(codes.data(), coded * C_, kb_, to + 4 * C_);
    }
    kgoff_.push_back(static_cast<uint32_t>(arenaBytes_));
    arenaBytes_ += align4(b.n);
    keyScaleBytes_ += 4 * C_;
    keyCodeBytes_ += b.n - 4 * C_;
  }
  vDone_ = vT;
  decided_ = fp16_ ? 0 : std::max(keyTarget(L), vT);
  nSinks_ = static_cast<int64_t>(sec.sinks.size());
  top_ = std::move(sec.top);
  syncRefs(0);
  if (!kgoff_.empty())
    std::memcpy(dkgoff_.bytes(), kgoff_.data(), 4 * kgoff_.size());
  return KVQ_OK;
}

} // namespace

std::unique_ptr<CacheLayer>
kvq::metal::makeUniformLayer(const kvq_config &cfg, Device &dev,
                             std::shared_ptr<const RopeLow> rope) {
  return std::make_unique<Layer>(cfg, dev, std::move(rope));
}
