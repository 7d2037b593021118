//===- rope.cpp - Deterministic RoPE angles and the key rotation ----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The series below are plain Taylor / atanh expansions, evaluated far past
// double precision for the reduced arguments they see; the accuracy goal is
// a few double ulps (the angles end up as floats), the hard requirement is
// that every architecture computes the same bits, which holds because only
// +, -, *, / and rounding to an integer are used (the runtime is compiled
// with -ffp-contract=off, so no multiply-add is fused on any ISA).
//
//===----------------------------------------------------------------------===//
#include "rope.h"

#include <algorithm>
#include <cmath>
#include <new>

using namespace kvq;

namespace {

constexpr double kLn2 = 0.6931471805599453;
/// ln 2 in two parts; the first has 32 significant bits, so k times it is
/// exact for every |k| < 2^21 (the exponent range of a double).
constexpr double kLn2Hi = 0x1.62e42feep-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kSqrtHalf = 0.7071067811865476;
/// pi/2 in three parts; the first two have 33 significant bits, so k times
/// them is exact for every quadrant count k < 2^20 (angles below 1.6e6).
constexpr double kPio2Hi = 0x1.921fb544p+0;
constexpr double kPio2Mid = 0x1.0b4611a6p-34;
constexpr double kPio2Lo = 0x1.3198a2e037073p-69;

/// Tokens per row of the low table: a chunk of the fused attention (128
/// tokens, aligned) never spans two blocks.
constexpr int64_t kBlock = 256;
static_assert(kBlock % kKeyTile == 0, "a key tile lies inside one block");

} // namespace

double detmath::log(double x) {
  int e = 0;
  double m = std::frexp(x, &e); // exact: m in [0.5, 1)
  if (m < kSqrtHalf) {
    m *= 2.0;
    --e;
  }
  // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172.
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double sum = 0.0;
  for (int k = 41; k >= 1; k -= 2)
    sum = sum * s2 + 1.0 / k;
  return 2.0 * s * sum + (e * kLn2Lo + e * kLn2Hi);
}

double detmath::exp(double x) {
  const double k = std::nearbyint(x / kLn2);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo; // |r| <= 0.35
  double p = 1.0;
  for (int n = 22; n >= 1; --n)
    p = 1.0 + p * r / n;
  return std::ldexp(p, static_cast<int>(k));
}

void detmath::sincos(double x, double *s, double *c) {
  const double k = std::nearbyint(x / kPio2Hi);
  const double r = ((x - k * kPio2Hi) - k * kPio2Mid) - k * kPio2Lo;
  const double r2 = r * r;
  // sin r = r (1 - r^2/(2*3) (1 - r^2/(4*5) (...))), cos likewise.
  double ps = 1.0, pc = 1.0;
  for (int n = 24; n >= 2; n -= 2) {
    ps = 1.0 - ps * r2 / (n * (n + 1));
    pc = 1.0 - pc * r2 / ((n - 1) * n);
  }
  const double sr = r * ps, cr = pc;
  switch (static_cast<int64_t>(k) & 3) {
  case 0:
    *s = sr, *c = cr;
    break;
  case 1:
    *s = cr, *c = -sr;
    break;
  case 2:
    *s = -sr, *c = -cr;
    break;
  default:
    *s = -cr, *c = sr;
    break;
  }
}

Rope::Rope(const kvq_config &cfg) : style_(cfg.rope_style) {
  if (!enabled())
    return;
  d_ = cfg.head_dim;
  pairs_ = d_ / 2;
  const double logTheta = detmath::log(static_cast<double>(cfg.rope_theta));
  invFreq_.resize(static_cast<size_t>(pairs_));
  for (int64_t i = 0; i < pairs_; ++i)
    invFreq_[static_cast<size_t>(i)] =
        detmath::exp(-(2.0 * static_cast<double>(i) / d_) * logTheta);
  cosLo_.resize(static_cast<size_t>(kBlock * pairs_));
  sinLo_.resize(cosLo_.size());
  for (int64_t j = 0; j < kBlock; ++j)
    for (int64_t i = 0; i < pairs_; ++i) {
      double s, c;
      detmath::sincos(j * invFreq_[static_cast<size_t>(i)], &s, &c);
      cosLo_[static_cast<size_t>(j * pairs_ + i)] = static_cast<float>(c);
      sinLo_[static_cast<size_t>(j * pairs_ + i)] = static_cast<float>(s);
    }
  cosLoT_.resize(cosLo_.size());
  sinLoT_.resize(cosLo_.size());
  for (int64_t j = 0; j < kBlock; ++j)
    for (int64_t i = 0; i < pairs_; ++i) {
      const size_t to = static_cast<size_t>(
          ((j / kKeyTile) * pairs_ + i) * kKeyTile + j % kKeyTile);
      cosLoT_[to] = cosLo_[static_cast<size_t>(j * pairs_ + i)];
      sinLoT_[to] = sinLo_[static_cast<size_t>(j * pairs_ + i)];
    }
}

