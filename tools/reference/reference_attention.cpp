//===- reference_attention.cpp - float64 attention and RoPE oracles ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Work items are tiles of up to kTile queries that share a KV head, so each
// K and V row is read once per tile instead of once per query (the loop is
// memory-bound otherwise). Per query, every score, the maximum, the softmax
// sum and every output element are computed with the same operations in the
// same token order whatever the tile, the thread or the CPU (x86_64 picks
// an AVX2 clone at load time; the file is compiled without FP contraction,
// so the clones agree bit for bit), so the numbers do not depend on the
// thread count.
//
//===----------------------------------------------------------------------===//
#include "reference_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

// No a * b + c fused into one rounding anywhere in this file (clang fuses
// by default where the target has FMA, e.g. on arm64; CMakeLists.txt adds
// -ffp-contract=off for compilers that ignore the pragma).
#pragma STDC FP_CONTRACT OFF

namespace kvq::reference {
namespace {

/// Eight float lanes (a GCC/Clang vector: one AVX register, two NEON or
/// SSE ones); lane l sums the products of elements j == l (mod 8).
typedef float Lanes8 __attribute__((vector_size(32)));

inline Lanes8 load8(const float *p) {
  Lanes8 x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}

/// ScoreSum::FloatLanes8.
struct FloatLanes8 {
  static float dot(const float *a, const float *b, int64_t d) {
    Lanes8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
      acc += load8(a + j) * load8(b + j);
    float tail = 0;
    for (; j < d; ++j)
      tail += a[j] * b[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
           ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
  }
  /// dot() of four queries with one key row, interleaved so that the four
  /// dependency chains overlap; each result equals its dot() bit for bit.
  static void dot4(const float *const *a, const float *b, int64_t d,
                   double *out) {
    Lanes8 acc[4] = {};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
      const Lanes8 bj = load8(b + j);
      for (int i = 0; i < 4; ++i)
        acc[i] += load8(a[i] + j) * bj;
    }
    for (int i = 0; i < 4; ++i) {
      float tail = 0;
      for (int64_t jj = j; jj < d; ++jj)
        tail += a[i][jj] * b[jj];
      out[i] = ((acc[i][0] + acc[i][1]) + (acc[i][2] + acc[i][3])) +
               ((acc[i][4] + acc[i][5]) + (acc[i][6] + acc[i][7])) + tail;
    }
  }
};

/// ScoreSum::Double (each product of two floats is exact in double).
struct Double {
  static double dot(const float *a, const float *b, int64_t d) {
    double s = 0.0;
    for (int64_t j = 0; j < d; ++j)
      s += static_cast<double>(a[j]) * b[j];
    return s;
  }
  static void dot4(const float *const *a, const float *b, int64_t d,
                   double *out) {
    for (int i = 0; i < 4; ++i)
      out[i] = dot(a[i], b, d);
  }
};

typedef double Doubles2 __attribute__((vector_size(16)));

constexpr int64_t kTile = 32, kRows = 32;

/// One tile: queries qs[0..n) (rows of D floats) at positions ps[0..n)
/// (ascending), keys/values rows `stride` floats apart; w is scratch of
/// n * (ps[n-1] + 1) doubles and vd of kRows * D; outs[i] (D doubles,
/// zeroed) receive the outputs.
template <typename Sum>
inline __attribute__((always_inline)) void
attendTile(const float *const *qs, const int64_t *ps, int64_t n,
           const float *kb, const float *vb, int64_t stride, int64_t D,
           double scale, double *w, double *vd, double *const *outs) {
  const int64_t span = ps[n - 1] + 1;
  double mx[kTile], sum[kTile];
  for (int64_t i = 0; i < n; ++i)
    mx[i] = -INFINITY, sum[i] = 0;
  // Queries [first, n) see token t: positions ascend, so first only grows.
  int64_t first = 0;
  for (int64_t t = 0; t < span; ++t) {
    while (ps[first] < t)
      ++first;
    const float *kt = kb + t * stride;
    int64_t i = first;
    for (; i + 4 <= n; i += 4) {
      double d4[4];
      Sum::dot4(qs + i, kt, D, d4);
      for (int64_t r = 0; r < 4; ++r) {
        const double s = d4[r] * scale;
        w[(i + r) * span + t] = s;
        mx[i + r] = std::max(mx[i + r], s);
      }
    }
    for (; i < n; ++i) {
      const double s = Sum::dot(qs[i], kt, D) * scale;
      w[i * span + t] = s;
      mx[i] = std::max(mx[i], s);
    }
  }
  // w becomes the probabilities (weight / sum, each divided once).
  for (int64_t i = 0; i < n; ++i) {
    double *wi = w + i * span;
    for (int64_t t = 0; t <= ps[i]; ++t)
      sum[i] += (wi[t] = std::exp(wi[t] - mx[i]));
    for (int64_t t = 0; t <= ps[i]; ++t)
      wi[t] /= sum[i];
  }
  // Outputs: V rows in blocks of kRows, converted to double once per
  // block; each query keeps 16 outputs in registers over a block's rows.
  // Every o[j] still gets o[j] + p * v[t][j] for t = 0, 1, ... in order.
  for (int64_t t0 = 0; t0 < span; t0 += kRows) {
    const int64_t t1 = std::min(span, t0 + kRows);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < D; ++j)
        vd[(t - t0) * D + j] = vb[t * stride + j];
    for (int64_t i = 0; i < n; ++i) {
      if (ps[i] < t0)
        continue;
      const int64_t tEnd = std::min(t1, ps[i] + 1);
      const double *wi = w + i * span;
      double *o = outs[i];
      int64_t j = 0;
      for (; j + 16 <= D; j += 16) {
        Doubles2 a[8];
        std::memcpy(a, o + j, sizeof(a));
        for (int64_t t = t0; t < tEnd; ++t) {
          const double p = wi[t];
          Doubles2 r[8];
          std::memcpy(r, vd + (t - t0) * D + j, sizeof(r));
          for (int x = 0; x < 8; ++x)
            a[x] += p * r[x];
        }
        std::memcpy(o + j, a, sizeof(a));
      }
      for (; j < D; ++j)
        for (int64_t t = t0; t < tEnd; ++t)
          o[j] += wi[t] * vd[(t - t0) * D + j];
    }
  }
}

#if defined(__x86_64__) && defined(__ELF__)
#define KVQ_REFERENCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KVQ_REFERENCE_CLONES
#endif

KVQ_REFERENCE_CLONES
void attendTileFloatLanes8(const float *const *qs, const int64_t *ps, int64_t n,
                           const float *kb, const float *vb, int64_t stride,
                           int64_t D, double scale, double *w, double *vd,
                           double *const *outs) {
  attendTile<FloatLanes8>(qs, ps, n, kb, vb, stride, D, scale, w, vd, outs);
}

KVQ_REFERENCE_CLONES
void attendTileDouble(const float *const *qs, const int64_t *ps, int64_t n,
                      const float *kb, const float *vb, int64_t stride,
                      int64_t D, double scale, double *w, double *vd,
                      double *const *outs) {
  attendTile<Double>(qs, ps, n, kb, vb, stride, D, scale, w, vd, outs);
}

} // namespace

