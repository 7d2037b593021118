//===- rope_keys.cpp - Scores of pre-RoPE keys, rotation folded in --------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Portable C++ on 16-lane generic vectors with explicit fused multiply-adds
// (rope_keys.h gives the canonical order). On x86_64 an AVX-512
// (x86-64-v4) or AVX2 + FMA (x86-64-v3) clone is chosen at load time; the
// baseline clone rounds each fma in software (fmaf). Every clone, and
// arm64, runs the same operations lane by lane, so they give the same bits.
//
//===----------------------------------------------------------------------===//
#include "rope_keys.h"

#include "fp16.h"
#include "rope.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

using namespace kvq;

#if defined(__x86_64__) && defined(__ELF__)
#define KVQ_FMA_CLONES                                                         \
  __attribute__((                                                              \
      target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVQ_FMA_CLONES
#endif

namespace {

static_assert(kKeyTile == 16, "a column tile is one 16-lane vector");

using F16 = float __attribute__((vector_size(64))); // 16 lanes

// Vector helpers are macros: a function passing a 16-lane vector by value
// between the clones and the baseline would change the calling convention.

/// 16 floats from p (any alignment).
#define KVQ_LOAD16(p)                                                          \
  ({                                                                           \
    F16 v_;                                                                    \
    std::memcpy(&v_, (p), sizeof(v_));                                         \
    v_;                                                                        \
  })

/// fma lane by lane, rounded once.
#if defined(__clang__)
#define KVQ_VFMA(a, b, c) __builtin_elementwise_fma((a), (b), (c))
#else
#define KVQ_VFMA(a, b, c)                                                      \
  ({                                                                           \
    const F16 a_ = (a), b_ = (b), c_ = (c);                                    \
    F16 r_;                                                                    \
    for (int l_ = 0; l_ < 16; ++l_)                                            \
      r_[l_] = __builtin_fmaf(a_[l_], b_[l_], c_[l_]);                         \
    r_;                                                                        \
  })
#endif

/// x in every lane: x - (+0) is x exactly (-0 included), so the compiler
/// emits a broadcast only, where +0 + x would need an addition.
#define KVQ_SPLAT(x) ((x) - F16{})

/// One pair's two steps of the canonical score (rope_keys.h), on vectors.
#define KVQ_PAIR_STEP(qa, qb, qn, ka, kb, c, s, acc)                           \
  ({                                                                           \
    const F16 ka_ = (ka), kb_ = (kb), qb_ = (qb);                              \
    const F16 A_ = KVQ_VFMA(qb_, kb_, (qa) * ka_);                             \
    const F16 B_ = KVQ_VFMA((qn), kb_, qb_ * ka_);                             \
    KVQ_VFMA((s), B_, KVQ_VFMA((c), A_, (acc)));                               \
  })

/// The same on one lane.
inline float pairStep(float qa, float qb, float qn, float ka, float kb,
                      float c, float s, float acc) {
  const float A = __builtin_fmaf(qb, kb, qa * ka);
  const float B = __builtin_fmaf(qn, kb, qb * ka);
  return __builtin_fmaf(s, B, __builtin_fmaf(c, A, acc));
}

} // namespace

void RopeQueries::split(const float *q, int64_t K, int64_t d,
                        bool interleaved) {
  pairs_ = d / 2;
  v_.resize(static_cast<size_t>(3 * K * pairs_));
  for (int64_t k = 0; k < K; ++k) {
    const float *src = q + k * d;
    float *qa = v_.data() + 3 * k * pairs_, *qb = qa + pairs_,
          *qn = qb + pairs_;
    for (int64_t i = 0; i < pairs_; ++i) {
      qa[i] = interleaved ? src[2 * i] : src[i];
      qb[i] = interleaved ? src[2 * i + 1] : src[pairs_ + i];
      qn[i] = -qa[i];
    }
  }
}

namespace {

/// 16 keys from an fp16 row, converted exactly.
#if defined(__clang__)
#define KVQ_LOAD16_HALF(p)                                                     \
  ({                                                                           \
    _Float16 __attribute__((vector_size(32))) h_;                              \
    std::memcpy(&h_, (p), sizeof(h_));                                         \
    __builtin_convertvector(h_, F16);                                          \
  })
#else // GCC (the arm64 cross build): lane by lane
#define KVQ_LOAD16_HALF(p)                                                     \
  ({                                                                           \
    F16 v_;                                                                    \
    for (int l_ = 0; l_ < 16; ++l_)                                            \
      v_[l_] = halfToFloat((p)[l_]);                                           \
    v_;                                                                        \
  })
#endif

inline float keyAt(const float *row, int64_t c) { return row[c]; }
inline float keyAt(const uint16_t *row, int64_t c) {
  return halfToFloat(row[c]);
}

/// canonicalTree of a vector's 16 lanes by halving shuffles: the same
/// additions on the same operands.
#define KVQ_TREE16(S)                                                          \
  ({                                                                           \
    using F8_ = float __attribute__((vector_size(32)));                        \
    using F4_ = float __attribute__((vector_size(16)));                        \
    const F16 s_ = (S);                                                        \
    const F8_ t_ =                                                             \
        __builtin_shufflevector(s_, s_, 0, 1, 2, 3, 4, 5, 6, 7) +              \
        __builtin_shufflevector(s_, s_, 8, 9, 10, 11, 12, 13, 14, 15);         \
    const F4_ u_ = __builtin_shufflevector(t_, t_, 0, 1, 2, 3) +               \
                   __builtin_shufflevector(t_, t_, 4, 5, 6, 7);                \
    (u_[0] + u_[2]) + (u_[1] + u_[3]);                                         \
  })

/// Canonical scores of M rows (rows[u], angles at cos/sin + u * P) against
/// one query vector, M independent fma chains in flight: one row at a time
/// serialised each pair's two dependent steps (at 1K tokens, warm, fp16
/// pre-RoPE attention took about 9 % less time with one query vector per
/// KV head, 15 % less with four). Inlined into each clone below (so it takes
/// no vector by value).
template <int M, class Elem>
__attribute__((always_inline)) inline void
scoreRowBlock(const Elem *const *rows, const float *cos, const float *sin,
              const float *qa, const float *qb, const float *qn, int64_t P,
              bool interleaved, float *out, int64_t outStride) {
#define KVQ_KEYS16(p)                                                          \
  ({                                                                           \
    F16 r_;                                                                    \
    if constexpr (std::is_same_v<Elem, float>)                                 \
      r_ = KVQ_LOAD16(p);                                                      \
    else                                                                       \
      r_ = KVQ_LOAD16_HALF(p);                                                 \
    r_;                                                                        \
  })
  const int64_t full = P - P % 16;
  F16 S[M] = {};
  for (int64_t i = 0; i < full; i += 16) {
    const F16 a = KVQ_LOAD16(qa + i), b = KVQ_LOAD16(qb + i),
              nA = KVQ_LOAD16(qn + i);
    for (int u = 0; u < M; ++u) {
      const Elem *k = rows[u];
      F16 ka, kb;
      if (interleaved) {
        const F16 lo = KVQ_KEYS16(k + 2 * i), hi = KVQ_KEYS16(k + 2 * i + 16);
        ka = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
                                     20, 22, 24, 26, 28, 30);
        kb = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19,
                                     21, 23, 25, 27, 29, 31);
      } else {
        ka = KVQ_KEYS16(k + i);
        kb = KVQ_KEYS16(k + P + i);
      }
      S[u] = KVQ_PAIR_STEP(a, b, nA, ka, kb, KVQ_LOAD16(cos + u * P + i),
                           KVQ_LOAD16(sin + u * P + i), S[u]);
    }
  }
  for (int u = 0; u < M; ++u) {
    if (full == P) { // every pair went through the vector steps
      out[u * outStride] = KVQ_TREE16(S[u]);
      continue;
    }
    const Elem *k = rows[u];
    const float *c = cos + u * P, *s = sin + u * P;
    float Sl[16];
    std::memcpy(Sl, &S[u], sizeof(Sl));
    for (int64_t i = full; i < P; ++i) {
      const float ka = keyAt(k, interleaved ? 2 * i : i);
      const float kb = keyAt(k, interleaved ? 2 * i + 1 : P + i);
      Sl[i - full] =
          pairStep(qa[i], qb[i], qn[i], ka, kb, c[i], s[i], Sl[i - full]);
    }
    out[u * outStride] = canonicalTree(Sl, 1);
  }
#undef KVQ_KEYS16
}

/// ropeScoresRows over row pointers of float or fp16 keys, four rows at a
/// time; inlined into each clone below.
template <class Elem>
__attribute__((always_inline)) inline void
scoreRows(const Elem *const *rows, int64_t n, const float *cos,
          const float *sin, const RopeQueries &q, int64_t k0, int64_t nq,
          bool interleaved, float *out, int64_t outStride) {
  const int64_t P = q.pairs();
  for (int64_t t = 0; t < n;) {
    const int64_t m = std::min<int64_t>(4, n - t);
    const float *c = cos + t * P, *s = sin + t * P;
    for (int64_t j = 0; j < nq; ++j) {
      const float *qa = q.a(k0 + j), *qb = q.b(k0 + j), *qn = q.negA(k0 + j);
      float *o = out + t * outStride + j;
      switch (m) {
      case 4:
        scoreRowBlock<4>(rows + t, c, s, qa, qb, qn, P, interleaved, o,
                         outStride);
        break;
      case 3:
        scoreRowBlock<3>(rows + t, c, s, qa, qb, qn, P, interleaved, o,
                         outStride);
        break;
      case 2:
        scoreRowBlock<2>(rows + t, c, s, qa, qb, qn, P, interleaved, o,
                         outStride);
        break;
      default:
        scoreRowBlock<1>(rows + t, c, s, qa, qb, qn, P, interleaved, o,
                         outStride);
      }
    }
    t += m;
  }
}

} // namespace

