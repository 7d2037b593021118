//===- kivi_attend.cpp - KIVI: the attention fast paths -------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Fused attention straight from the key groups and value blocks (store.h,
// "Attention fast paths"), over exactly the keys and values loadRow
// decodes.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "bitpack.h"
#include "group_weights.h"
#include "kernels.h"
#include "kivi_store.h"
#include "rope.h"
#include "rope_keys.h"
#include "store_util.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace kvq;

namespace {

/// A tile of keys by columns (channel c of row t at out[c * kKeyTile +
/// t]): the kKeyTile consecutive coded rows row0.. of a nibble-major group
/// of `rows` rows (both even), whose nibble i is 8 bytes; nibbles [nib0,
/// nib1) (one head's channels, scale and zero indexed from its first
/// channel); each code becomes uniformDequant(code, scale, zero) of its
/// channel, as loadRow computes it.
KVQ_AVX2_CLONE
void nibbleKeyColumns(const uint8_t *__restrict codes, int64_t rows,
                      int64_t row0, int64_t nib0, int64_t nib1, int bits,
                      const float *__restrict scale,
                      const float *__restrict zero, float *__restrict out) {
  static_assert(kKeyTile == 16, "a tile's nibbles are two 32-bit words");
  // Generic vectors (eight lanes: one AVX2 register, two SSE or NEON
  // ones), so the decode runs across the tile's tokens on every ISA.
  using U32x8 = uint32_t __attribute__((vector_size(32)));
  using F32x8 = float __attribute__((vector_size(32)));
  const U32x8 shift = {0, 4, 8, 12, 16, 20, 24, 28};
  for (int64_t i = 0; i < nib1 - nib0; ++i) {
    uint32_t w[2];
    std::memcpy(w, codes + ((nib0 + i) * rows + row0) / 2, 8);
    for (int half = 0; half < 2; ++half) {
      const U32x8 x = ((U32x8{} + w[half]) >> shift) & 15u;
      if (bits == 4) {
        const F32x8 v = __builtin_convertvector(x, F32x8) * scale[i] + zero[i];
        std::memcpy(out + i * kKeyTile + 8 * half, &v, sizeof(v));
      } else { // 2-bit: channels 2i (bits 0-1) and 2i + 1 (bits 2-3)
        const F32x8 a =
            __builtin_convertvector(x & 3u, F32x8) * scale[2 * i] + zero[2 * i];
        const F32x8 b =
            __builtin_convertvector(x >> 2, F32x8) * scale[2 * i + 1] +
            zero[2 * i + 1];
        std::memcpy(out + 2 * i * kKeyTile + 8 * half, &a, sizeof(a));
        std::memcpy(out + (2 * i + 1) * kKeyTile + 8 * half, &b, sizeof(b));
      }
    }
  }
}

} // namespace

/// The fp16 window and sinks.
bool KiviStore::halfKeyRows(int64_t t0, int64_t t1, int64_t h,
                            const uint16_t **rows) const {
  for (int64_t t = t0; t < t1; ++t) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (!s.kf)
      return false;
    rows[t - t0] =
        reinterpret_cast<const uint16_t *>(s.kf.p) + h * int64_t{cfg_.head_dim};
  }
  return true;
}

/// Whole tiles of coded rows inside one nibble-major group (2 and 4 bits,
/// an even row count and start, as the nibble words need) go by columns,
/// as many of the group's as the table kernel takes at once (its tables
/// are built per call).
int64_t KiviStore::keyColumnTiles(int64_t t0, int64_t maxTiles) const {
  const int64_t g = t0 / G_;
  if (!nibbleKeys_ || codedRows(g) % 2 != 0 || codedBefore(t0) % 2 != 0)
    return 0;
  const int64_t most = std::min(maxTiles, kRopeNibbleMaxTiles);
  int64_t tiles = 0;
  for (; tiles < most; ++tiles) {
    const int64_t a = t0 + tiles * kKeyTile, b = a + kKeyTile;
    if ((b - 1) / G_ != g || !allCoded(a, b))
      break;
  }
  return tiles;
}

