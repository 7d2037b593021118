//===- attend_avx2_outliers.cpp - KVQuant's outlier corrections, AVX2 -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::outlierScores and outlierAxpy (KVQuant's sparse entries of a
// token row, blocks.h) for x86 machines without AVX-512. The reference's
// loops, with what made them slow taken out: the entry's fp16 value is
// converted by F16C (exact, as halfToFloat) instead of in software, its
// head found by a shift where head_dim is a power of two instead of a
// 64-bit division, and the entry decoded once for all query vectors. Every
// score and accumulator still receives its terms in stored order, each term
// rounded as the reference rounds it (-ffp-contract=off), so the bits are
// the reference's (AttendOrder.Outlier*). The AVX-512 versions take 16
// entries per register by gathers (attend_avx512_lut.cpp); these stay
// scalar, since an 8-lane gather costs about as much as the scalar loads
// it replaces on the AVX2 machines measured.
//
//===----------------------------------------------------------------------===//
#include "../x86/x86_kernels.h"
#include "../x86/x86_target.h"

#include "bitpack.h"
#include "blocks.h"

#include <immintrin.h>

using namespace kvq;

namespace {

/// A channel index of a row (every head) split into its head and its
/// channel within the head.
struct HeadSplit {
  int64_t d;
  int shift = -1; ///< log2 d, or -1 when d is not a power of two

  explicit HeadSplit(int64_t d) : d(d) {
    if ((d & (d - 1)) == 0)
      shift = __builtin_ctzll(static_cast<uint64_t>(d));
  }
  void operator()(uint32_t ch, int64_t &h, int64_t &cc) const {
    if (shift >= 0) {
      h = ch >> shift;
      cc = ch & (d - 1);
    } else {
      h = ch / static_cast<uint32_t>(d);
      cc = ch - h * d;
    }
  }
};

KVQ_AVX2 inline float entryValue(const OutlierEntry &e) {
  return _cvtsh_ss(e.value);
}

/// scores[h][j] += q[h][j][cc] * x - lut[h][j][cc][code] per entry, in
/// stored order for each score.
KVQ_AVX2 void outlierScoresAvx2(const OutlierScores &a) {
  const OutlierList<const uint8_t> list{a.entries};
  const HeadSplit split(a.d);
  const int64_t L = int64_t{1} << a.bits;
  for (int64_t o = 0; o < a.k; ++o) {
    const OutlierEntry e = list.at(o);
    int64_t h, cc;
    split(e.channel, h, cc);
    const float x = entryValue(e);
    const int64_t code = packedCodeAt(a.codes, e.channel, a.bits);
    const float *q = a.q + h * a.nq * a.d + cc;
    const float *lut = a.lut + (h * a.nq * a.d + cc) * L + code;
    float *s = a.scores + h * a.nq;
    for (int64_t j = 0; j < a.nq; ++j) {
      const float product = q[j * a.d] * x;
      s[j] += product - lut[j * a.d * L];
    }
  }
}

/// acc[h][j][cc] += w[h][j] * x - w[h][j] * level per entry, in stored
/// order for each accumulator.
KVQ_AVX2 void outlierAxpyAvx2(const OutlierAxpy &a) {
  const OutlierList<const uint8_t> list{a.entries};
  const HeadSplit split(a.d);
  for (int64_t o = 0; o < a.k; ++o) {
    const OutlierEntry e = list.at(o);
    int64_t h, cc;
    split(e.channel, h, cc);
    const float x = entryValue(e);
    const float level =
        a.levels[h * a.levelCount + packedCodeAt(a.codes, e.channel, a.bits)];
    const float *w = a.w + h * a.nq;
    float *acc = a.acc + h * a.nq * a.d + cc;
    for (int64_t j = 0; j < a.nq; ++j)
      acc[j * a.d] += w[j] * x - w[j] * level;
  }
}

} // namespace

void kvq::x86::fillOutliersAvx2(const AttendShape &, AttendOps &ops) {
  ops.outlierScores = outlierScoresAvx2;
  ops.outlierAxpy = outlierAxpyAvx2;
}
