//===- layer_section.cpp - The layer sections of a saved cache ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Writers and checking readers of the per-method layer sections
// (layer_section.h, docs/RUNTIME.md "Saved cache format"). Which blocks a
// token or group holds follows from the configuration, the token count and
// the sinks, so none is flagged in the data.
//
//===----------------------------------------------------------------------===//
#include "layer_section.h"

#include "kivi_plan.h"
#include "serial.h"
#include "status.h"
#include "store_io.h"

#include <algorithm>
#include <cmath>

using namespace kvq;

namespace {

void put(ByteWriter &w, const Span &s) {
  if (s)
    w.bytes(s.p, s.n);
}

/// The next `halves` fp16 values of r, all finite, into out.
kvq_status takeHalfRow(ByteReader &r, int64_t halves, const char *what,
                       Span &out) {
  kvq_status s = KVQ_OK;
  const uint8_t *p = takeBytes(r, 2 * halves, what, &s);
  if (!p)
    return s;
  if (!halvesFinite(p, halves))
    return fail(kCorrupt, "%s: an fp16 value is not finite", what);
  out = {p, 2 * halves};
  return KVQ_OK;
}

/// The next `bytes` bytes of r, a uniform block (n fp16 scales, n fp16
/// zeros, then codes of `bits` bits), into out; bad receives the first of
/// its n (scale, zero) pairs that fails uniformGroupOk, or -1 (the caller
/// names it).
kvq_status takeUniformBlock(ByteReader &r, int64_t bytes, int64_t n, int bits,
                            const char *what, Span &out, int64_t &bad) {
  kvq_status s = KVQ_OK;
  const uint8_t *b = takeBytes(r, bytes, what, &s);
  if (!b)
    return s;
  bad = -1;
  const UniformBlock<const uint8_t> blk{b, n};
  for (int64_t i = 0; i < n && bad < 0; ++i)
    if (!uniformGroupOk(blk.scale(i), blk.zero(i), bits))
      bad = i;
  out = {b, bytes};
  return KVQ_OK;
}

/// A saved row's outlier list (fp16 value, u16 channel) x n: finite values,
/// channels inside the row and strictly ascending, as the stores write
/// them (AttendOps::outlierAxpy's contract: distinct channels).
bool outliersOk(const uint8_t *p, int64_t n, int64_t channels) {
  const OutlierList<const uint8_t> list{p};
  int64_t previous = -1;
  for (int64_t o = 0; o < n; ++o) {
    const OutlierEntry e = list.at(o);
    if (!halfFinite(e.value) || e.channel >= channels || e.channel <= previous)
      return false;
    previous = e.channel;
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// fp16: tokens u64; per token its K row then its V row.
//===----------------------------------------------------------------------===//

void kvq::writeSection(ByteWriter &w, const Fp16Section &s) {
  writeFp16Tokens(w, static_cast<int64_t>(s.k.size()));
  writeFp16Rows(w, s);
}

void kvq::writeFp16Tokens(ByteWriter &w, int64_t tokens) {
  w.u64(static_cast<uint64_t>(tokens));
}

void kvq::writeFp16Rows(ByteWriter &w, const Fp16Section &s) {
  for (size_t t = 0; t < s.k.size(); ++t) {
    put(w, s.k[t]);
    put(w, s.v[t]);
  }
}

kvq_status kvq::readSection(ByteReader &r, const kvq_config &cfg,
                            Fp16Section &s) {
  const int64_t C = channelsOf(cfg);
  int64_t n = 0;
  if (kvq_status st = loadTokenCount(r, "fp16 layer", 4 * C, &n))
    return st;
  s.k.assign(static_cast<size_t>(n), Span());
  s.v.assign(static_cast<size_t>(n), Span());
  for (size_t t = 0; t < s.k.size(); ++t)
    for (Span *row : {&s.k[t], &s.v[t]})
      if (kvq_status st = takeHalfRow(r, C, "fp16 layer: K/V row", *row))
        return st;
  return KVQ_OK;
}

//===----------------------------------------------------------------------===//
// kivi / kivi_sink: tokens; sink positions; the running top-k (norm,
// position); then each token's fp16 K, fp16 V and value block (those it
// holds, in this order); then the key groups that hold codes.
//===----------------------------------------------------------------------===//

void kvq::writeSection(ByteWriter &w, const KiviSection &s) {
  w.u64(static_cast<uint64_t>(s.tokens));
  w.u32(static_cast<uint32_t>(s.sinks.size()));
  for (int64_t p : s.sinks)
    w.u64(static_cast<uint64_t>(p));
  w.u32(static_cast<uint32_t>(s.top.size()));
  for (const auto &e : s.top) {
    w.f32(e.first);
    w.u64(static_cast<uint64_t>(e.second));
  }
  for (int64_t p = 0; p < s.tokens; ++p)
    for (const std::vector<Span> *blocks : {&s.kf, &s.vf, &s.vq})
      put(w, (*blocks)[static_cast<size_t>(p)]);
  for (const Span &b : s.keyGroups)
    put(w, b);
}

kvq_status kvq::readSection(ByteReader &r, const kvq_config &cfg,
                            KiviSection &s) {
  const int64_t C = channelsOf(cfg), G = cfg.group_size, groups = C / G;
  const int64_t k = cfg.method == KVQ_METHOD_KIVI_SINK ? cfg.n_sink_tokens : 0;
  const int kb = cfg.key_bits, vb = cfg.value_bits;
  const int64_t valueBytes = kiviValueRowLayout(cfg).bytes();
  int64_t L = 0;
  if (kvq_status st =
          loadTokenCount(r, "kivi layer", std::min(2 * C, valueBytes), &L))
    return st;
  const int64_t kT = kiviKeyTarget(cfg, L), vT = kiviValueTarget(cfg, L);
  const int64_t decided = std::max(kT, vT);
  uint32_t nSinks = 0;
  if (!r.u32(nSinks) || nSinks > static_cast<uint64_t>(k))
    return fail(kCorrupt, "kivi layer: %u sinks for a budget of %lld", nSinks,
                static_cast<long long>(k));
  std::vector<uint8_t> sink(static_cast<size_t>(L), 0);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < nSinks; ++i) {
    uint64_t p = 0;
    if (!r.u64(p) || p >= static_cast<uint64_t>(decided) ||
        (i > 0 && p <= prev))
      return fail(kCorrupt,
                  "kivi layer: sink %u is not an ascending position below "
                  "%lld (the tokens that left the window)",
                  i, static_cast<long long>(decided));
    sink[static_cast<size_t>(p)] = 1;
    s.sinks.push_back(static_cast<int64_t>(p));
    prev = p;
  }
  uint32_t topSize = 0;
  if (!r.u32(topSize) || topSize != std::min<int64_t>(k, L))
    return fail(kCorrupt, "kivi layer: top-k of %u entries, expected %lld",
                topSize, static_cast<long long>(std::min<int64_t>(k, L)));
  s.top.resize(topSize);
  for (auto &e : s.top) {
    uint64_t p = 0;
    if (!r.f32(e.first) || !r.u64(p) || !std::isfinite(e.first) ||
        e.first < 0.0f || p >= static_cast<uint64_t>(L))
      return fail(kCorrupt, "kivi layer: bad top-k entry");
    e.second = static_cast<int64_t>(p);
  }
  s.tokens = L;
  for (std::vector<Span> *blocks : {&s.kf, &s.vf, &s.vq})
    blocks->assign(static_cast<size_t>(L), Span());
  for (int64_t p = 0; p < L; ++p) {
    const size_t i = static_cast<size_t>(p);
    if (sink[i] || p >= kT)
      if (kvq_status st = takeHalfRow(r, C, "kivi layer: K row", s.kf[i]))
        return st;
    if (sink[i] || p >= vT) {
      if (kvq_status st = takeHalfRow(r, C, "kivi layer: V row", s.vf[i]))
        return st;
      continue;
    }
    int64_t bad = -1;
    if (kvq_status st = takeUniformBlock(
            r, valueBytes, groups, vb, "kivi layer: value block", s.vq[i], bad))
      return st;
    if (bad >= 0)
      return fail(kCorrupt,
                  "kivi layer: token %lld: value group %lld has "
                  "a bad scale/zero",
                  static_cast<long long>(p), static_cast<long long>(bad));
  }
  s.keyGroups.assign(static_cast<size_t>(kT / G), Span());
  for (int64_t g = 0; g < kT / G; ++g) {
    const int64_t coded =
        G - std::count(sink.begin() + g * G, sink.begin() + (g + 1) * G, 1);
    if (coded == 0)
      continue;
    int64_t bad = -1;
    if (kvq_status st = takeUniformBlock(
            r, kiviKeyGroupLayout(cfg, coded).bytes(), C, kb,
            "kivi layer: key group", s.keyGroups[static_cast<size_t>(g)], bad))
      return st;
    if (bad >= 0)
      return fail(kCorrupt,
                  "kivi layer: key group %lld channel %lld has "
                  "a bad scale/zero",
                  static_cast<long long>(g), static_cast<long long>(bad));
  }
  return KVQ_OK;
}

//===----------------------------------------------------------------------===//
// kvquant: tokens, sinks, end of the prefill fit, end of the quantized
// tokens (all u64); the segments' tables (their starts follow from these);
// then per token its fp16 K and V rows (sinks and tokens awaiting a refit),
// or u16 key outliers, u16 value outliers, the key row and the value row.
//===----------------------------------------------------------------------===//

void kvq::writeSection(ByteWriter &w, const KvquantSection &s) {
  for (int64_t v : {s.tokens, s.sinks, s.seg0End, s.quantizedUpTo})
    w.u64(static_cast<uint64_t>(v));
  for (const Span &t : s.tables)
    put(w, t);
  for (const KvquantSection::Row &row : s.rows) {
    if (row.kf) {
      put(w, row.kf);
      put(w, row.vf);
      continue;
    }
    w.u16(row.kOut);
    w.u16(row.vOut);
    put(w, row.kq);
    put(w, row.vq);
  }
}

kvq_status kvq::readSection(ByteReader &r, const kvq_config &cfg,
                            KvquantSection &s) {
  const int64_t C = channelsOf(cfg), every = cfg.refit_interval;
  const bool frozen = every == 0;
  const KvquantKeyRowLayout keyRow = kvquantKeyRowLayout(cfg);
  const KvquantValueRowLayout valueRow = kvquantValueRowLayout(cfg);
  const KvquantTableLayout table = kvquantTableLayout(cfg);
  int64_t L = 0;
  if (kvq_status st = loadTokenCount(r, "kvquant layer",
                                     std::min(4 * C, 4 + keyRow.bytes(0)), &L))
    return st;
  uint64_t sinks = 0, seg0End = 0, q = 0;
  if (!r.u64(sinks) || !r.u64(seg0End) || !r.u64(q))
    return fail(kCorrupt, "kvquant layer: header cut short");
  const uint64_t uL = static_cast<uint64_t>(L);
  bool ok = sinks <= std::min<uint64_t>(cfg.kvquant_n_sink, uL);
  if (seg0End == 0)
    ok = ok && sinks == uL && q == uL;
  else if (frozen)
    ok = ok && sinks < seg0End && seg0End <= uL && q == uL;
  else
    ok = ok && sinks < seg0End && seg0End <= q && q <= uL &&
         (q - seg0End) % static_cast<uint64_t>(every) == 0 &&
         uL - q < static_cast<uint64_t>(every);
  if (!ok)
    return fail(kCorrupt,
                "kvquant layer: inconsistent counts (tokens %lld, sinks %llu, "
                "prefill fit end %llu, quantized end %llu)",
                static_cast<long long>(L),
                static_cast<unsigned long long>(sinks),
                static_cast<unsigned long long>(seg0End),
                static_cast<unsigned long long>(q));
  s.tokens = L;
  s.sinks = static_cast<int64_t>(sinks);
  s.seg0End = static_cast<int64_t>(seg0End);
  s.quantizedUpTo = static_cast<int64_t>(q);
  const int64_t nSegs = seg0End == 0 ? 0
                        : frozen
                            ? 1
                            : 1 + static_cast<int64_t>(q - seg0End) / every;
  const int64_t tableBytes = table.bytes();
  s.tables.reserve(static_cast<size_t>(nSegs));
  for (int64_t j = 0; j < nSegs; ++j) {
    kvq_status st = KVQ_OK;
    const uint8_t *t =
        takeBytes(r, tableBytes, "kvquant layer: key levels", &st);
    if (!t)
      return st;
    if (!halvesFinite(t, C * table.levels()))
      return fail(kCorrupt,
                  "kvquant layer: segment %lld: a level is not "
                  "finite",
                  static_cast<long long>(j));
    for (int64_t c = 0; frozen && c < C; ++c)
      if ((read16(t, table.thresholdAt(c)) & 0x7fff) > 0x7c00)
        return fail(kCorrupt, "kvquant layer: an outlier threshold is NaN");
    s.tables.push_back({t, tableBytes});
  }
  s.rows.resize(static_cast<size_t>(L));
  for (int64_t p = 0; p < L; ++p) {
    KvquantSection::Row &row = s.rows[static_cast<size_t>(p)];
    if (p < s.sinks || p >= s.quantizedUpTo) {
      if (kvq_status st = takeHalfRow(r, C, "kvquant layer: K row", row.kf))
        return st;
      if (kvq_status st = takeHalfRow(r, C, "kvquant layer: V row", row.vf))
        return st;
      continue;
    }
    uint16_t kOut = 0, vOut = 0;
    if (!r.u16(kOut) || !r.u16(vOut) || kOut > C || vOut > C)
      return fail(kCorrupt, "kvquant layer: token %lld: bad outlier counts",
                  static_cast<long long>(p));
    kvq_status st = KVQ_OK;
    const uint8_t *k =
        takeBytes(r, keyRow.bytes(kOut), "kvquant layer: key row", &st);
    if (!k)
      return st;
    if (!outliersOk(k + keyRow.outliersOffset(), kOut, C))
      return fail(kCorrupt, "kvquant layer: token %lld: bad key outlier",
                  static_cast<long long>(p));
    const uint8_t *v =
        takeBytes(r, valueRow.bytes(vOut), "kvquant layer: value row", &st);
    if (!v)
      return st;
    if (!halvesFinite(v, valueRow.levels()) ||
        !outliersOk(v + valueRow.outliersOffset(), vOut, C))
      return fail(kCorrupt,
                  "kvquant layer: token %lld: bad value levels or "
                  "outlier",
                  static_cast<long long>(p));
    row.kq = {k, keyRow.bytes(kOut)};
    row.vq = {v, valueRow.bytes(vOut)};
    row.kOut = kOut;
    row.vOut = vOut;
  }
  return KVQ_OK;
}
