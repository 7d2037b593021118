//===- kvquant_attend.cpp - KVQuant: the attention fast paths -------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Fused attention straight from the coded rows, their outliers and the
// level tables (store.h, "Attention fast paths"), over exactly the keys
// and values loadRow decodes.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "bitpack.h"
#include "kernels.h"
#include "kvquant_store.h"
#include "rope.h"
#include "rope_keys.h"
#include "store_util.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

using namespace kvq;

namespace {

/// Tokens per run of attendKeys: one tile of dotLutRows' AVX-512 kernel
/// (rows in its 16 lanes).
constexpr int64_t kKeyRun = 16;

/// A key row from its unpacked codes: each channel's level (exact).
KVQ_AVX2_CLONE
void lookupKeyLevels(const uint8_t *__restrict codes, int64_t C, int64_t L,
                     const float *__restrict levels, float *__restrict out) {
  for (int64_t c = 0; c < C; ++c)
    out[c] = levels[c * L + codes[c]];
}

/// luts[i][h][j] = w[j] * the levels of token i, head h, repeated to
/// lutEntries (periodic tables). LT = L as a template parameter for the
/// usual widths, so the products are straight-line vector code; one
/// multiply per entry either way.
template <int LT>
void valueLuts(AttendJob &job, int64_t n, const float *levels, float *luts,
               int64_t Lrt = 0) {
  const int64_t L = LT > 0 ? LT : Lrt, H = job.heads, nq = job.nq;
  const int64_t E = L > 16 ? L : 16, lutStride = H * nq * E;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = job.t0 + job.positions[static_cast<size_t>(i)];
    for (int64_t h = 0; h < H; ++h) {
      const float *__restrict w = job.scoreRow(t, h);
      const float *__restrict lv = levels + (i * H + h) * L;
      float *__restrict lut = luts + i * lutStride + h * nq * E;
      for (int64_t j = 0; j < nq; ++j) {
        // The products are made once in registers and stored E / L times
        // (reading back entries just stored would stall on forwarding).
        float *__restrict dst = lut + j * E;
        if constexpr (LT > 0) {
          float prod[LT];
          for (int l = 0; l < LT; ++l)
            prod[l] = w[j] * lv[l];
          for (int64_t k = 0; k < E; k += LT)
            std::memcpy(dst + k, prod, sizeof(prod));
        } else {
          for (int64_t k = 0; k < E; k += L)
            for (int64_t l = 0; l < L; ++l)
              dst[k + l] = w[j] * lv[l];
        }
      }
    }
  }
}

} // namespace

/// Pre-RoPE keys by rows, as loadRow decodes them: the segment's levels
/// converted once (job.keyScratch, kept across chunks), codes unpacked by
/// the kernel table, one lookup per channel, then the outliers.
void KvquantStore::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                            float *out) const {
  const int64_t C = channels_, L = kLevels_;
  job.keyScratch.resize(static_cast<size_t>(C * L));
  job.scratch3.resize(static_cast<size_t>(C / 4 + 8)); // C code bytes
  float *levels = job.keyScratch.data();
  uint8_t *codes = reinterpret_cast<uint8_t *>(job.scratch3.data());
  for (int64_t t = t0; t < t1; ++t) {
    float *k = out + (t - t0) * C;
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(s.kf.p), C, k);
      continue;
    }
    const uint8_t *table = segmentFor(t).table.p;
    if (job.keyScratchOf != table) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(table), C * L,
                           levels);
      job.keyScratchOf = table;
    }
    kernels().unpackCodes(s.kq.p, C, kb_, codes);
    lookupKeyLevels(codes, C, L, levels, k);
    const OutlierList<const uint8_t> outliers{s.kq.p +
                                              keyRow_.outliersOffset()};
    for (int64_t o = 0; o < s.kOut; ++o)
      k[outliers.at(o).channel] = halfToFloat(outliers.at(o).value);
    // The value pass reads this token's block next (as attendKeys asks).
    prefetchBytes(s.vq.p, s.vq.size);
  }
}

static_assert(kKeyTile == kLevelColumnRows,
              "a pre-RoPE key tile is one levelColumns call per head");

