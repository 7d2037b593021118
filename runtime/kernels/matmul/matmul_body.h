//===- matmul_body.h - The matmul kernel over a vector type -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// kvq_matmul's blocked loops and register tiles, written once over a vector
// type V, for matmul.h's summation order. Each kernel file (reference,
// AVX2, AVX-512, NEON) defines V and KVQ_MATMUL_TARGET (its target
// attribute, or nothing) and includes this file once: everything here has
// internal linkage and carries that attribute, so no vector-extended code
// leaks into a path that runs before the CPU check.
//
// V provides: T (the vector), W (lanes, dividing 32), zero(), loadF32,
// loadF16, loadBf16 (W consecutive elements, widened exactly), fma(a, b, c)
// = a * b + c rounded once, add, hsum (the lanes of one vector added by
// halving: l + l + W/2, ..., as matmul.h's tree), and the tile shapes:
// kDecodeRows (weight rows per tile when m == 1), kTileM x kTileN (input
// rows x weight rows per tile otherwise), and kPassM x kPassN, the tiles
// of passTile where a prefill takes it instead (0 x 0: never).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_MATMUL_TARGET
#error "define KVQ_MATMUL_TARGET (the kernels' target attribute) first"
#endif

#include "matmul.h"

#include <cstring>
#include <vector>