KVQ_FMA_CLONES
void kvq::ropeScoresRows(const float *keys, int64_t stride, int64_t n,
                         const float *cos, const float *sin,
                         const RopeQueries &q, int64_t k0, int64_t nq,
                         bool interleaved, float *out, int64_t outStride) {
  const float *rows[kKeyTile];
  for (int64_t t = 0; t < n; ++t)
    rows[t] = keys + t * stride;
  scoreRows(rows, n, cos, sin, q, k0, nq, interleaved, out, outStride);
}

KVQ_FMA_CLONES
void kvq::ropeScoresHalfRows(const uint16_t *const *rows, int64_t n,
                             const float *cos, const float *sin,
                             const RopeQueries &q, int64_t k0, int64_t nq,
                             bool interleaved, float *out,
                             int64_t outStride) {
  scoreRows(rows, n, cos, sin, q, k0, nq, interleaved, out, outStride);
}

KVQ_FMA_CLONES
void kvq::ropeScoresColumns(const float *cols, const float *cos,
                            const float *sin, const RopeQueries &q, int64_t k0,
                            int64_t nq, bool interleaved, float *out,
                            int64_t outStride) {
  const int64_t P = q.pairs();
  float S[16 * kKeyTile]; // S_l of token t at S[l * kKeyTile + t]
  for (int64_t j = 0; j < nq; ++j) {
    const float *qa = q.a(k0 + j), *qb = q.b(k0 + j), *qn = q.negA(k0 + j);
    // Chains l .. l + 3 together: four independent fma chains in flight
    // (one at a time, each pair's two dependent steps serialised the loop).
    for (int64_t l = 0; l < 16; l += 4) {
      F16 acc[4] = {};
      for (int64_t i0 = l; i0 < P; i0 += 16)
        for (int u = 0; u < 4 && i0 + u < P; ++u) {
          const int64_t i = i0 + u;
          const int64_t a = interleaved ? 2 * i : i;
          const int64_t b = interleaved ? 2 * i + 1 : P + i;
          acc[u] = KVQ_PAIR_STEP(
              KVQ_SPLAT(qa[i]), KVQ_SPLAT(qb[i]), KVQ_SPLAT(qn[i]),
              KVQ_LOAD16(cols + a * kKeyTile), KVQ_LOAD16(cols + b * kKeyTile),
              KVQ_LOAD16(cos + i * kKeyTile), KVQ_LOAD16(sin + i * kKeyTile),
              acc[u]);
        }
      for (int u = 0; u < 4; ++u)
        std::memcpy(S + (l + u) * kKeyTile, &acc[u], sizeof(acc[u]));
    }
    for (int64_t t = 0; t < kKeyTile; ++t)
      out[t * outStride + j] = canonicalTree(S + t, kKeyTile);
  }
}

