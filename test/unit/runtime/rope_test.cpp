//===- rope_test.cpp - Pre-RoPE key caches --------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A cache with rope_style != NONE receives keys before RoPE and attends to
// (and fetches) them rotated at their positions. The oracles here are
// written independently of runtime/kernels/rope/rope.cpp: libm in double, and
// each style's pairing spelled out as the model code spells it.
//
//===----------------------------------------------------------------------===//
#include "attention.h"
#include "bitpack.h"
#include "cache_handle.h"
#include "fp16.h"
#include "kernels.h"
#include "rope.h"
#include "rope_keys.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <string>

using namespace kvqtest;

namespace {

/// RoPE of one key row ([heads][d]) at position pos, in double with libm.
std::vector<double> rotateLibm(const float *row, int heads, int d, double pos,
                               int32_t style, double theta) {
  std::vector<double> out(static_cast<size_t>(heads * d));
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < d / 2; ++i) {
      // llama2.c: channels (2i, 2i+1); Hugging Face: i and i + d/2.
      int a = style == KVQ_ROPE_INTERLEAVED ? 2 * i : i;
      int b = style == KVQ_ROPE_INTERLEAVED ? 2 * i + 1 : i + d / 2;
      double angle = pos * std::pow(theta, -2.0 * i / d);
      double x = row[h * d + a], y = row[h * d + b];
      out[static_cast<size_t>(h * d + a)] =
          x * std::cos(angle) - y * std::sin(angle);
      out[static_cast<size_t>(h * d + b)] =
          x * std::sin(angle) + y * std::cos(angle);
    }
  return out;
}

kvq_config ropeConfig(kvq_method m, int heads, int d, int32_t style,
                      float theta) {
  kvq_config c = config(m, heads, d);
  c.rope_style = style;
  c.rope_theta = theta;
  return c;
}

TEST(RopeMath, DeterministicFunctionsAgreeWithLibm) {
  for (double x : {1.0001, 2.0, 10.0, 500.0, 10000.0, 1e6, 1e9, 0.3, 1e-5}) {
    EXPECT_NEAR(kvq::detmath::log(x), std::log(x),
                4e-16 * std::fabs(std::log(x)) + 1e-300)
        << x;
  }
  for (double x : {0.0, -1e-3, -0.5, -1.0, -9.2, -21.0, -40.0, 3.0}) {
    EXPECT_NEAR(kvq::detmath::exp(x), std::exp(x), 8e-16 * std::exp(x)) << x;
  }
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) {
    // Angles up to the largest a position below 2^20 can give, then larger.
    double x = i < 1500 ? rng.uniform(0.0, 1.6e6) : rng.uniform(0.0, 4e9);
    double s = 0, c = 0;
    kvq::detmath::sincos(x, &s, &c);
    const double tol = x < 1.6e6 ? 1e-12 : 1e-6;
    EXPECT_NEAR(s, std::sin(x), tol) << x;
    EXPECT_NEAR(c, std::cos(x), tol) << x;
  }
}

TEST(RopeMath, AnglesAgreeWithLibmAtEveryTableSeam) {
  for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
    const int d = 64;
    kvq_config cfg = ropeConfig(KVQ_METHOD_FP16, 1, d, style, 10000.0f);
    kvq::Rope rope(cfg);
    ASSERT_TRUE(rope.enabled());
    kvq::Rope::Cursor cur;
    for (int64_t pos : {0, 1, 2, 255, 256, 257, 511, 512, 4095, 4096, 32767,
                        65536, 131071, 1000003}) {
      rope.angles(pos, cur);
      for (int i = 0; i < d / 2; ++i) {
        double angle =
            static_cast<double>(pos) * std::pow(10000.0, -2.0 * i / d);
        EXPECT_NEAR(cur.cos[static_cast<size_t>(i)], std::cos(angle), 1e-6)
            << "pos " << pos << " pair " << i;
        EXPECT_NEAR(cur.sin[static_cast<size_t>(i)], std::sin(angle), 1e-6)
            << "pos " << pos << " pair " << i;
      }
    }
  }
}