std::vector<double>
causalAttention(const float *q, int64_t qHeads, const float *k, const float *v,
                int64_t kvHeads, int64_t D, const std::vector<int64_t> &pos,
                ScoreSum scoreSum, int threads,
                const std::function<void(int64_t, int64_t)> &progress) {
  const int64_t np = static_cast<int64_t>(pos.size());
  std::vector<double> out(static_cast<size_t>(np * qHeads * D), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const int64_t group = qHeads / kvHeads;
  const auto tileFn =
      scoreSum == ScoreSum::Double ? attendTileDouble : attendTileFloatLanes8;
  // Tiles: per KV head, its group's queries ordered by position.
  struct Tile {
    int64_t kvh, begin, end; ///< items [begin, end) of the head's list
  };
  std::vector<Tile> tiles;
  const int64_t perHead = np * group;
  for (int64_t kvh = 0; kvh < kvHeads; ++kvh)
    for (int64_t b = 0; b < perHead; b += kTile)
      tiles.push_back({kvh, b, std::min(perHead, b + kTile)});
  // Longest first (the last positions) balances the threads.
  std::reverse(tiles.begin(), tiles.end());
  const int64_t n = static_cast<int64_t>(tiles.size());
  std::atomic<int64_t> next{0}, done{0};
  auto work = [&](bool reporter) {
    std::vector<double> w, vd(static_cast<size_t>(kRows * D));
    const float *qs[kTile];
    int64_t ps[kTile];
    double *outs[kTile];
    while (true) {
      const int64_t ti = next.fetch_add(1);
      if (ti >= n)
        break;
      const Tile &tile = tiles[static_cast<size_t>(ti)];
      const int64_t cnt = tile.end - tile.begin;
      for (int64_t i = 0; i < cnt; ++i) {
        // Item x of head kvh: query x / group, q head within the group
        // x % group.
        const int64_t x = tile.begin + i, pi = x / group,
                      h = tile.kvh * group + x % group;
        qs[i] = q + (pi * qHeads + h) * D;
        ps[i] = pos[static_cast<size_t>(pi)];
        outs[i] = &out[static_cast<size_t>((pi * qHeads + h) * D)];
      }
      w.resize(static_cast<size_t>(cnt * (ps[cnt - 1] + 1)));
      tileFn(qs, ps, cnt, k + tile.kvh * D, v + tile.kvh * D, kvHeads * D, D,
             scale, w.data(), vd.data(), outs);
      const int64_t d = done.fetch_add(1) + 1;
      if (reporter && progress)
        progress(d, n);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i)
    pool.emplace_back(work, false);
  work(true);
  for (std::thread &t : pool)
    t.join();
  return out;
}

std::vector<double> attention64(const std::vector<float> &K,
                                const std::vector<float> &V, int64_t length,
                                int heads, int d, const std::vector<float> &q,
                                int64_t nQueries, int qHeads) {
  std::vector<int64_t> pos(static_cast<size_t>(nQueries));
  for (int64_t i = 0; i < nQueries; ++i)
    pos[static_cast<size_t>(i)] = length - nQueries + i;
  return causalAttention(q.data(), qHeads, K.data(), V.data(), heads, d, pos,
                         ScoreSum::Double);
}

std::vector<float> rotateRope(const std::vector<float> &k, int64_t T, int64_t H,
                              int64_t D, double theta, bool interleaved) {
  const int64_t pairs = D / 2;
  std::vector<double> invFreq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i)
    invFreq[static_cast<size_t>(i)] =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  std::vector<float> out(k.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle =
          static_cast<double>(t) * invFreq[static_cast<size_t>(i)];
      const double c = std::cos(angle), s = std::sin(angle);
      const int64_t ia = interleaved ? 2 * i : i,
                    ib = interleaved ? 2 * i + 1 : i + pairs;
      for (int64_t h = 0; h < H; ++h) {
        const size_t row = static_cast<size_t>((t * H + h) * D);
        const double a = k[row + static_cast<size_t>(ia)],
                     b = k[row + static_cast<size_t>(ib)];
        out[row + static_cast<size_t>(ia)] = static_cast<float>(a * c - b * s);
        out[row + static_cast<size_t>(ib)] = static_cast<float>(a * s + b * c);
      }
    }
  return out;
}

} // namespace kvq::reference