void KiviStore::prefetchValueBlocks(TokenSpan span) const {
  const int64_t vBytes = valueBlockBytes();
  for (int64_t p = span.begin; p < span.end; ++p)
    if (const uint8_t *v = slots_[static_cast<size_t>(p)].vq.p)
      prefetchBytes(v, vBytes);
}

/// Ask for the codes of the head the pre-RoPE key pass scores after head h
/// of group g (the group's next head, else the next group's first), a
/// line at a time: the tile kernels visit a head's nibbles in chain
/// order, not address order, and each first touch of a line stalled.
void KiviStore::prefetchNextHeadCodes(int64_t g, int64_t rows, int64_t h,
                                      int64_t d) const {
  // A head's d channels are d * bits / 4 nibbles of rows / 2 bytes.
  const int64_t headBytes = d * kb_ / 4 * (rows / 2);
  const uint8_t *next = nullptr;
  if ((h + 1) * d < channels_)
    next = keyGroup(groups_[static_cast<size_t>(g)].p).codes() +
           (h + 1) * headBytes;
  else if (g + 1 < static_cast<int64_t>(groups_.size()))
    next = keyGroup(groups_[static_cast<size_t>(g + 1)].p).codes();
  // The next group may hold a few rows fewer (sinks): a hint only, and a
  // prefetch never faults.
  if (next)
    prefetchBytes(next, headBytes);
  // And 1/H of the next group's scales and zeros, which the next group's
  // first call converts (halfToFloatN) before anything else: their first
  // touch had held that conversion ~7 % of a kivi2+rope step at 32K.
  if (g + 1 < static_cast<int64_t>(groups_.size())) {
    const uint8_t *header = groups_[static_cast<size_t>(g + 1)].p;
    const int64_t bytes = keyGroup(header).codes() - header;
    const int64_t slice = (bytes * d / channels_ + 63) / 64 * 64;
    const int64_t from = std::min(bytes, h * slice);
    prefetchBytes(header + from, std::min(bytes - from, slice));
  }
}