// Rope::cover keeps the high rows in a table (the attention entry covers a
// layer's positions before each call): cursors that copy a row from it
// get the bits of cursors that compute it, in both tile layouts, at every
// block seam below and past the covered positions; a smaller cover later
// changes nothing. And the two layouts (by rows, pairs in lanes; by
// columns, tokens in lanes: separate loops) give the same angles.
TEST(RopeMath, CoveredAnglesAreTheComputedOnesBitForBit) {
  for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
    const int d = 64, P = d / 2;
    const kvq_config cfg = ropeConfig(KVQ_METHOD_FP16, 1, d, style, 500000.0f);
    const kvq::Rope computed(cfg), covered(cfg);
    covered.cover(3000); // blocks 0 .. 11
    covered.cover(10);   // no effect
    int64_t checked = 0;
    for (int64_t pos0 : {0, 240, 256, 2816, 2992, 3008, 4096, 65536}) {
      std::vector<float> c1(16 * P), s1(c1.size()), c2(c1.size()),
          s2(c1.size()), byRows(c1.size()), byRowsSin(c1.size());
      kvq::Rope::Cursor a, b;
      computed.anglesTile(pos0, 16, a, byRows.data(), byRowsSin.data(), P, 1);
      for (auto [t, i] : {std::pair<int64_t, int64_t>{1, 16},
                          std::pair<int64_t, int64_t>{P, 1}}) {
        computed.anglesTile(pos0, 16, a, c1.data(), s1.data(), t, i);
        covered.anglesTile(pos0, 16, b, c2.data(), s2.data(), t, i);
        for (size_t e = 0; e < c1.size(); ++e) {
          ASSERT_EQ(kvq::floatBits(c1[e]), kvq::floatBits(c2[e]))
              << pos0 << " " << e;
          ASSERT_EQ(kvq::floatBits(s1[e]), kvq::floatBits(s2[e]))
              << pos0 << " " << e;
          // Element e is (token, pair) in this layout: the same angle by rows.
          const size_t r = t == 1 ? (e % 16) * P + e / 16 : e;
          ASSERT_EQ(kvq::floatBits(c1[e]), kvq::floatBits(byRows[r])) << e;
          ASSERT_EQ(kvq::floatBits(s1[e]), kvq::floatBits(byRowsSin[r])) << e;
          ++checked;
        }
      }
    }
    EXPECT_EQ(checked, 8 * 2 * 16 * P);
  }
}

TEST(RopeCache, FetchReturnsKeysRotatedAtTheirPositions) {
  const int heads = 2, d = 8;
  for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
    SCOPED_TRACE(style);
    const float theta = style == KVQ_ROPE_HALF ? 100.0f : 10000.0f;
    Cache c(ropeConfig(KVQ_METHOD_FP16, heads, d, style, theta));
    KV kv = gaussianKV(3, 300, heads, d); // crosses the 256-token seam
    ASSERT_EQ(append(c.h, kv, 0, 120), KVQ_OK) << kvq_last_error();
    for (int64_t t = 120; t < 300; ++t)
      ASSERT_EQ(append(c.h, kv, t, t + 1), KVQ_OK) << kvq_last_error();
    Fetched f = fetch(c.h);
    const int64_t C = heads * d;
    ASSERT_EQ(f.k.size(), static_cast<size_t>(300 * C));
    for (int64_t t = 0; t < 300; ++t) {
      // The cache holds fp16 keys: the oracle rotates the rounded ones.
      std::vector<float> stored(static_cast<size_t>(C));
      for (int64_t i = 0; i < C; ++i)
        stored[static_cast<size_t>(i)] = fromHalf(toHalf(kv.krow(t)[i]));
      std::vector<double> want = rotateLibm(
          stored.data(), heads, d, static_cast<double>(t), style, theta);
      for (int64_t i = 0; i < C; ++i) {
        ASSERT_NEAR(f.k[static_cast<size_t>(t * C + i)],
                    want[static_cast<size_t>(i)], 2e-6)
            << "token " << t << " channel " << i;
        // Values are not rotated.
        ASSERT_EQ(f.v[static_cast<size_t>(t * C + i)],
                  fromHalf(toHalf(kv.vrow(t)[i])));
      }
    }
  }
}

/// The canonical score of the pre-RoPE key pass (rope_keys.h), written
/// out from the docs: for each pair i, with (a, b) its channels and
/// (c, s) its angle, A = fma(q_b, k_b, q_a k_a), B = fma(-q_a, k_b,
/// q_b k_a), then S_{i mod 16} = fma(s, B, fma(c, A, S_{i mod 16})); then
/// the fixed tree. k is the pre-RoPE key as the store decodes it.
float canonicalRopeScore(const float *q, const float *k, const float *cos,
                         const float *sin, int64_t d, int32_t style) {
  const int64_t P = d / 2;
  float S[16] = {};
  for (int64_t i = 0; i < P; ++i) {
    const int64_t a = style == KVQ_ROPE_INTERLEAVED ? 2 * i : i;
    const int64_t b = style == KVQ_ROPE_INTERLEAVED ? 2 * i + 1 : i + P;
    const float pa = q[a] * k[a], pb = q[b] * k[a];
    const float A = std::fma(q[b], k[b], pa);
    const float B = std::fma(-q[a], k[b], pb);
    const float first = std::fma(cos[i], A, S[i % 16]);
    S[i % 16] = std::fma(sin[i], B, first);
  }
  float T[8], U[4];
  for (int l = 0; l < 8; ++l)
    T[l] = S[l] + S[l + 8];
  for (int l = 0; l < 4; ++l)
    U[l] = T[l] + T[l + 4];
  return (U[0] + U[2]) + (U[1] + U[3]);
}