namespace {
namespace matmul_body {

using kvq::kMatmulLanes;
using kvq::MatmulArgs;

/// Bytes of weight rows a block of prefill keeps hot while every input tile
/// passes over them (about half of a core's L2): the weights then come from
/// memory once per call, where a block of input rows kept hot instead had
/// every weight tile read from memory once per block.
constexpr int64_t kWeightBlockBytes = 512 * 1024;
/// Input rows from which prefill packs its weight blocks: packing costs a
/// pass over the block, repaid when enough input tiles read it (measured
/// on Zen 5 at k = 2048: slower up to 16 rows, faster from 32).
constexpr int64_t kPackMinRows = 32;
/// Chunks of k per panel of passTile: the passes over a panel re-read its
/// input rows from L1 (3 rows x 1024 floats = 12 KB); measured with AVX2
/// at k = 5632, 16 and 64 chunks were slower.
constexpr int64_t kPassChunks = 32;

template <class V, kvq_weight_type WT>
KVQ_MATMUL_TARGET inline typename V::T loadWeights(const void *w, int64_t i) {
  if constexpr (WT == KVQ_WEIGHT_F16)
    return V::loadF16(static_cast<const uint16_t *>(w) + i);
  else if constexpr (WT == KVQ_WEIGHT_BF16)
    return V::loadBf16(static_cast<const uint16_t *>(w) + i);
  else
    return V::loadF32(static_cast<const float *>(w) + i);
}

/// The tree of matmul.h over 32 / W vectors of partial sums.
template <class V>
KVQ_MATMUL_TARGET inline float reduce(typename V::T *acc) {
  constexpr int C = kMatmulLanes / V::W;
  for (int n = C; n > 1; n /= 2)
    for (int c = 0; c < n / 2; ++c)
      acc[c] = V::add(acc[c], acc[c + n / 2]);
  return V::hsum(acc[0]);
}

/// One chunk of 32 elements from element `at`: x rows at xs (xStride
/// apart), weight rows (of WT) at ws, addressed as Rows below says (row
/// step, at scale).
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET inline void chunk(typename V::T (&acc)[MR][NR][kMatmulLanes / V::W],
                                    const float *xs, int64_t xStride,
                                    const void *ws, int64_t wStep,
                                    int64_t wScale, int64_t at) {
  constexpr int C = kMatmulLanes / V::W;
  for (int c = 0; c < C; ++c) {
    typename V::T xv[MR];
    for (int i = 0; i < MR; ++i)
      xv[i] = V::loadF32(xs + i * xStride + at + c * V::W);
    for (int j = 0; j < NR; ++j) {
      typename V::T wv =
          loadWeights<V, WT>(ws, j * wStep + at * wScale + c * V::W);
      for (int i = 0; i < MR; ++i)
        acc[i][j][c] = V::fma(xv[i], wv, acc[i][j][c]);
    }
  }
}

/// Where a tile's weight rows are: element `at` of row r at
/// p + r * rowStep + at * atScale (elements of WT). Rows as they lie:
/// rowStep = the row stride, atScale = 1; packed (packBlock with whole
/// chunks), each chunk of the tile's R rows together: rowStep = 32,
/// atScale = R.
struct Rows {
  const void *p;
  int64_t rowStep, atScale;
};

/// The outputs' last, partial chunk (if k is not a multiple of 32), then
/// their partial sums reduced and added to y.
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET inline void finish(typename V::T (&acc)[MR][NR][kMatmulLanes / V::W],
                                     const MatmulArgs &a, int64_t i0,
                                     int64_t j0) {
  const float *x = a.x + i0 * a.xStride;
  const void *w = static_cast<const char *>(a.w) +
                  j0 * a.wStride * kvq::weightBytes(WT);
  const int64_t whole = a.k - a.k % kMatmulLanes;
  if (whole < a.k) {
    // From zero-padded copies (matmul.h: the same sums as stopping at k).
    alignas(64) float xt[MR][kMatmulLanes], wt[NR][kMatmulLanes];
    const int64_t rest = a.k - whole;
    for (int i = 0; i < MR; ++i)
      for (int l = 0; l < kMatmulLanes; ++l)
        xt[i][l] = l < rest ? x[i * a.xStride + whole + l] : 0.0f;
    for (int j = 0; j < NR; ++j)
      for (int l = 0; l < kMatmulLanes; ++l)
        wt[j][l] = l < rest ? kvq::weightAt(w, WT, j * a.wStride + whole + l)
                            : 0.0f;
    chunk<V, MR, NR, KVQ_WEIGHT_F32>(acc, &xt[0][0], kMatmulLanes, &wt[0][0],
                                     kMatmulLanes, 1, 0);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      a.y[(i0 + i) * a.yStride + j0 + j] += reduce<V>(acc[i][j]);
}

/// Outputs y[i0 .. i0 + MR) x [j0 .. j0 + NR), their whole chunks read
/// from w as given.
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET void tile(const MatmulArgs &a, int64_t i0, int64_t j0,
                            Rows w) {
  constexpr int C = kMatmulLanes / V::W;
  typename V::T acc[MR][NR][C];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      for (int c = 0; c < C; ++c)
        acc[i][j][c] = V::zero();
  const int64_t whole = a.k - a.k % kMatmulLanes;
  for (int64_t at = 0; at < whole; at += kMatmulLanes)
    chunk<V, MR, NR, WT>(acc, a.x + i0 * a.xStride, a.xStride, w.p,
                         w.rowStep, w.atScale, at);
  finish<V, MR, NR, WT>(acc, a, i0, j0);
}

/// The same outputs with the weight rows as they lie.
template <class V, int MR, int NR, kvq_weight_type WT>
KVQ_MATMUL_TARGET void tile(const MatmulArgs &a, int64_t i0, int64_t j0) {
  tile<V, MR, NR, WT>(a, i0, j0,
                      Rows{static_cast<const char *>(a.w) +
                               j0 * a.wStride * kvq::weightBytes(WT),
                           a.wStride, 1});
}

/// Input rows [i, i + MR) against weight rows [j0, j1): the whole tiles
/// from `packed` (packBlock's layout, whole chunks) unless it is null, the
/// rest as they lie.
template <class V, int MR, kvq_weight_type WT>
KVQ_MATMUL_TARGET void weightRows(const MatmulArgs &a, int64_t i, int64_t j0,
                                  int64_t j1, const char *packed) {
  const int64_t tileBytes =
      V::kTileN * (a.k - a.k % kMatmulLanes) * kvq::weightBytes(WT);
  int64_t j = j0;
  for (; j + V::kTileN <= j1; j += V::kTileN)
    if (packed)
      tile<V, MR, V::kTileN, WT>(
          a, i, j,
          Rows{packed + (j - j0) / V::kTileN * tileBytes, kMatmulLanes,
               V::kTileN});
    else
      tile<V, MR, V::kTileN, WT>(a, i, j);
  for (; j < j1; ++j)
    tile<V, MR, 1, WT>(a, i, j);
}

/// Weight rows [j0, j0 + tiles * R) packed tile by tile, in pieces of E
/// elements (E dividing 32): tile t's piece c of chunk q of row r (its E
/// elements from q * 32 + c * E) at element
/// (((t * 32 / E + c) * chunks + q) * R + r) * E, so what a tile reads in
/// order is one sequential stream (the rows as they lie are R streams a
/// row stride apart). E = 32: weightRows' whole chunks; E = W: passTile's
/// passes.
template <kvq_weight_type WT, int R, int E>
KVQ_MATMUL_TARGET void packBlock(const MatmulArgs &a, int64_t j0,
                                 int64_t tiles, char *out) {
  const int64_t chunks = a.k / kMatmulLanes, wb = kvq::weightBytes(WT);
  const char *w = static_cast<const char *>(a.w);
  for (int64_t t = 0; t < tiles; ++t)
    for (int c = 0; c < kMatmulLanes / E; ++c)
      for (int64_t q = 0; q < chunks; ++q)
        for (int r = 0; r < R; ++r, out += E * wb)
          std::memcpy(out,
                      w + ((j0 + t * R + r) * a.wStride + q * kMatmulLanes +
                           c * E) * wb,
                      static_cast<size_t>(E * wb));
}

/// Weight rows per L2 block of prefill (kWeightBlockBytes), a multiple of
/// the tile's R rows and at least R.
template <kvq_weight_type WT>
KVQ_MATMUL_TARGET inline int64_t blockRows(const MatmulArgs &a, int R) {
  const int64_t block =
      kWeightBlockBytes / ((a.k > 0 ? a.k : 1) * kvq::weightBytes(WT));
  return block < R ? R : block - block % R;
}

/// This thread's packing buffer, at least `bytes` long: kept between
/// calls, one per kernel table (a block's size at most).
KVQ_MATMUL_TARGET inline char *packBuffer(size_t bytes) {
  static thread_local std::vector<char> buffer;
  if (buffer.size() < bytes)
    buffer.resize(bytes);
  return buffer.data();
}

/// Outputs y[i0 .. i0 + PM) x [j0 .. j0 + PN) one vector of partial sums
/// at a time: partial sum vector c depends only on lanes [c * W, (c + 1) *
/// W) of every chunk, so pass c adds those lanes of a panel of chunks
/// before the next pass starts (each vector still adds its chunks in
/// order): the bits of tile(), with PM x PN accumulators in registers
/// where tile() needs C times as many per output. With AVX2's 16
/// registers and C = 4, tile() fits 1 x 3 outputs (4 loads per 3
/// multiply-adds), a pass 3 x 4 (7 loads per 12).
template <class V, int PM, int PN, kvq_weight_type WT>
KVQ_MATMUL_TARGET void passTile(const MatmulArgs &a, int64_t i0, int64_t j0,
                                const char *packed) {
  constexpr int C = kMatmulLanes / V::W;
  const int64_t chunks = a.k / kMatmulLanes, wb = kvq::weightBytes(WT);
  const float *x = a.x + i0 * a.xStride;
  typename V::T part[PM][PN][C];
  for (int i = 0; i < PM; ++i)
    for (int j = 0; j < PN; ++j)
      for (int c = 0; c < C; ++c)
        part[i][j][c] = V::zero();
  for (int64_t q0 = 0; q0 < chunks; q0 += kPassChunks) {
    const int64_t q1 = q0 + kPassChunks < chunks ? q0 + kPassChunks : chunks;
    for (int c = 0; c < C; ++c) {
      typename V::T acc[PM][PN];
      for (int i = 0; i < PM; ++i)
        for (int j = 0; j < PN; ++j)
          acc[i][j] = part[i][j][c];
      const char *w = packed + c * chunks * PN * V::W * wb;
      for (int64_t q = q0; q < q1; ++q) {
        typename V::T xv[PM];
        for (int i = 0; i < PM; ++i)
          xv[i] = V::loadF32(x + i * a.xStride + q * kMatmulLanes + c * V::W);
        for (int j = 0; j < PN; ++j) {
          const typename V::T wv = loadWeights<V, WT>(w, (q * PN + j) * V::W);
          for (int i = 0; i < PM; ++i)
            acc[i][j] = V::fma(xv[i], wv, acc[i][j]);
        }
      }
      for (int i = 0; i < PM; ++i)
        for (int j = 0; j < PN; ++j)
          part[i][j][c] = acc[i][j];
    }
  }
  finish<V, PM, PN, WT>(part, a, i0, j0);
}

/// Prefill by passTile over blocks packed in passes (V::kPassM x V::kPassN).
template <class V, kvq_weight_type WT>
KVQ_MATMUL_TARGET void runPasses(const MatmulArgs &a, int64_t j0, int64_t j1) {
  constexpr int PM = V::kPassM, PN = V::kPassN;
  const int64_t tileBytes =
      PN * (a.k - a.k % kMatmulLanes) * kvq::weightBytes(WT);
  const int64_t block = blockRows<WT>(a, PN);
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = j1 - jb > block ? jb + block : j1;
    const int64_t tiles = (je - jb) / PN;
    char *packed = packBuffer(static_cast<size_t>(tiles * tileBytes));
    packBlock<WT, PN, V::W>(a, jb, tiles, packed);
    int64_t i = 0;
    for (; i + PM <= a.m; i += PM) {
      for (int64_t t = 0; t < tiles; ++t)
        passTile<V, PM, PN, WT>(a, i, jb + t * PN, packed + t * tileBytes);
      for (int64_t j = jb + tiles * PN; j < je; ++j)
        tile<V, PM, 1, WT>(a, i, j);
    }
    for (; i < a.m; ++i)
      weightRows<V, 1, WT>(a, i, jb, je, nullptr);
  }
}

template <class V, kvq_weight_type WT>
KVQ_MATMUL_TARGET void run(const MatmulArgs &a, int64_t j0, int64_t j1) {
  if (a.m == 1) {
    // Decode: stream the weight rows, kDecodeRows at a time.
    int64_t j = j0;
    for (; j + V::kDecodeRows <= j1; j += V::kDecodeRows)
      tile<V, 1, V::kDecodeRows, WT>(a, 0, j);
    for (; j < j1; ++j)
      tile<V, 1, 1, WT>(a, 0, j);
    return;
  }
  if constexpr (V::kPassM * V::kPassN > 0)
    if (a.m >= kPackMinRows)
      return runPasses<V, WT>(a, j0, j1);
  // Prefill: a block of weight rows, read from memory once (and packed
  // when enough input rows read it), stays in L2 while each register tile
  // of input rows (kTileM rows) passes over it kTileN rows at a time.
  const int64_t block = blockRows<WT>(a, V::kTileN);
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = jb + block < j1 ? jb + block : j1;
    const int64_t tiles = (je - jb) / V::kTileN;
    char *from = nullptr;
    if (a.m >= kPackMinRows) {
      from = packBuffer(static_cast<size_t>(
          tiles * V::kTileN * (a.k - a.k % kMatmulLanes) *
          kvq::weightBytes(WT)));
      packBlock<WT, V::kTileN, kMatmulLanes>(a, jb, tiles, from);
    }
    int64_t i = 0;
    for (; i + V::kTileM <= a.m; i += V::kTileM)
      weightRows<V, V::kTileM, WT>(a, i, jb, je, from);
    for (; i < a.m; ++i)
      weightRows<V, 1, WT>(a, i, jb, je, from);
  }
}

/// The table entry: run() for the call's weight type.
template <class V>
KVQ_MATMUL_TARGET void kernel(const MatmulArgs &a, int64_t j0, int64_t j1) {
  switch (a.wType) {
  case KVQ_WEIGHT_F16:
    return run<V, KVQ_WEIGHT_F16>(a, j0, j1);
  case KVQ_WEIGHT_BF16:
    return run<V, KVQ_WEIGHT_BF16>(a, j0, j1);
  default:
    return run<V, KVQ_WEIGHT_F32>(a, j0, j1);
  }
}

} // namespace matmul_body
} // namespace