/// Where the kernel table has ropeNibbleTiles: all the tiles at once, by
/// tables. Else tile by tile: one query vector per head
/// (decode) decoded in registers (ropeScoresNibbles), several sharing one
/// decode into columns.
void KiviStore::scoreKeyColumns(AttendJob &job, int64_t t0, int64_t tiles,
                                int64_t h, const float *cos, const float *sin,
                                bool interleaved, float *out,
                                int64_t outStride) const {
  const int64_t C = channels_, d = job.d, g = t0 / G_, P = d / 2;
  const auto blk = keyGroup(groups_[static_cast<size_t>(g)].p);
  // The group's scales, then its zeros, converted once per group (the
  // group's tiles follow each other) and kept across chunks.
  job.keyScratch.resize(static_cast<size_t>(2 * C));
  float *sz = job.keyScratch.data();
  if (job.keyScratchOf != blk.p) {
    job.ops.halfToFloatN(
        reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
    job.keyScratchOf = blk.p;
  }
  const int64_t perNibble = 4 / kb_; // channels per nibble
  const RopeQueries &rq = job.ropeQueries;
  // The group's coded rows and the first tile's first: counted once per
  // call (a KIVI-Sink group's count walks its slots).
  const int64_t rows = codedRows(g), row0 = codedBefore(t0);
  prefetchNextHeadCodes(g, rows, h, d);
  if (job.ops.ropeNibbleTiles) { // the shape's code width is 2 or 4
    RopeNibbleTiles a;
    a.codes = blk.codes();
    a.bits = kb_;
    a.rows = rows;
    a.row0 = row0;
    a.tiles = tiles;
    a.nib0 = h * d / perNibble;
    a.scale = sz + h * d;
    a.zero = sz + C + h * d;
    a.cos = cos;
    a.sin = sin;
    a.q = rq.a(h * job.nq);
    a.qStride = rq.stride();
    a.nq = job.nq;
    a.d = d;
    a.interleaved = interleaved;
    a.out = out;
    a.outStride = outStride;
    job.ops.ropeNibbleTiles(a);
  } else {
    for (int64_t u = 0; u < tiles; ++u) {
      const float *c = cos + u * P * kKeyTile, *s = sin + u * P * kKeyTile;
      float *o = out + u * kKeyTile * outStride;
      const NibbleKeyTile tile = {blk.codes(),       rows, row0 + u * kKeyTile,
                                  h * d / perNibble, kb_,  sz + h * d,
                                  sz + C + h * d};
      if (job.nq == 1 && d % 8 == 0) {
        ropeScoresNibbles(tile, c, s, rq, h, interleaved, o, outStride);
      } else {
        job.scratch3.resize(static_cast<size_t>(d * kKeyTile));
        float *cols = job.scratch3.data();
        nibbleKeyColumns(tile.codes, tile.rows, tile.row0, tile.nib0,
                         tile.nib0 + d / perNibble, kb_, tile.scale, tile.zero,
                         cols);
        ropeScoresColumns(cols, c, s, rq, h * job.nq, job.nq, interleaved, o,
                          outStride);
      }
    }
  }
  // The value pass reads these tokens' value blocks next (one allocation
  // each): each head's turn asks for 1/H of them.
  prefetchValueBlocks(headShare(t0, tiles * kKeyTile, job.heads, h));
}

/// Row-major codes (3 bits) where the kernel table has ropeCodeRows and
/// the tile's tokens are coded rows of one group: head by head, the rows
/// decoded in registers.
bool KiviStore::scoreKeyRows(AttendJob &job, int64_t t0, int64_t t1,
                             const float *cos, const float *sin,
                             bool interleaved) const {
  const int64_t C = channels_, d = job.d, g = t0 / G_, n = t1 - t0;
  if (nibbleKeys_ || !job.ops.ropeCodeRows || (t1 - 1) / G_ != g ||
      !allCoded(t0, t1))
    return false;
  const auto blk = keyGroup(groups_[static_cast<size_t>(g)].p);
  job.keyScratch.resize(static_cast<size_t>(2 * C));
  float *sz = job.keyScratch.data(); // the group's scales, then its zeros
  if (job.keyScratchOf != blk.p) {
    job.ops.halfToFloatN(
        reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
    job.keyScratchOf = blk.p;
  }
  const int64_t row0 = codedBefore(t0), rowBytes = C * kb_ / 8;
  const int64_t headBytes = d * kb_ / 8;
  job.codeRows.resize(static_cast<size_t>(n));
  const uint8_t **rows = job.codeRows.data();
  const RopeQueries &rq = job.ropeQueries;
  // Each head's turn asks for 1/H of the next tile's bytes (this group's
  // next rows, else the next group's scales, zeros and first rows): a
  // head reads a slice of every row, so the first head touched each line
  // of the tile for the first time, and the decoding waited on the loads.
  const Blk &here = groups_[static_cast<size_t>(g)];
  const uint8_t *next = blk.codes() + (row0 + n) * rowBytes;
  int64_t nextBytes =
      std::min(n * rowBytes, static_cast<int64_t>(here.p + here.size - next));
  if (nextBytes <= 0 && g + 1 < static_cast<int64_t>(groups_.size())) {
    const Blk &after = groups_[static_cast<size_t>(g + 1)];
    next = after.p;
    nextBytes = std::min(after.size, keyGroupBytes(0) + n * rowBytes);
  }
  const int64_t slice =
      (std::max<int64_t>(nextBytes, 0) / job.heads + 63) / 64 * 64;
  for (int64_t h = 0; h < job.heads; ++h) {
    const int64_t from = std::min(nextBytes, h * slice);
    if (from < nextBytes)
      prefetchBytes(next + from, std::min(nextBytes - from, slice));
    // And 1/H of the tile's value blocks, which the value pass reads next.
    prefetchValueBlocks(headShare(t0, n, job.heads, h));
    for (int64_t t = 0; t < n; ++t)
      rows[t] = blk.codes() + (row0 + t) * rowBytes + h * headBytes;
    RopeCodeRows a;
    a.rows = rows;
    a.n = n;
    a.bits = kb_;
    a.scale = sz + h * d;
    a.zero = sz + C + h * d;
    a.cos = cos;
    a.sin = sin;
    a.q = rq.a(h * job.nq);
    a.qStride = rq.stride();
    a.nq = job.nq;
    a.d = d;
    a.interleaved = interleaved;
    a.out = job.scoreRow(t0, h);
    a.outStride = job.heads * job.nq;
    job.ops.ropeCodeRows(a);
  }
  return true;
}

/// Keys by rows, each decoded as loadRow does (fp16 rows of the window and
/// sinks, row-major codes, tiles across a group boundary).
void KiviStore::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                         float *out) const {
  const int64_t C = channels_;
  job.scratch2.resize(static_cast<size_t>(2 * C));
  float *sz = job.scratch2.data(); // a group's scales, then its zeros
  int64_t scalesOf = -1;           // the group whose scales and zeros sz holds
  for (int64_t p = t0; p < t1; ++p) {
    float *k = out + (p - t0) * C;
    const Slot &s = slots_[static_cast<size_t>(p)];
    if (s.kf) {
      job.ops.halfToFloatN(reinterpret_cast<const uint16_t *>(s.kf.p), C, k);
      continue;
    }
    const int64_t gp = p / G_, row = codedBefore(p);
    const auto blk = keyGroup(groups_[static_cast<size_t>(gp)].p);
    if (gp != scalesOf) {
      job.ops.halfToFloatN(
          reinterpret_cast<const uint16_t *>(blk.scalesThenZeros()), 2 * C, sz);
      scalesOf = gp;
    }
    if (!nibbleKeys_ && (row * C * kb_) % 8 == 0) {
      job.ops.dequantCodes(blk.codes() + row * C * kb_ / 8, C, kb_, sz, sz + C,
                           k);
      continue;
    }
    // Nibble-major rows (a tile that holds a sink): the row's codes in
    // one walk down its nibbles, then one product and sum each.
    job.codeBytes.resize(static_cast<size_t>(C));
    uint8_t *codes = job.codeBytes.data();
    if (nibbleKeys_)
      unpackNibbleMajorRow(blk.codes(), codedRows(gp), row, C, kb_, codes);
    else
      for (int64_t c = 0; c < C; ++c)
        codes[c] = packedCodeAt(blk.codes(), row * C + c, kb_);
    for (int64_t c = 0; c < C; ++c)
      k[c] = uniformDequant(codes[c], sz[c], sz[C + c]);
  }
}

/// Keys: per-channel scales fold into the queries once per key group
/// (q'_c = q_c * s_c, bias = q . zero), so a coded row costs one dot of
/// raw codes with q', done for all coded rows of the group in the chunk at
/// once: dotNibbleRows on nibble-major groups (2 and 4 bits, rows in
/// vector lanes), else dotCodesRows. fp16 rows (window, sinks) go through
/// dotHalf.
void KiviStore::attendKeys(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  job.scratch.resize(static_cast<size_t>(H * nq * d + H * nq + G_ * nq));
  float *folded = job.scratch.data(), *bias = folded + H * nq * d;
  float *tmp = bias + H * nq;
  job.codeRows.resize(static_cast<size_t>(G_));
  job.positions.resize(static_cast<size_t>(G_));
  const bool byteRows = (d * kb_) % 8 == 0;
  for (int64_t t = job.t0; t < job.t1;) {
    const Slot &s = slots_[static_cast<size_t>(t)];
    if (s.kf) {
      const uint16_t *k = reinterpret_cast<const uint16_t *>(s.kf.p);
      for (int64_t h = 0; h < H; ++h)
        job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(t, h));
      ++t;
      continue;
    }
    // The coded rows of this group inside the chunk.
    const int64_t group = t / G_, end = std::min(job.t1, (group + 1) * G_);
    const int64_t row = codedBefore(t); // sinks have no code slot
    const int64_t groupRows = nibbleKeys_ ? codedRows(group) : 0;
    const uint8_t *block = groups_[static_cast<size_t>(group)].p;
    const uint16_t *scales = reinterpret_cast<const uint16_t *>(block);
    // With one query vector per head the folded queries are one
    // element-wise product over all C channels: one call instead of H.
    if (nq == 1)
      job.ops.mulHalf(scales, job.q.data(), 1, C, folded);
    for (int64_t h = 0; h < H; ++h) {
      if (nq != 1)
        job.ops.mulHalf(scales + h * d, job.query(h), nq, d,
                        folded + h * nq * d);
      job.ops.dotHalf(scales + C + h * d, job.query(h), nq, d, bias + h * nq);
    }
    // Without any sink every row of a quantized group is coded (allCoded):
    // no slot to read (56 bytes a token, the first touch of each).
    int64_t n = 0;
    std::vector<int64_t> &rowOf = job.positions;
    if (nSinks_ == 0)
      n = end - t;
    else
      for (int64_t p = t; p < end; ++p) {
        const Slot &q = slots_[static_cast<size_t>(p)];
        if (q.kf) { // a sink inside the group
          const uint16_t *k = reinterpret_cast<const uint16_t *>(q.kf.p);
          for (int64_t h = 0; h < H; ++h)
            job.ops.dotHalf(k + h * d, job.query(h), nq, d, job.scoreRow(p, h));
          continue;
        }
        rowOf[static_cast<size_t>(n++)] = p;
      }
    const uint8_t *codes = keyGroup(block).codes();
    // Without a sink in the group the coded rows are the chunk's rows
    // t .. end - 1, so the kernels write the score rows in place and the
    // bias is added over the whole [rows][heads][nq] block at once; tmp and
    // the row indirection are only needed around sinks. Either way each
    // score is the kernel's dot plus the bias, one addition.
    const bool inPlace = n == end - t;
    const int64_t K = H * nq;
    // The dot products are arithmetic-bound while the value pass that
    // follows waits on its blocks (one allocation per token, a stride the
    // hardware prefetcher does not follow): each head's turn asks for the
    // value blocks of 1/H of the group's tokens, so those loads overlap
    // with the arithmetic and never arrive as one burst.
    // Likewise, with row-major codes (3 bits), each head's turn asks for
    // 1/H of the next group's key block: a head's rows are a slice of every
    // row, so each head's pass touched lines of the whole block for the
    // first time and the dot kernels waited on them. (Nibble-major groups,
    // a head's rows in one run, were no faster with it at 2 bits and
    // slower at 4, nor with only the next group's scales and zeros.)
    Blk next;
    if (!nibbleKeys_ && end < job.t1 &&
        group + 1 < static_cast<int64_t>(groups_.size()))
      next = groups_[static_cast<size_t>(group + 1)];
    const int64_t slice = (next.size / H + 63) / 64 * 64;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t from = std::min(next.size, h * slice);
      prefetchBytes(next.p + from, std::min(next.size - from, slice));
      float *out = inPlace ? job.scoreRow(t, h) : tmp;
      const int64_t stride = inPlace ? K : nq;
      if (nibbleKeys_) {
        NibbleRowsDot a;
        a.codes = codes;
        a.n = groupRows;
        a.r0 = row;
        a.m = n;
        a.nib0 = h * d * kb_ / 4;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        a.out = out;
        a.outStride = stride;
        job.ops.dotNibbleRows(a);
      } else if (byteRows) {
        for (int64_t i = 0; i < n; ++i)
          job.codeRows[static_cast<size_t>(i)] =
              codes + ((row + i) * C + h * d) * kb_ / 8;
        CodeRowsDot a;
        a.rows = job.codeRows.data();
        a.n = n;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        a.out = out;
        a.outStride = stride;
        job.ops.dotCodesRows(a);
      } else {
        CodesDot a;
        a.packed = codes;
        a.bits = kb_;
        a.q = folded + h * nq * d;
        a.nq = nq;
        a.d = d;
        for (int64_t i = 0; i < n; ++i) {
          a.first = (row + i) * C + h * d;
          a.out = out + i * stride;
          job.ops.dotCodes(a);
        }
      }
      prefetchValueBlocks(headShare(t, end - t, H, h));
      if (!inPlace)
        for (int64_t i = 0; i < n; ++i) {
          float *o = job.scoreRow(rowOf[static_cast<size_t>(i)], h);
          for (int64_t j = 0; j < nq; ++j)
            o[j] = tmp[i * nq + j] + bias[h * nq + j];
        }
    }
    if (inPlace) {
      float *__restrict o = job.scoreRow(t, 0);
      const float *__restrict b = bias;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < K; ++k)
          o[i * K + k] += b[k];
    }
    t = end;
  }
}