/// n random angles in [0, 2 pi): their cosines and sines.
void randomAngles(Rng &rng, size_t n, std::vector<float> &cos,
                  std::vector<float> &sin) {
  cos.resize(n);
  sin.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double angle = rng.uniform(0.0, 6.283185307179586);
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
}

/// One key row's scores in a kernel's output (out[j], j < nq; the slots up
/// to outStride left at -7): each the canonical score of key k against
/// query vector j (q + j * d), bit for bit.
testing::AssertionResult rowIsCanonical(const float *out, int64_t nq,
                                        int64_t outStride, const float *q,
                                        const float *k, const float *cos,
                                        const float *sin, int64_t d,
                                        int32_t style) {
  for (int64_t j = 0; j < nq; ++j)
    if (const float want = canonicalRopeScore(q + j * d, k, cos, sin, d, style);
        out[j] != want)
      return testing::AssertionFailure()
             << "query " << j << ": " << out[j] << ", want " << want;
  for (int64_t j = nq; j < outStride; ++j) // between: untouched
    if (out[j] != -7.0f)
      return testing::AssertionFailure() << "slot " << j << " written";
  return testing::AssertionSuccess();
}

// The row kernels of the key pass, called with any part of a tile (the
// fp16 walk scores a few rows per call): every row count up to a tile,
// both styles, pairs that fill whole 16-lane steps and pairs that leave a
// remainder, one and several query vectors, each score bit for bit the
// canonical one (with the active clone here, and on arm64 under qemu).
TEST(RopeKeys, RowKernelsGiveTheCanonicalScoreForEveryRowCount) {
  Rng rng(23);
  int64_t checked = 0;
  for (int64_t d : {32, 40, 128})
    for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF})
      for (int64_t nq : {1, 2})
        for (int64_t n = 1; n <= kvq::kKeyTile; ++n) {
          SCOPED_TRACE(testing::Message() << "d " << d << " style " << style
                                          << " nq " << nq << " rows " << n);
          const int64_t P = d / 2, stride = d + 3; // rows not back to back
          std::vector<float> q(static_cast<size_t>(nq * d));
          std::vector<uint16_t> halves(static_cast<size_t>(n * stride));
          std::vector<float> keys(halves.size()),
              cos(static_cast<size_t>(n * P)), sin(cos.size());
          for (float &e : q)
            e = static_cast<float>(rng.normal());
          for (size_t i = 0; i < halves.size(); ++i) {
            halves[i] = kvq::floatToHalf(static_cast<float>(rng.laplace()));
            keys[i] = kvq::halfToFloat(halves[i]);
          }
          randomAngles(rng, cos.size(), cos, sin);
          kvq::RopeQueries rq;
          rq.split(q.data(), nq, d, style == KVQ_ROPE_INTERLEAVED);
          std::vector<const uint16_t *> rows(static_cast<size_t>(n));
          for (int64_t t = 0; t < n; ++t)
            rows[static_cast<size_t>(t)] = halves.data() + t * stride;
          const int64_t outStride = nq + 1;
          std::vector<float> fromHalves(static_cast<size_t>(n * outStride)),
              fromFloats(fromHalves.size());
          kvq::ropeScoresHalfRows(rows.data(), n, cos.data(), sin.data(), rq, 0,
                                  nq, style == KVQ_ROPE_INTERLEAVED,
                                  fromHalves.data(), outStride);
          kvq::ropeScoresRows(keys.data(), stride, n, cos.data(), sin.data(),
                              rq, 0, nq, style == KVQ_ROPE_INTERLEAVED,
                              fromFloats.data(), outStride);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t j = 0; j < nq; ++j) {
              const float want = canonicalRopeScore(
                  q.data() + j * d, keys.data() + t * stride,
                  cos.data() + t * P, sin.data() + t * P, d, style);
              const size_t o = static_cast<size_t>(t * outStride + j);
              ASSERT_EQ(fromHalves[o], want) << "row " << t << " query " << j;
              ASSERT_EQ(fromFloats[o], want) << "row " << t << " query " << j;
              ++checked;
            }
        }
  EXPECT_EQ(checked, int64_t{3} * 2 * (1 + 2) * (16 * 17 / 2));
}