namespace {

/// cos/sin of (hi + lo) from those of hi and lo: the angle-sum formula,
/// two float roundings per product and one per sum. Every path that makes
/// angles uses this (and the Metal kernels repeat it, kernels/kvq_rope.h):
/// the bits of a rotated key depend on it.
inline void angleSum(float ch, float sh, float cl, float sl, float &c,
                     float &s) {
  c = ch * cl - sh * sl;
  s = sh * cl + ch * sl;
}

/// Pair (a, b) turned by the angle of (c, s).
inline void rotatePair(float &a, float &b, float c, float s) {
  const float ra = a * c - b * s, rb = a * s + b * c;
  a = ra;
  b = rb;
}

} // namespace

void Rope::highRow(int64_t block, float *cosOut, float *sinOut) const {
  const double base = static_cast<double>(block * kBlock);
  for (int64_t i = 0; i < pairs_; ++i) {
    double s, c;
    detmath::sincos(base * invFreq_[static_cast<size_t>(i)], &s, &c);
    cosOut[i] = static_cast<float>(c);
    sinOut[i] = static_cast<float>(s);
  }
}

void Rope::cover(int64_t positions) const noexcept {
  if (!enabled())
    return;
  const int64_t blocks = (positions + kBlock - 1) / kBlock;
  if (blocks <= hiBlocks_)
    return;
  try {
    cosHi_.resize(static_cast<size_t>(blocks * pairs_));
    sinHi_.resize(cosHi_.size());
  } catch (const std::bad_alloc &) {
    cosHi_.resize(static_cast<size_t>(hiBlocks_ * pairs_)); // never grows
    sinHi_.resize(cosHi_.size());
    return;
  }
  for (int64_t b = hiBlocks_; b < blocks; ++b)
    highRow(b, cosHi_.data() + b * pairs_, sinHi_.data() + b * pairs_);
  hiBlocks_ = blocks;
}

void Rope::moveTo(int64_t pos, Cursor &cur) const {
  const int64_t block = pos / kBlock;
  if (cur.block == block)
    return;
  const size_t n = static_cast<size_t>(pairs_);
  cur.cosHi.resize(n);
  cur.sinHi.resize(n);
  cur.cos.resize(n);
  cur.sin.resize(n);
  if (block < hiBlocks_) {
    std::copy_n(cosHi_.data() + block * pairs_, n, cur.cosHi.data());
    std::copy_n(sinHi_.data() + block * pairs_, n, cur.sinHi.data());
  } else {
    highRow(block, cur.cosHi.data(), cur.sinHi.data());
  }
  cur.block = block;
}

void Rope::angles(int64_t pos, Cursor &cur) const {
  moveTo(pos, cur);
  anglesTile(pos, 1, cur, cur.cos.data(), cur.sin.data(), pairs_, 1);
}

void Rope::rotate(float *row, int64_t heads, const Cursor &cur) const {
  rotateRows(row, 1, heads, cur.cos.data(), cur.sin.data());
}

namespace {

/// anglesTile of a whole aligned tile by columns: the angle-sum formula of
/// Rope::angles, element-wise, tokens in vector lanes.
KVQ_AVX2_CLONE
void anglesColumns(const float *__restrict cosHi, const float *__restrict sinHi,
                   const float *__restrict cosLo, const float *__restrict sinLo,
                   int64_t pairs, float *__restrict cosOut,
                   float *__restrict sinOut) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float ch = cosHi[i], sh = sinHi[i];
    const float *__restrict cl = cosLo + i * kKeyTile;
    const float *__restrict sl = sinLo + i * kKeyTile;
    for (int64_t t = 0; t < kKeyTile; ++t)
      angleSum(ch, sh, cl[t], sl[t], cosOut[i * kKeyTile + t],
               sinOut[i * kKeyTile + t]);
  }
}