/// Values: per-token groups; the weight times each group's scale scales
/// the raw codes (axpyCodesRows over the chunk's coded tokens, per head),
/// and weight x zero is summed per group and added once per chunk. The
/// walk touches each token's slot once: it records the block; one call then
/// converts all blocks' scales and zeros, and every later step works on
/// those chunk-wide arrays.
void KiviStore::attendValues(AttendJob &job) const {
  const int64_t C = channels_, d = job.d, nq = job.nq, H = job.heads;
  const int64_t perRow = C / G_, perHead = d / G_, chunk = job.t1 - job.t0;
  const int64_t wsStride = H * nq * perHead;
  job.scratch2.assign(static_cast<size_t>(wsStride), 0.0f);
  job.scratch3.resize(
      static_cast<size_t>(chunk * 2 * perRow + chunk * wsStride));
  float *zsum = job.scratch2.data(), *sz = job.scratch3.data();
  float *ws = sz + chunk * 2 * perRow;
  // codeRows: [0, chunk) one head's rows for the kernel, [chunk, 2 chunk)
  // each coded token's code block; positions: its row in the chunk.
  job.codeRows.resize(static_cast<size_t>(2 * chunk));
  const uint8_t **rowsOut = job.codeRows.data();
  const uint8_t **blocks = rowsOut + chunk;
  // The blocks were prefetched during the key pass (attendKeys).
  const int64_t n = walkValueRows(job, slots_, 4 * perRow, blocks);
  // Group weights and zero-point sums from the coded tokens' headers: in
  // one fused call where the cache's ops have one (its shape), else
  // converted in one call and summed by the portable loops (the same bits
  // either way).
  const float *scores = job.scores.data();
  const int64_t *rowOf = job.positions.data();
  if (job.ops.groupWeightsHalf) {
    GroupWeightsArgs a;
    a.headers = job.halfRows.data();
    a.rowOf = rowOf;
    a.n = n;
    a.scores = scores;
    a.heads = H;
    a.nq = nq;
    a.perHead = perHead;
    a.ws = ws;
    a.zsum = zsum;
    job.ops.groupWeightsHalf(a);
  } else {
    job.ops.halfRowsToFloat(job.halfRows.data(), n, 2 * perRow, sz);
    groupWeightsPortable(scores, rowOf, n, sz, H, nq, perHead, ws, zsum);
  }
  const bool byteRows = (d * vb_) % 8 == 0;
  for (int64_t h = 0; h < H; ++h) {
    const float *wsHead = ws + h * nq * perHead;
    if (byteRows) {
      const int64_t off = h * d * vb_ / 8;
      for (int64_t i = 0; i < n; ++i)
        rowsOut[i] = blocks[i] + off;
      CodeRowsAxpy a;
      a.rows = rowsOut;
      a.n = n;
      a.bits = vb_;
      a.ws = wsHead;
      a.wsStride = wsStride;
      a.G = G_;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      job.ops.axpyCodesRows(a);
    } else {
      CodesAxpy a;
      a.first = h * d;
      a.bits = vb_;
      a.G = G_;
      a.nq = nq;
      a.d = d;
      a.acc = job.accumulator(h);
      for (int64_t i = 0; i < n; ++i) {
        a.packed = blocks[i];
        a.ws = wsHead + i * wsStride;
        job.ops.axpyCodes(a);
      }
    }
  }
  // One zero-point sum per (query vector, group), added to its G channels.
  float *acc = job.acc.data();
  for (int64_t k = 0; k < H * nq; ++k)
    for (int64_t g = 0; g < perHead; ++g) {
      const float z = zsum[k * perHead + g];
      float *a = acc + k * d + g * G_;
      for (int64_t c = 0; c < G_; ++c)
        a[c] += z;
    }
}