// AttendOps::ropeNibbleTiles (2- and 4-bit KIVI key tiles by tables) of every
// table this CPU runs that has one, against the canonical score of the
// keys the codes decode to (code * scale + zero, as loadRow): every tile
// count a call takes, both styles, pairs that fill whole chains of 16 and
// pairs that do not (d 36), one and several query vectors, tiles that
// start inside the group, scales of both signs. Bit for bit.
TEST(RopeKeys, NibbleTableTilesGiveTheCanonicalScore) {
  Rng rng(31);
  std::vector<const kvq::KernelTable *> tables = {&kvq::referenceKernels()};
  for (const kvq::KernelTable *t : kvq::simdKernelVariants())
    tables.push_back(t);
  int64_t checked = 0;
  for (int bits : {2, 4})
    for (int64_t d : {32, 36, 128})
      for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF})
        for (int64_t nq : {1, 3})
          for (int64_t tiles = 1; tiles <= kvq::kRopeNibbleMaxTiles; ++tiles) {
            const int64_t heads = 2, C = heads * d, P = d / 2;
            const int64_t rows = 16 * tiles + 18, row0 = 2; // even, inside
            std::vector<uint8_t> codes(static_cast<size_t>(rows * C));
            for (uint8_t &c : codes)
              c = static_cast<uint8_t>(rng.uniform() * (1 << bits));
            std::vector<uint8_t> block(
                static_cast<size_t>(rows * C * bits / 8 + 8));
            kvq::packNibbleMajor(codes.data(), rows, C, bits, block.data());
            std::vector<float> scale(static_cast<size_t>(C)),
                zero(scale.size());
            for (int64_t c = 0; c < C; ++c) {
              scale[static_cast<size_t>(c)] =
                  static_cast<float>(rng.normal() * (c % 3 == 0 ? 0.01 : 1));
              zero[static_cast<size_t>(c)] = static_cast<float>(rng.laplace());
            }
            std::vector<float> cos, sin;
            randomAngles(rng, static_cast<size_t>(tiles * P * 16), cos, sin);
            std::vector<float> q(static_cast<size_t>(heads * nq * d));
            for (float &e : q)
              e = static_cast<float>(rng.normal());
            kvq::RopeQueries rq;
            rq.split(q.data(), heads * nq, d, style == KVQ_ROPE_INTERLEAVED);
            const int64_t h = 1, outStride = nq + 2;
            for (const kvq::KernelTable *t : tables) {
              const kvq::AttendOps ops = kvq::selectAttendOps(
                  *t, kvq::AttendShape{d, heads, 32, bits, bits});
              if (!ops.ropeNibbleTiles)
                continue;
              SCOPED_TRACE(testing::Message()
                           << t->name << " bits " << bits << " d " << d
                           << " style " << style << " nq " << nq << " tiles "
                           << tiles);
              std::vector<float> out(
                  static_cast<size_t>(tiles * 16 * outStride), -7.0f);
              kvq::RopeNibbleTiles a;
              a.codes = block.data();
              a.bits = bits;
              a.rows = rows;
              a.row0 = row0;
              a.tiles = tiles;
              a.nib0 = h * d * bits / 4;
              a.scale = scale.data() + h * d;
              a.zero = zero.data() + h * d;
              a.cos = cos.data();
              a.sin = sin.data();
              a.q = rq.a(h * nq);
              a.qStride = rq.stride();
              a.nq = nq;
              a.d = d;
              a.interleaved = style == KVQ_ROPE_INTERLEAVED;
              a.out = out.data();
              a.outStride = outStride;
              ops.ropeNibbleTiles(a);
              std::vector<float> k(static_cast<size_t>(d)), c(P), s(P);
              for (int64_t r = 0; r < 16 * tiles; ++r) {
                const int64_t u = r / 16, lane = r % 16, row = row0 + r;
                for (int64_t ch = 0; ch < d; ++ch) {
                  const size_t at = static_cast<size_t>(h * d + ch);
                  k[static_cast<size_t>(ch)] =
                      static_cast<float>(
                          codes[static_cast<size_t>(row * C) + at]) *
                          scale[at] +
                      zero[at];
                }
                for (int64_t i = 0; i < P; ++i) {
                  c[static_cast<size_t>(i)] =
                      cos[static_cast<size_t>((u * P + i) * 16 + lane)];
                  s[static_cast<size_t>(i)] =
                      sin[static_cast<size_t>((u * P + i) * 16 + lane)];
                }
                ASSERT_TRUE(rowIsCanonical(out.data() + r * outStride, nq,
                                           outStride, q.data() + h * nq * d,
                                           k.data(), c.data(), s.data(), d,
                                           style))
                    << "row " << r;
                checked += nq;
              }
            }
          }
  // On AVX-512 machines the table kernel must actually have run.
  const std::vector<const kvq::KernelTable *> v = kvq::simdKernelVariants();
  if (!v.empty() && std::string(v[0]->name) == "avx512")
    EXPECT_EQ(checked, int64_t{16} * (1 + 2 + 3 + 4) * 2 * (1 + 3) * 3 * 2);
}