/// Whole tiles of coded rows of one key segment go by columns, one per
/// call (the outlier cursor, AttendJob::outlierNext, covers one tile).
int64_t KvquantStore::keyColumnTiles(int64_t t0, int64_t) const {
  const int64_t t1 = t0 + kKeyTile;
  if (t1 > length() || segmentEnd(t0) < t1)
    return 0;
  for (int64_t t = t0; t < t1; ++t)
    if (slots_[static_cast<size_t>(t)].kf)
      return 0;
  return 1;
}

/// A tile of head h's pre-RoPE keys by columns, as loadRow decodes them:
/// the tile's rows dequantized by the segment's levels (levelColumns,
/// tokens in lanes), the head's outliers written over their slots, then
/// the canonical rotated scores (ropeScoresColumns).
void KvquantStore::scoreKeyColumns(AttendJob &job, int64_t t0,
                                   [[maybe_unused]] int64_t tiles, int64_t h,
                                   const float *cos, const float *sin,
                                   bool interleaved, float *out,
                                   int64_t outStride) const {
  assert(tiles == 1);
  const int64_t C = channels_, L = kLevels_, d = job.d;
  job.keyScratch.resize(static_cast<size_t>(C * L));
  job.codeRows.resize(static_cast<size_t>(kKeyTile));
  float *levels = job.keyScratch.data();
  const uint8_t **rows = job.codeRows.data();
  if (h == 0) { // the heads follow in order: the tile's levels and rows
    const uint8_t *table = segmentFor(t0).table.p;
    if (job.keyScratchOf != table) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(table), C * L,
                           levels);
      job.keyScratchOf = table;
    }
    job.outlierNext.assign(static_cast<size_t>(kKeyTile), 0);
    for (int64_t t = t0; t < t0 + kKeyTile; ++t) {
      const Slot &s = slots_[static_cast<size_t>(t)];
      rows[t - t0] = s.kq.p;
      // The outlier list follows the codes, on a line levelColumns does
      // not read: ask for it now, while the codes are decoded.
      if (s.kOut > 0)
        __builtin_prefetch(s.kq.p + keyRow_.outliersOffset());
    }
  }
  // Each head's turn asks for 1/H of the next tile's key rows (of which
  // each head reads only its slice) and of this tile's value blocks, which
  // the value pass reads next (all at head 0 held that loop on its
  // prefetches).
  prefetchValueRows(headShare(t0, kKeyTile, job.heads, h));
  prefetchKeyRows(headShare(t0 + kKeyTile, kKeyTile, job.heads, h));
  job.scratch3.resize(static_cast<size_t>(d * kKeyTile));
  float *cols = job.scratch3.data();
  LevelColumns a;
  a.rows = rows;
  a.n = kKeyTile;
  a.first = h * d;
  a.bits = kb_;
  a.levels = levels + h * d * L;
  a.d = d;
  a.cols = cols;
  job.ops.levelColumns(a);
  // Each token's outliers of this head, from where the previous head's
  // ended (channel order), written over their slots.
  int64_t *next = job.outlierNext.data();
  for (int64_t t = t0; t < t0 + kKeyTile; ++t) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    const OutlierList<const uint8_t> outliers{s.kq.p +
                                              keyRow_.outliersOffset()};
    int64_t o = next[t - t0];
    for (; o < s.kOut; ++o) {
      const OutlierEntry e = outliers.at(o);
      const int64_t c = e.channel - h * d;
      if (c >= d)
        break; // the rest are later heads'
      if (c >= 0)
        cols[c * kKeyTile + (t - t0)] = halfToFloat(e.value);
    }
    next[t - t0] = o;
  }
  ropeScoresColumns(cols, cos, sin, job.ropeQueries, h * job.nq, job.nq,
                    interleaved, out, outStride);
}