/// The angles of one position by rows (iStride 1): the same angle sums,
/// pairs in vector lanes (the loop by pairs with a stride did not
/// vectorize; it took 8.5 % of the pre-RoPE fp16 pass at 32K).
KVQ_AVX2_CLONE
void anglesRow(const float *__restrict cosHi, const float *__restrict sinHi,
               const float *__restrict cosLo, const float *__restrict sinLo,
               int64_t pairs, float *__restrict cosOut,
               float *__restrict sinOut) {
  for (int64_t i = 0; i < pairs; ++i)
    angleSum(cosHi[i], sinHi[i], cosLo[i], sinLo[i], cosOut[i], sinOut[i]);
}

} // namespace

void Rope::anglesTile(int64_t pos0, int64_t n, Cursor &cur, float *cosOut,
                      float *sinOut, int64_t tStride, int64_t iStride) const {
  if (n == kKeyTile && pos0 % kKeyTile == 0 && tStride == 1 &&
      iStride == kKeyTile) {
    moveTo(pos0, cur); // a tile never spans two blocks (kBlock % 16 == 0)
    const int64_t tile = (pos0 % kBlock) / kKeyTile;
    anglesColumns(cur.cosHi.data(), cur.sinHi.data(),
                  cosLoT_.data() + tile * pairs_ * kKeyTile,
                  sinLoT_.data() + tile * pairs_ * kKeyTile, pairs_, cosOut,
                  sinOut);
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = pos0 + t, j = pos % kBlock;
    moveTo(pos, cur);
    const float *cl = cosLo_.data() + j * pairs_,
                *sl = sinLo_.data() + j * pairs_;
    const float *chi = cur.cosHi.data(), *shi = cur.sinHi.data();
    if (iStride == 1) {
      anglesRow(chi, shi, cl, sl, pairs_, cosOut + t * tStride,
                sinOut + t * tStride);
      continue;
    }
    for (int64_t i = 0; i < pairs_; ++i)
      angleSum(chi[i], shi[i], cl[i], sl[i], cosOut[t * tStride + i * iStride],
               sinOut[t * tStride + i * iStride]);
  }
}

namespace {

/// rotate()'s two operations per channel of a pair (a, b), element-wise.
KVQ_AVX2_CLONE
void rotateHalfRows(float *__restrict x, int64_t rows, int64_t pairs,
                    const float *__restrict cos, const float *__restrict sin,
                    int64_t heads) {
  // Row r = (token t, head h) holds channels (i, i + pairs).
  for (int64_t r = 0; r < rows; ++r) {
    float *__restrict a = x + r * 2 * pairs;
    float *__restrict b = a + pairs;
    const float *__restrict c = cos + (r / heads) * pairs;
    const float *__restrict s = sin + (r / heads) * pairs;
    for (int64_t i = 0; i < pairs; ++i)
      rotatePair(a[i], b[i], c[i], s[i]);
  }
}

KVQ_AVX2_CLONE
void rotateInterleavedRows(float *__restrict x, int64_t rows, int64_t pairs,
                           const float *__restrict cos,
                           const float *__restrict sin, int64_t heads) {
  // Row r = (token t, head h) holds pairs (2i, 2i + 1).
  for (int64_t r = 0; r < rows; ++r) {
    float *__restrict v = x + r * 2 * pairs;
    const float *__restrict c = cos + (r / heads) * pairs;
    const float *__restrict s = sin + (r / heads) * pairs;
    for (int64_t i = 0; i < pairs; ++i)
      rotatePair(v[2 * i], v[2 * i + 1], c[i], s[i]);
  }
}

} // namespace

void Rope::rotateRows(float *rows, int64_t n, int64_t heads, const float *cos,
                      const float *sin) const {
  if (style_ == KVQ_ROPE_INTERLEAVED)
    rotateInterleavedRows(rows, n * heads, pairs_, cos, sin, heads);
  else
    rotateHalfRows(rows, n * heads, pairs_, cos, sin, heads);
}