// AttendOps::ropeCodeRows (3-bit row-major KIVI key rows) and ropeHalfRows
// (fp16 rows), decoded in registers, of every table this CPU runs that has
// them, against the canonical score of the keys the rows decode to (code *
// scale + zero, as loadRow; the fp16 value): every row count up to a tile,
// both styles, one to five query vectors (pairs and a single one),
// head_dims 32 to 256, a head that is not the row's first, scales of both
// signs. Each row is the last bytes of its own buffer, so a read past it
// is out of bounds (ASan). Bit for bit.
TEST(RopeKeys, TableRowKernelsGiveTheCanonicalScore) {
  Rng rng(37);
  std::vector<const kvq::KernelTable *> tables = {&kvq::referenceKernels()};
  for (const kvq::KernelTable *t : kvq::simdKernelVariants())
    tables.push_back(t);
  const int bits = 3;
  int64_t checked = 0;
  for (bool half : {false, true})
    for (int64_t d : {32, 64, 128, 256})
      for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF})
        for (int64_t nq : {1, 2, 5})
          for (int64_t n = 1; n <= 16; ++n) {
            const int64_t heads = 2, h = 1, P = d / 2;
            std::vector<float> scale(static_cast<size_t>(heads * d)),
                zero(scale.size());
            for (size_t c = 0; c < scale.size(); ++c) {
              scale[c] =
                  static_cast<float>(rng.normal() * (c % 3 == 0 ? 0.01 : 1));
              zero[c] = static_cast<float>(rng.laplace());
            }
            // Row t: the head's codes packed row-major (or its fp16
            // values), alone in a buffer, and the keys they decode to.
            std::vector<std::vector<uint8_t>> codeRows(static_cast<size_t>(n));
            std::vector<std::vector<uint16_t>> halfRows(static_cast<size_t>(n));
            std::vector<const uint8_t *> codePtrs;
            std::vector<const uint16_t *> halfPtrs;
            std::vector<float> keys(static_cast<size_t>(n * d));
            for (int64_t t = 0; t < n; ++t) {
              float *k = keys.data() + t * d;
              if (half) {
                std::vector<uint16_t> &r = halfRows[static_cast<size_t>(t)];
                r.resize(static_cast<size_t>(d));
                for (int64_t c = 0; c < d; ++c) {
                  r[static_cast<size_t>(c)] =
                      kvq::floatToHalf(static_cast<float>(rng.laplace()));
                  k[c] = kvq::halfToFloat(r[static_cast<size_t>(c)]);
                }
                halfPtrs.push_back(r.data());
                continue;
              }
              std::vector<uint8_t> codes(static_cast<size_t>(d));
              for (int64_t c = 0; c < d; ++c) {
                codes[static_cast<size_t>(c)] =
                    static_cast<uint8_t>(rng.uniform() * (1 << bits));
                const size_t at = static_cast<size_t>(h * d + c);
                k[c] = static_cast<float>(codes[static_cast<size_t>(c)]) *
                           scale[at] +
                       zero[at];
              }
              std::vector<uint8_t> &r = codeRows[static_cast<size_t>(t)];
              r.assign(static_cast<size_t>(d * bits / 8), 0);
              kvq::packCodesRef(codes.data(), d, bits, r.data());
              codePtrs.push_back(r.data());
            }
            std::vector<float> cos, sin;
            randomAngles(rng, static_cast<size_t>(n * P), cos, sin);
            std::vector<float> q(static_cast<size_t>(heads * nq * d));
            for (float &e : q)
              e = static_cast<float>(rng.normal());
            kvq::RopeQueries rq;
            rq.split(q.data(), heads * nq, d, style == KVQ_ROPE_INTERLEAVED);
            const int64_t outStride = nq + 2;
            for (const kvq::KernelTable *t : tables) {
              const kvq::AttendOps ops = kvq::selectAttendOps(
                  *t, kvq::AttendShape{d, heads, 32, bits, bits});
              if (half ? !ops.ropeHalfRows : !ops.ropeCodeRows)
                continue;
              SCOPED_TRACE(testing::Message()
                           << t->name << (half ? " fp16" : " 3-bit") << " d "
                           << d << " style " << style << " nq " << nq
                           << " rows " << n);
              std::vector<float> out(static_cast<size_t>(n * outStride), -7.0f);
              kvq::RopeCodeRows a;
              kvq::RopeHalfRows b;
              kvq::RopeRowsScore &common =
                  half ? static_cast<kvq::RopeRowsScore &>(b) : a;
              common.n = n;
              common.cos = cos.data();
              common.sin = sin.data();
              common.q = rq.a(h * nq);
              common.qStride = rq.stride();
              common.nq = nq;
              common.d = d;
              common.interleaved = style == KVQ_ROPE_INTERLEAVED;
              common.out = out.data();
              common.outStride = outStride;
              if (half) {
                b.rows = halfPtrs.data();
                ops.ropeHalfRows(b);
              } else {
                a.rows = codePtrs.data();
                a.bits = bits;
                a.scale = scale.data() + h * d;
                a.zero = zero.data() + h * d;
                ops.ropeCodeRows(a);
              }
              for (int64_t r = 0; r < n; ++r) {
                ASSERT_TRUE(rowIsCanonical(
                    out.data() + r * outStride, nq, outStride,
                    q.data() + h * nq * d, keys.data() + r * d,
                    cos.data() + r * P, sin.data() + r * P, d, style))
                    << "row " << r;
                checked += nq;
              }
            }
          }
  // On AVX-512 machines both kernels must actually have run.
  const std::vector<const kvq::KernelTable *> v = kvq::simdKernelVariants();
  if (!v.empty() && std::string(v[0]->name) == "avx512")
    EXPECT_EQ(checked, int64_t{2} * 4 * 2 * (1 + 2 + 5) * (16 * 17 / 2));
}