/// Keys: the frozen per-channel levels times the queries form a lookup
/// table per segment (lut[h][j][c][l] = q_c * level_c[l]), so a row's score
/// is a sum of table entries picked by its codes; outliers replace their
/// dense slot's term.
void KvquantStore::attendKeys(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  const int64_t L = kLevels_;
  // Levels, then the product tables, kept across chunks in keyScratch
  // (the value pass leaves it alone) for the segment they were built of.
  job.keyScratch.resize(static_cast<size_t>(C * L + H * nq * d * L));
  job.codeRows.resize(static_cast<size_t>(kKeyRun));
  float *levels = job.keyScratch.data(), *lut = levels + C * L;
  const uint8_t **run = job.codeRows.data();
  for (int64_t t = job.t0, end; t < job.t1; t = end) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      const uint16_t *k = reinterpret_cast<const uint16_t *>(s.kf.p);
      for (int64_t h = 0; h < H; ++h)
        job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(t, h));
      end = t + 1;
      continue;
    }
    const Segment &seg = segmentFor(t);
    if (job.keyScratchOf != seg.table.p) {
      job.keyScratchOf = seg.table.p;
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(seg.table.p),
                           C * L, levels);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < nq; ++j) {
          const float *q = job.query(h) + j * d;
          float *row = lut + (h * nq + j) * d * L;
          for (int64_t c = 0; c < d; ++c)
            for (int64_t l = 0; l < L; ++l)
              row[c * L + l] = q[c] * levels[(h * d + c) * L + l];
        }
    }
    // A run of at most kKeyRun coded tokens of this segment.
    const int64_t last = std::min({job.t1, t + kKeyRun, segmentEnd(t)});
    for (end = t; end < last && !slots_[static_cast<size_t>(end)].kf; ++end)
      run[end - t] = slots_[static_cast<size_t>(end)].kq.p;
    // Each head's turn below asks for 1/H of the next run's key rows and
    // of the value blocks of this run's tokens, which the value pass reads
    // next (each token's rows its own allocations, a stride the hardware
    // prefetcher does not follow), while the key arithmetic runs, as the
    // KIVI store does.
    const int64_t next = std::min(job.t1, end + kKeyRun);
    // The run's rows of each head at once against the head's product
    // tables (the AVX-512 kernel holds 16 rows in its lanes and decodes
    // their codes once for the nq query vectors).
    LutRowsDot a;
    a.rows = run;
    a.n = end - t;
    a.bits = kb_;
    a.nq = nq;
    a.d = d;
    a.outStride = H * nq;
    for (int64_t h = 0; h < H; ++h) {
      prefetchValueRows(headShare(t, end - t, H, h));
      prefetchKeyRows(headShare(end, next - end, H, h));
      a.first = h * d;
      a.lut = lut + h * nq * d * L;
      a.out = job.scoreRow(t, h);
      job.ops.dotLutRows(a);
    }
    for (int64_t u = t; u < end; ++u)
      patchKeyOutliers(job, u, lut);
  }
}

/// Each outlier of token t's key row replaces its dense slot's term in the
/// scores (outlierScores: q * value - the table entry, added in the
/// stored order).
void KvquantStore::patchKeyOutliers(AttendJob &job, int64_t t,
                                    const float *lut) const {
  const Slot &s = slots_[static_cast<size_t>(t)];
  if (s.kOut == 0)
    return;
  OutlierScores a;
  a.entries = s.kq.p + keyRow_.outliersOffset();
  a.k = s.kOut;
  a.codes = s.kq.p;
  a.bits = kb_;
  a.q = job.q.data();
  a.lut = lut;
  a.nq = job.nq;
  a.d = job.d;
  a.scores = job.scoreRow(t, 0);
  job.ops.outlierScores(a);
}