KVQ_FMA_CLONES
void kvq::ropeScoresNibbles(const NibbleKeyTile &tile, const float *cos,
                            const float *sin, const RopeQueries &q, int64_t k,
                            bool interleaved, float *out, int64_t outStride) {
  using U32x2 = uint32_t __attribute__((vector_size(8)));
  using U32x16 = uint32_t __attribute__((vector_size(64)));
  const U32x16 shift = {0, 4, 8, 12, 16, 20, 24, 28,
                        0, 4, 8, 12, 16, 20, 24, 28};
  const int64_t P = q.pairs(), rows = tile.rows;
  // Nibble n's 16 rows at words + n * stride: the offsets in scalar
  // registers (folded into the loop, the compiler had built them in vector
  // lanes and extracted each one).
  const uint8_t *words = tile.codes + tile.row0 / 2 + tile.nib0 * (rows / 2);
  const int64_t stride = rows / 2;
  const float *qa = q.a(k), *qb = q.b(k), *qn = q.negA(k);
  const float *scale = tile.scale, *zero = tile.zero;
  // Nibble n of the head for the tile's 16 rows, one per lane.
#define KVQ_NIBBLE(n)                                                          \
  ({                                                                           \
    U32x2 w_;                                                                  \
    std::memcpy(&w_, words + (n)*stride, sizeof(w_));                          \
    (__builtin_shufflevector(w_, w_, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, \
                             1, 1) >>                                          \
     shift) &                                                                  \
        15u;                                                                   \
  })
  // Channel c from its code x: code * scale + zero, as loadRow.
#define KVQ_KEY(x, c)                                                          \
  (__builtin_convertvector((x), F16) * scale[c] + zero[c])
  // Pair i + u (u < 4) of the group of four at i: its channels a, b.
#define KVQ_STEP(u, ka, kb)                                                    \
  acc[u] = KVQ_PAIR_STEP(KVQ_SPLAT(qa[i + u]), KVQ_SPLAT(qb[i + u]),           \
                         KVQ_SPLAT(qn[i + u]), ka, kb,                         \
                         KVQ_LOAD16(cos + (i + u) * kKeyTile),                 \
                         KVQ_LOAD16(sin + (i + u) * kKeyTile), acc[u])
  float S[16 * kKeyTile]; // S_l of token t at S[l * kKeyTile + t]
  // Chains l .. l + 3 together: four independent fma chains in flight, and
  // pairs i .. i + 3 (i a multiple of 4) share their nibbles when codes
  // are 2-bit, so each nibble is decoded once.
  for (int64_t l = 0; l < 16; l += 4) {
    F16 acc[4] = {};
    for (int64_t i = l; i < P; i += 16) {
      if (tile.bits == 2 && interleaved) { // nibble i + u: pair i + u
        for (int u = 0; u < 4; ++u) {
          const U32x16 x = KVQ_NIBBLE(i + u);
          KVQ_STEP(u, KVQ_KEY(x & 3u, 2 * (i + u)),
                   KVQ_KEY(x >> 2, 2 * (i + u) + 1));
        }
      } else if (tile.bits == 2) { // nibble (i+u)/2: channels i+u, i+u+1
        for (int u = 0; u < 4; u += 2) {
          const U32x16 x = KVQ_NIBBLE((i + u) / 2);
          const U32x16 y = KVQ_NIBBLE((i + u + P) / 2);
          KVQ_STEP(u, KVQ_KEY(x & 3u, i + u), KVQ_KEY(y & 3u, i + u + P));
          KVQ_STEP(u + 1, KVQ_KEY(x >> 2, i + u + 1),
                   KVQ_KEY(y >> 2, i + u + 1 + P));
        }
      } else {
        for (int u = 0; u < 4; ++u) {
          const int64_t ca = interleaved ? 2 * (i + u) : i + u;
          const int64_t cb = interleaved ? ca + 1 : i + u + P;
          KVQ_STEP(u, KVQ_KEY(KVQ_NIBBLE(ca), ca), KVQ_KEY(KVQ_NIBBLE(cb), cb));
        }
      }
    }
    for (int u = 0; u < 4; ++u)
      std::memcpy(S + (l + u) * kKeyTile, &acc[u], sizeof(acc[u]));
  }
#undef KVQ_STEP
#undef KVQ_NIBBLE
#undef KVQ_KEY
  for (int64_t t = 0; t < kKeyTile; ++t)
    out[t * outStride] = canonicalTree(S + t, kKeyTile);
}