// The key pass of a pre-RoPE cache (attendKeysRotated) at shapes where
// every store takes its fast tiles (whole 16-token tiles of 32-token KIVI
// groups by columns, decoded in registers for one query vector and through
// a column buffer for several, fp16 windows and sinks, row-major 3/8-bit
// codes, KVQuant rows with outliers, positions past the 256-position
// seam): every score is, bit for bit, the canonical score of the key
// loadRow decodes at the angles Rope::angles gives. It runs with the
// active kernel table and, under qemu, on arm64, so both agree with this
// one scalar model. The scores also agree with plain dot products over the
// rotated keys fetch returns (the rotation is only regrouped).
TEST(RopeCache, KeyPassIsTheCanonicalScoreOfTheStoredKeys) {
  const int heads = 2;
  struct Case {
    kvq_method m;
    int bits, d;
  };
  const Case cases[] = {
      {KVQ_METHOD_FP16, 16, 32},     {KVQ_METHOD_FP16, 16, 40},
      {KVQ_METHOD_KIVI, 2, 32},      {KVQ_METHOD_KIVI, 4, 64},
      {KVQ_METHOD_KIVI, 2, 36},      {KVQ_METHOD_KIVI, 3, 32},
      {KVQ_METHOD_KIVI, 8, 24},      {KVQ_METHOD_KIVI_SINK, 2, 32},
      {KVQ_METHOD_KIVI_SINK, 4, 32}, {KVQ_METHOD_KVQUANT, 2, 32},
      {KVQ_METHOD_KVQUANT, 3, 48},   {KVQ_METHOD_KVQUANT, 4, 32}};
  int64_t checked = 0;
  for (const Case &cs : cases)
    for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF})
      for (int nq : {1, 3}) {
        SCOPED_TRACE(testing::Message()
                     << "method " << cs.m << " bits " << cs.bits << " d "
                     << cs.d << " style " << style << " nq " << nq);
        kvq_config cfg = ropeConfig(cs.m, heads, cs.d, style, 10000.0f);
        if (cs.m != KVQ_METHOD_FP16)
          cfg.key_bits = cfg.value_bits = cs.bits;
        if (cs.m == KVQ_METHOD_KVQUANT)
          cfg.outlier_fraction = 0.02f;
        if (cs.d % cfg.group_size != 0) // key groups across tiles: by rows
          cfg.group_size = cs.d;
        Cache c(cfg);
        ASSERT_NE(c.h, nullptr);
        KV kv = laplaceKV(17 + cs.bits + cs.d, 300, heads, cs.d);
        feed(c.h, kv, 200); // prefill, then one token per update
        const Fetched f = fetch(c.h);
        const kvq::LayerStore &store = *c.h->layers[0];
        const int64_t d = cs.d, C = heads * d, length = store.length();
        ASSERT_EQ(length, 300);
        kvq::AttendJob job(store.attendOps());
        job.d = d;
        job.heads = heads;
        job.qPerKv = nq;
        job.nq = nq;
        Rng rng(5);
        job.q.resize(static_cast<size_t>(heads * nq * d));
        for (float &e : job.q)
          e = static_cast<float>(rng.normal());
        job.ropeQueries.split(job.q.data(), heads * nq, d,
                              style == KVQ_ROPE_INTERLEAVED);
        std::vector<float> k(static_cast<size_t>(C)), v(k.size());
        kvq::Rope::Cursor cursor;
        cursor.cos.resize(static_cast<size_t>(d / 2));
        cursor.sin.resize(static_cast<size_t>(d / 2));
        for (int64_t t0 = 0; t0 < length; t0 += 128) {
          job.t0 = t0;
          job.t1 = std::min<int64_t>(length, t0 + 128);
          job.scores.assign(static_cast<size_t>((job.t1 - t0) * heads * nq),
                            0.0f);
          kvq::attendKeysRotated(store, c.h->rope, job);
          for (int64_t t = t0; t < job.t1; ++t) {
            store.loadRow(t, k.data(), v.data());
            c.h->rope.angles(t, cursor);
            for (int h = 0; h < heads; ++h)
              for (int j = 0; j < nq; ++j) {
                const float *q = job.query(h) + j * d;
                const float got = job.scoreRow(t, h)[j];
                ASSERT_EQ(got, canonicalRopeScore(q, k.data() + h * d,
                                                  cursor.cos.data(),
                                                  cursor.sin.data(), d, style))
                    << "token " << t << " head " << h << " query " << j;
                // The same number as a dot over the fetched (rotated) key,
                // up to float rounding.
                double dot = 0, mag = 0;
                for (int64_t i = 0; i < d; ++i) {
                  const double x = double(q[i]) * f.k[static_cast<size_t>(
                                                      t * C + h * d + i)];
                  dot += x;
                  mag += std::fabs(x);
                }
                ASSERT_NEAR(got, dot, 1e-5 * mag + 1e-6)
                    << "token " << t << " head " << h << " query " << j;
                ++checked;
              }
          }
        }
      }
  EXPECT_EQ(checked, int64_t{12} * 2 * 300 * heads * (1 + 3));
}