/// Values: one level table per (token, head); the weights times the table
/// form per-row lookups ([token][head][j][lutEntries] for the chunk's
/// quantized tokens), summed per head in one axpyLutRows call so the
/// accumulators stay in registers across the rows. Outliers then add
/// their corrections, token by token.
void KvquantStore::attendValues(AttendJob &job) const {
  const int64_t d = job.d, nq = job.nq, H = job.heads;
  const int64_t L = vLevels_, E = lutEntries(vb_), chunk = job.t1 - job.t0;
  const int64_t lutStride = H * nq * E;
  // 16 floats of slack: a SIMD lookup may read a whole register of the
  // last table.
  job.scratch2.resize(static_cast<size_t>(chunk * H * L + 16));
  job.scratch3.resize(
      static_cast<size_t>(nq == 1 ? chunk * lutStride : chunk * nq));
  float *levels = job.scratch2.data(), *luts = job.scratch3.data();
  job.codeRows.resize(static_cast<size_t>(2 * chunk));
  const uint8_t **rowsOut = job.codeRows.data();
  const uint8_t **packedOf = rowsOut + chunk; // each coded token's codes
  const int64_t n =
      walkValueRows(job, slots_, valueRow_.codesOffset(), packedOf);
  job.ops.halfRowsToFloat(job.halfRows.data(), n, H * L, levels);
  // One query vector per head: weighted tables, one lookup and addition
  // per element. More (GQA): each code looked up once in its row's level
  // table, then one FMA per query vector.
  if (nq == 1) {
    switch (L) {
    case 4:
      valueLuts<4>(job, n, levels, luts);
      break;
    case 8:
      valueLuts<8>(job, n, levels, luts);
      break;
    case 16:
      valueLuts<16>(job, n, levels, luts);
      break;
    default:
      valueLuts<0>(job, n, levels, luts, L);
      break;
    }
  }
  // The row kernels read codes from bit 0 of their row pointer. A head
  // whose codes start inside a byte (h * d * vb not a multiple of 8: odd
  // head_dim shapes) gets its codes repacked at bit 0 first, so every
  // kernel table (reference, AVX2, AVX-512, NEON) reads the right codes.
  const bool byteRows = (d * vb_) % 8 == 0;
  const int64_t headBytes = packedBytes(d, vb_) + 16; // + SIMD read slack
  std::vector<uint8_t> repacked, codes;
  if (!byteRows) {
    repacked.assign(static_cast<size_t>(n * headBytes), 0);
    codes.resize(static_cast<size_t>(d));
  }
  for (int64_t h = 0; h < H; ++h) {
    if (byteRows) {
      const int64_t off = h * d * vb_ / 8;
      for (int64_t i = 0; i < n; ++i)
        rowsOut[i] = packedOf[i] + off;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < d; ++c)
          codes[static_cast<size_t>(c)] =
              static_cast<uint8_t>(packedCodeAt(packedOf[i], h * d + c, vb_));
        uint8_t *dst = repacked.data() + i * headBytes;
        packCodesRef(codes.data(), d, vb_, dst);
        rowsOut[i] = dst;
      }
    }
    if (nq == 1) {
      LutRowsAxpy a;
      a.rows = rowsOut;
      a.n = n;
      a.bits = vb_;
      a.luts = luts + h * nq * E;
      a.lutStride = lutStride;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      job.ops.axpyLutRows(a);
      continue;
    }
    float *w = luts; // the chunk's weights of this head, [i][j]
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(
          w + i * nq,
          job.scoreRow(job.t0 + job.positions[static_cast<size_t>(i)], h),
          static_cast<size_t>(nq) * sizeof(float));
    LevelRowsAxpy a;
    a.rows = rowsOut;
    a.n = n;
    a.bits = vb_;
    a.levels = levels + h * L; // the head's table per row
    a.levelStride = H * L;
    a.w = w;
    a.wStride = nq;
    a.nq = nq;
    a.d = d;
    a.acc = job.accumulator(h);
    job.ops.axpyLevelRows(a);
  }
  // The outliers, token by token: each replaces its dense slot's level.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = job.t0 + job.positions[static_cast<size_t>(i)];
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.vOut == 0)
      continue;
    OutlierAxpy a;
    // The outliers follow the row's codes (blocks.h).
    a.entries = packedOf[i] + valueRow_.codeBytes;
    a.k = s.vOut;
    a.codes = packedOf[i];
    a.bits = vb_;
    a.levels = levels + i * H * L;
    a.levelCount = L;
    a.w = job.scoreRow(t, 0);
    a.nq = nq;
    a.d = d;
    a.acc = job.accumulator(0);
    job.ops.outlierAxpy(a);
  }
}