// An fp16 cache of pre-RoPE keys attends like an fp16 cache of the same
// keys rotated outside (the model's own graph): the two differ only by
// where the fp16 rounding happens, before or after the rotation.
TEST(RopeCache, PreRopeFp16AttendsLikePostRopeFp16) {
  const int heads = 2, d = 16, qHeads = 4;
  for (int32_t style : {KVQ_ROPE_INTERLEAVED, KVQ_ROPE_HALF}) {
    SCOPED_TRACE(style);
    KV pre = gaussianKV(11, 70, heads, d), post = pre;
    for (int64_t t = 0; t < pre.tokens; ++t) {
      std::vector<double> r = rotateLibm(
          pre.krow(t), heads, d, static_cast<double>(t), style, 10000.0);
      for (int64_t i = 0; i < pre.channels(); ++i)
        post.krow(t)[i] = static_cast<float>(r[static_cast<size_t>(i)]);
    }
    Cache a(ropeConfig(KVQ_METHOD_FP16, heads, d, style, 10000.0f));
    Cache b(config(KVQ_METHOD_FP16, heads, d));
    feed(a.h, pre, 50);
    feed(b.h, post, 50);
    Rng rng(12);
    std::vector<float> q(static_cast<size_t>(3 * qHeads * d));
    for (float &e : q)
      e = static_cast<float>(rng.normal());
    std::vector<float> oa(q.size()), ob(q.size());
    ASSERT_EQ(kvq_cache_attend(a.h, 0, q.data(), 3, qHeads, oa.data()), KVQ_OK);
    ASSERT_EQ(kvq_cache_attend(b.h, 0, q.data(), 3, qHeads, ob.data()), KVQ_OK);
    double worst = 0;
    for (size_t i = 0; i < oa.size(); ++i)
      worst = std::max(worst, std::fabs(double(oa[i]) - ob[i]));
    // fp16 keys carry ~5e-4 relative error either way; scores ~|q||k|/4.
    EXPECT_LT(worst, 5e-3);
    EXPECT_GT(worst, 0.0) << "the two caches cannot be bit-identical: the "
                             "rounding happens at different places";
  }
}

// KVQuant's observation, on synthetic keys with one outlier channel pair
// per head: per-channel quantization of the pre-RoPE keys, whose outlier
// channels keep their magnitude, loses less than that of the post-RoPE
// keys, where the rotation moves the outlier between the pair's channels
// from token to token.
TEST(RopeCache, PreRopeKeysQuantizeBetterOnOutlierChannels) {
  const int heads = 1, d = 32, tokens = 256;
  KV pre = gaussianKV(21, tokens, heads, d);
  for (int64_t t = 0; t < tokens; ++t) {
    pre.krow(t)[0] += 12.0f; // an outlier pair (0, 1) with a steady sign
    pre.krow(t)[1] -= 9.0f;
  }
  KV post = pre;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> r =
        rotateLibm(pre.krow(t), heads, d, static_cast<double>(t),
                   KVQ_ROPE_INTERLEAVED, 10000.0);
    for (int64_t i = 0; i < d; ++i)
      post.krow(t)[i] = static_cast<float>(r[static_cast<size_t>(i)]);
  }
  for (kvq_method m : {KVQ_METHOD_KIVI, KVQ_METHOD_KVQUANT}) {
    SCOPED_TRACE(m);
    kvq_config preCfg = ropeConfig(m, heads, d, KVQ_ROPE_INTERLEAVED, 10000.0f);
    preCfg.key_bits = preCfg.value_bits = 2;
    kvq_config postCfg = preCfg;
    postCfg.rope_style = KVQ_ROPE_NONE;
    Cache a(preCfg), b(postCfg);
    feed(a.h, pre, tokens - 8);
    feed(b.h, post, tokens - 8);
    Fetched fa = fetch(a.h), fb = fetch(b.h);
    // Both fetch post-RoPE keys: compare each with the exact rotated keys.
    double ea = 0, eb = 0, norm = 0;
    for (size_t i = 0; i < fa.k.size(); ++i) {
      ea += std::pow(fa.k[i] - post.k[i], 2);
      eb += std::pow(fb.k[i] - post.k[i], 2);
      norm += std::pow(post.k[i], 2);
    }
    ea = std::sqrt(ea / norm);
    eb = std::sqrt(eb / norm);
    std::printf("method %d key error: pre-RoPE %.4f, post-RoPE %.4f\n", m, ea,
                eb);
    EXPECT_LT(ea, 0.8 * eb);
  }
}

TEST(RopeCache, ConfigurationRules) {
  kvq_config c = config(KVQ_METHOD_KIVI, 1, 64);
  EXPECT_EQ(c.rope_style, KVQ_ROPE_NONE);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  auto rejects = [](kvq_config cfg, const char *needle) {
    EXPECT_EQ(kvq_config_validate(&cfg), KVQ_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(kvq_last_error(), needle), nullptr)
        << kvq_last_error();
  };
  kvq_config r = ropeConfig(KVQ_METHOD_KIVI, 1, 64, KVQ_ROPE_HALF, 1.0f);
  rejects(r, "rope theta");
  r.rope_theta = NAN;
  rejects(r, "rope theta");
  r.rope_theta = 2e9f;
  rejects(r, "rope theta");
  r.rope_theta = 500000.0f;
  EXPECT_EQ(kvq_config_validate(&r), KVQ_OK) << kvq_last_error();
  r.rope_style = 3;
  rejects(r, "rope_style");
  kvq_config odd =
      ropeConfig(KVQ_METHOD_FP16, 1, 5, KVQ_ROPE_INTERLEAVED, 10000.0f);
  rejects(odd, "even head_dim");
  // Without a RoPE, theta is not read.
  kvq_config none = config(KVQ_METHOD_FP16, 1, 5);
  none.rope_theta = NAN;
  EXPECT_EQ(kvq_config_validate(&none), KVQ_OK) << kvq_last_error();
}

TEST(RopeCache, SaveLoadKeepsTheRope) {
  kvq_config cfg = ropeConfig(KVQ_METHOD_KIVI, 2, 16, KVQ_ROPE_HALF, 777.0f);
  cfg.group_size = 16;
  Cache a(cfg);
  KV kv = gaussianKV(4, 80, 2, 16);
  feed(a.h, kv, 60);
  int64_t size = 0;
  ASSERT_EQ(kvq_cache_save(a.h, nullptr, 0, &size), KVQ_OK);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  ASSERT_EQ(kvq_cache_save(a.h, bytes.data(), size, &size), KVQ_OK);
  kvq_cache_t *b = nullptr;
  ASSERT_EQ(kvq_cache_load(bytes.data(), size, nullptr, &b), KVQ_OK)
      << kvq_last_error();
  Fetched fa = fetch(a.h), fb = fetch(b);
  // Not rotated the same way (e.g. not at all) if the RoPE were lost.
  Fetched plain;
  {
    kvq_config none = cfg;
    none.rope_style = KVQ_ROPE_NONE;
    Cache c(none);
    feed(c.h, kv, 60);
    plain = fetch(c.h);
  }
  EXPECT_NE(fa.k, plain.k);
  EXPECT_EQ(fa.k, fb.k);
  EXPECT_EQ(fa.v, fb.v);
  kvq_cache_destroy(b);
}

} // namespace
