//===- attention.cpp - Fused decode attention driver ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Chunked online softmax over the stores' attendKeys / attendValues passes:
// per chunk of tokens, the scores of every query vector are computed from
// packed storage, masked (causality of a batch of query steps), folded into
// running maxima and sums, and turned into weights for the value pass. The
// reference (row-by-row dequantization, double accumulators) lives here too.
//
//===----------------------------------------------------------------------===//
#include "attention.h"

#include "fp16.h"
#include "parallel.h"
#include "rope.h"
#include "rope_keys.h"
#include "store.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace kvq;

namespace {

/// Tokens per chunk: the scores of a chunk ([chunk][heads][nq] floats) stay
/// in L1/L2 between the key and the value pass, and so do the chunk's value
/// rows, which the stores walk once per KV head. 128 measured ~5 % faster
/// than 256 and 64 for a 32K-token KIVI-2 cache (8 heads x 128); a multiple
/// of the usual key group (32) keeps groups whole inside a chunk.
constexpr int64_t kChunk = 128;

/// The pre-RoPE key pass over fp16 rows (scoreHalfRowsBlock): rows per
/// kernel call and how many rows ahead it asks for keys. Measured at 32K
/// tokens, 8 x 128, one query per KV head, cold: 4 rows a step ~10 %
/// faster than 8 or 16 (a whole tile's lines asked for at once), 16 to 64
/// rows ahead alike.
constexpr int64_t kHalfRowStep = 4;
constexpr int64_t kHalfRowsAhead = 16;

/// Tokens per independent range of one attention call (a multiple of
/// kChunk): the unit of work handed to the host's threads. Fixed, so that
/// the output never depends on the thread count; 1024 gives a 32K-token
/// cache 32 ranges to share out, and a cache of at most 1024 tokens one
/// range, exactly the single pass it had before ranges existed.
constexpr int64_t kAttendRange = 1024;

/// Query steps per task of a call with several (a prefill's): each query
/// vector's scores, softmax and output are computed on their own, so the
/// groups give the bits of one pass and share the steps of a long prefill
/// out to the host's threads where the ranges of a short cache cannot.
constexpr int64_t kQueryGroup = 32;

/// exp(x) for x <= 0 (Cephes' single-precision polynomial, a few ulp),
/// exactly 0 below -87 and for -inf. Branch-free so the loops over a chunk
/// vectorize on every ISA; std::exp would cost more than the dot products.
inline float expNonPositive(float x) {
  const float xc = x < -87.0f ? -87.0f : x;
  // floor(v) by truncation and a correction: std::floor is a libm call on
  // baseline x86_64 (no SSE4.1 round), which would stop vectorization.
  const float v = xc * 1.44269504088896341f + 0.5f;
  const float tr = static_cast<float>(static_cast<int32_t>(v));
  const float n = tr > v ? tr - 1.0f : tr;
  float r = xc - n * 0.693359375f; // ln 2 in two parts (Cody-Waite)
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // n is in [-126, 0]: 2^n is a normal float built from its exponent.
  y *= bitsToFloat(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : y;
}

/// The weights of tokens [t0, n) one by one: s[t*K + k] = exp(s[t*K + k] -
/// runMax[k]), runSum[k] += that weight (softmaxWeights' operations).
[[gnu::always_inline]] inline void
softmaxTokens(float *__restrict s, int64_t t0, int64_t n, int64_t K,
              const float *__restrict runMax, float *__restrict runSum) {
  for (int64_t t = t0; t < n; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const float w = expNonPositive(s[t * K + k] - runMax[k]);
      s[t * K + k] = w;
      runSum[k] += w;
    }
}

/// softmaxWeights for K query vectors, K dividing 16: R = 16 / K tokens'
/// scores are one run of 16 elements, so a vector covers whole registers
/// even with one query vector per head (K = 8: two tokens per zmm). The
/// sums still add token by token: the same operations in the same order as
/// the loop by tokens.
template <int K>
[[gnu::always_inline]] inline void softmaxRuns(float *__restrict s, int64_t n,
                                               const float *__restrict runMax,
                                               float *__restrict runSum) {
  constexpr int R = 16 / K;
  float maxOf[16], sum[K];
  for (int i = 0; i < 16; ++i)
    maxOf[i] = runMax[i % K];
  for (int k = 0; k < K; ++k)
    sum[k] = runSum[k];
  int64_t t = 0;
  for (; t + R <= n; t += R) {
    float *__restrict p = s + t * K;
    float w[16];
    for (int i = 0; i < 16; ++i) {
      w[i] = expNonPositive(p[i] - maxOf[i]);
      p[i] = w[i];
    }
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < K; ++k)
        sum[k] += w[r * K + k];
  }
  softmaxTokens(s, t, n, K, maxOf, sum); // the last n % R tokens
  for (int k = 0; k < K; ++k)
    runSum[k] = sum[k];
}

/// s[t*K + k] = exp(s[t*K + k] - runMax[k]) and runSum[k] += that weight,
/// for t = 0 .. n-1 in order. The loops vectorize (across k, or across
/// runs of whole tokens where K divides 16); on x86_64 AVX-512 and AVX2
/// clones (chosen at load time) do sixteen and eight weights per
/// instruction instead of the baseline's four. Every clone, and every
/// other ISA, runs the same per-element operations (no contraction:
/// -ffp-contract=off), so the weights and sums are bit-identical
/// everywhere.
#if defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void softmaxWeights(float *__restrict s, int64_t n, int64_t K,
                    const float *__restrict runMax,
                    float *__restrict runSum) {
  switch (K) {
  case 1:
    return softmaxRuns<1>(s, n, runMax, runSum);
  case 2:
    return softmaxRuns<2>(s, n, runMax, runSum);
  case 4:
    return softmaxRuns<4>(s, n, runMax, runSum);
  case 8:
    return softmaxRuns<8>(s, n, runMax, runSum);
  case 16:
    return softmaxRuns<16>(s, n, runMax, runSum);
  default:
    return softmaxTokens(s, 0, n, K, runMax, runSum);
  }
}

/// out[k] = the maximum of s[t*K + k] over the n >= 1 tokens of a chunk,
/// folded token by token with std::max (the order, and so the sign of a
/// zero maximum, of a plain loop). Eight vectors' maxima stay in registers
/// across the tokens: a loop over a heap array of K maxima stored and
/// reloaded each one every token, a store-to-load chain per token.
#if defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("avx2", "default")))
#endif
void chunkMaxima(const float *__restrict s, int64_t n, int64_t K,
                 float *__restrict out) {
  constexpr int64_t W = 8;
  int64_t k0 = 0;
  for (; k0 + W <= K; k0 += W) {
    float m[W];
    for (int64_t i = 0; i < W; ++i)
      m[i] = s[k0 + i];
    for (int64_t t = 1; t < n; ++t)
      for (int64_t i = 0; i < W; ++i)
        m[i] = std::max(m[i], s[t * K + k0 + i]);
    for (int64_t i = 0; i < W; ++i)
      out[k0 + i] = m[i];
  }
  for (; k0 < K; ++k0) {
    float m = s[k0];
    for (int64_t t = 1; t < n; ++t)
      m = std::max(m, s[t * K + k0]);
    out[k0] = m;
  }
}

/// What every token range of one attention call shares: the prescaled
/// query vectors by KV head (split by RoPE pair for a pre-RoPE cache) and
/// each vector's last visible position.
struct AttendQueries {
  int64_t d = 0, heads = 0, qPerKv = 0, nq = 0;
  std::vector<float> q;
  RopeQueries ropeQueries;
  std::vector<int64_t> lastVisible;
  int64_t first = 0; ///< position of the first query step
};

/// The online softmax of one token range: running maxima, sums and the
/// unnormalised output of each of the K query vectors.
struct PartialSoftmax {
  std::vector<float> max, sum, acc;
};

/// Chunked online softmax over tokens [s0, s1) into r.
void attendRange(const LayerStore &store, const Rope &rope,
                 const AttendQueries &aq, int64_t s0, int64_t s1,
                 PartialSoftmax &r) {
  // This thread's buffers of its last range (their capacity), as new.
  thread_local AttendBuffers spare;
  thread_local std::vector<float> chunkMax, weightMax;
  AttendJob job(store.attendOps());
  job.reuse(std::move(spare));
  job.d = aq.d;
  job.heads = aq.heads;
  job.qPerKv = aq.qPerKv;
  job.nq = aq.nq;
  job.q = aq.q;
  if (rope.enabled())
    job.ropeQueries = aq.ropeQueries;
  const int64_t d = aq.d, K = aq.heads * aq.nq;
  job.acc.assign(static_cast<size_t>(K * d), 0.0f);
  std::vector<float> &runMax = r.max, &runSum = r.sum;
  runMax.assign(static_cast<size_t>(K),
                -std::numeric_limits<float>::infinity());
  runSum.assign(static_cast<size_t>(K), 0.0f);
  chunkMax.resize(static_cast<size_t>(K));
  for (int64_t t0 = s0; t0 < s1; t0 += kChunk) {
    const int64_t t1 = std::min(s1, t0 + kChunk), n = t1 - t0;
    job.t0 = t0;
    job.t1 = t1;
    job.scores.resize(static_cast<size_t>(n * K));
    if (rope.enabled())
      attendKeysRotated(store, rope, job);
    else
      store.attendKeys(job);
    float *s = job.scores.data();
    // Causal mask: only the last nQueries - 1 positions hide anything.
    for (int64_t t = std::max(t0, aq.first + 1); t < t1; ++t)
      for (int64_t k = 0; k < K; ++k)
        if (t > aq.lastVisible[static_cast<size_t>(k)])
          s[(t - t0) * K + k] = -std::numeric_limits<float>::infinity();
    chunkMaxima(s, n, K, chunkMax.data());
    bool masked = false; // a vector that has seen only masked tokens
    for (int64_t k = 0; k < K; ++k) {
      float m = runMax[static_cast<size_t>(k)];
      float cm = chunkMax[static_cast<size_t>(k)];
      if (cm > m) {
        float f = expNonPositive(m - cm); // exactly 0 when m is -inf
        runSum[static_cast<size_t>(k)] *= f;
        float *a = job.acc.data() + k * d;
        for (int64_t c = 0; c < d; ++c)
          a[c] *= f;
        runMax[static_cast<size_t>(k)] = cm;
      }
      masked |= runMax[static_cast<size_t>(k)] ==
                -std::numeric_limits<float>::infinity();
    }
    // Masked tokens are a suffix (the positions after a query step), so a
    // maximum stays -inf only in a range where every token is masked for
    // that vector; its weights must be 0, not NaN (-inf - -inf), and then
    // the merge scales its zero sum and output by exp(-inf) = 0. Position 0
    // is visible to every query: the first range always has finite maxima.
    const float *wMax = runMax.data();
    if (masked) {
      weightMax = runMax;
      for (float &m : weightMax)
        if (m == -std::numeric_limits<float>::infinity())
          m = 0.0f;
      wMax = weightMax.data();
    }
    softmaxWeights(s, n, K, wMax, runSum.data());
    store.attendValues(job);
  }
  r.acc.swap(job.acc);
  spare = std::move(static_cast<AttendBuffers &>(job));
}

} // namespace

namespace {

/// Query steps [first, first + nQueries) of a call (their queries and
/// outputs at the pointers given) against every token of the store: the
/// ranges of kAttendRange tokens run through `parallel`.
void attendSteps(const LayerStore &store, const kvq_config &cfg,
                 const Rope &rope, const kvq_parallel &parallel,
                 const float *queries, int64_t nQueries, int32_t qHeads,
                 float *out, int64_t first) {
  // Kept per thread, as attendRange's buffers: every field is set below
  // (ropeQueries only read with RoPE, which splits it anew). Named through
  // references: a lambda run on a worker thread would otherwise see that
  // thread's own (empty) instances.
  thread_local AttendQueries callerQueries;
  thread_local std::vector<PartialSoftmax> callerParts;
  AttendQueries &aq = callerQueries;
  std::vector<PartialSoftmax> &part = callerParts;
  const int64_t H = cfg.num_kv_heads, d = cfg.head_dim;
  aq.d = d;
  aq.heads = H;
  aq.qPerKv = qHeads / H;
  aq.nq = nQueries * aq.qPerKv;
  const int64_t nq = aq.nq, K = H * nq;
  const float scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  // Gather the query vectors of each KV head together and prescale them.
  aq.q.resize(static_cast<size_t>(K * d));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < nq; ++j) {
      int64_t i = j / aq.qPerKv, qh = h * aq.qPerKv + j % aq.qPerKv;
      const float *src = queries + (i * qHeads + qh) * d;
      float *dst = aq.q.data() + (h * nq + j) * d;
      for (int64_t c = 0; c < d; ++c)
        dst[c] = src[c] * scale;
    }
  if (rope.enabled())
    aq.ropeQueries.split(aq.q.data(), K, d, rope.interleaved());
  // Visible limit of query vector k = (h, j): position first + j / qPerKv.
  const int64_t length = store.length();
  aq.first = first;
  aq.lastVisible.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    aq.lastVisible[static_cast<size_t>(k)] = aq.first + (k % nq) / aq.qPerKv;

  // Ranges of kAttendRange tokens (flash-decoding): a fixed partition, so
  // the bits do not depend on the threads that run it.
  const int64_t ranges = (length + kAttendRange - 1) / kAttendRange;
  part.resize(static_cast<size_t>(ranges));
  runTasks(parallel, ranges, [&](int64_t i) {
    attendRange(store, rope, aq, i * kAttendRange,
                std::min(length, (i + 1) * kAttendRange),
                part[static_cast<size_t>(i)]);
  });

  // Merge in range order: each range's sum and output scaled by
  // exp(its max - the overall max) (exactly 1 for the range holding the
  // max). One range is taken as it is.
  PartialSoftmax &total = part[0];
  for (int64_t i = 1; i < ranges; ++i) {
    const PartialSoftmax &r = part[static_cast<size_t>(i)];
    for (int64_t k = 0; k < K; ++k) {
      float &m = total.max[static_cast<size_t>(k)];
      const float rm = r.max[static_cast<size_t>(k)];
      const float M = std::max(m, rm);
      const float f = expNonPositive(m - M), g = expNonPositive(rm - M);
      float &sum = total.sum[static_cast<size_t>(k)];
      sum = sum * f + r.sum[static_cast<size_t>(k)] * g;
      float *a = total.acc.data() + k * d;
      const float *b = r.acc.data() + k * d;
      for (int64_t c = 0; c < d; ++c)
        a[c] = a[c] * f + b[c] * g;
      m = M;
    }
  }

  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < nq; ++j) {
      int64_t i = j / aq.qPerKv, qh = h * aq.qPerKv + j % aq.qPerKv;
      const float inv = 1.0f / total.sum[static_cast<size_t>(h * nq + j)];
      const float *a = total.acc.data() + (h * nq + j) * d;
      float *dst = out + (i * qHeads + qh) * d;
      for (int64_t c = 0; c < d; ++c)
        dst[c] = a[c] * inv;
    }
}

} // namespace

void kvq::attendFused(const LayerStore &store, const kvq_config &cfg,
                      const Rope &rope, const kvq_parallel &parallel,
                      const float *queries, int64_t nQueries, int32_t qHeads,
                      float *out) {
  const int64_t first = store.length() - nQueries;
  const int64_t groups = (nQueries + kQueryGroup - 1) / kQueryGroup;
  if (groups < 2 || !parallel.parallel_for || parallel.workers < 2)
    return attendSteps(store, cfg, rope, parallel, queries, nQueries, qHeads,
                       out, first);
  // Groups of query steps on the host's threads, each over its ranges on
  // its own thread (a host's parallel-for need not be reentrant).
  const int64_t step = int64_t{qHeads} * cfg.head_dim;
  runTasks(parallel, groups, [&](int64_t g) {
    const int64_t i0 = g * kQueryGroup;
    attendSteps(store, cfg, rope, kvq_parallel{}, queries + i0 * step,
                std::min(kQueryGroup, nQueries - i0), qHeads, out + i0 * step,
                first + i0);
  });
}

void kvq::attendKeysByRows(const LayerStore &store, AttendJob &job) {
  const int64_t C = job.heads * job.d, d = job.d, nq = job.nq;
  job.scratch.resize(static_cast<size_t>(2 * C));
  float *k = job.scratch.data(), *v = k + C;
  for (int64_t t = job.t0; t < job.t1; ++t) {
    store.loadRow(t, k, v);
    for (int64_t h = 0; h < job.heads; ++h) {
      float *o = job.scoreRow(t, h);
      for (int64_t j = 0; j < nq; ++j) {
        const float *q = job.query(h) + j * d;
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c)
          dot += q[c] * k[h * d + c];
        o[j] = dot;
      }
    }
  }
}

namespace {

/// The key pass over tokens [a, b) (one block, at most kHalfKeyBlock) of a
/// store holding them as fp16 rows (rows[h * kHalfKeyBlock + t - a]), angles
/// by rows: head by head, kHalfRowStep rows per kernel call. Before each
/// call it asks for those rows' values (the value pass reads them next) and
/// for the key rows kHalfRowsAhead further in this walk, both into L2, a
/// few lines at a time between the scores, as the post-RoPE key pass asks
/// for its values row by row: the hardware prefetcher alone left the key
/// loads stalling, and prefetching a whole tile at once stalled on full
/// miss buffers instead of overlapping the arithmetic.
void scoreHalfRowsBlock(const LayerStore &store, AttendJob &job, int64_t a,
                        int64_t b, const uint16_t *const *rows,
                        const float *cos, const float *sin, bool interleaved) {
  const int64_t H = job.heads, nq = job.nq, K = H * nq, P = job.d / 2;
  const int64_t m = b - a, rowBytes = 2 * job.d;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t u = 0; u < m; u += kHalfRowStep) {
      const int64_t un = std::min(kHalfRowStep, m - u);
      store.prefetchValues(a + u, a + u + un, h);
      // Row t of this head's run, past its end the next heads' rows
      // (found by subtracting rather than a division per row).
      int64_t ah = h, at = u + kHalfRowsAhead;
      while (at >= m) {
        at -= m;
        ++ah;
      }
      for (int64_t i = 0; i < un; ++i, ++at) {
        if (at == m) {
          at = 0;
          ++ah;
        }
        if (ah >= H)
          break;
        const char *p =
            reinterpret_cast<const char *>(rows[ah * kHalfKeyBlock + at]);
        for (int64_t off = 0; off < rowBytes; off += 64)
          __builtin_prefetch(p + off, 0, 1);
      }
      const uint16_t *const *r = rows + h * kHalfKeyBlock + u;
      if (job.ops.ropeHalfRows) {
        RopeHalfRows args;
        args.rows = r;
        args.n = un;
        args.cos = cos + u * P;
        args.sin = sin + u * P;
        args.q = job.ropeQueries.a(h * nq);
        args.qStride = job.ropeQueries.stride();
        args.nq = nq;
        args.d = job.d;
        args.interleaved = interleaved;
        args.out = job.scoreRow(a + u, h);
        args.outStride = K;
        job.ops.ropeHalfRows(args);
      } else {
        ropeScoresHalfRows(r, un, cos + u * P, sin + u * P, job.ropeQueries,
                           h * nq, nq, interleaved, job.scoreRow(a + u, h), K);
      }
    }
}

/// Where a run of fp16 key rows starting at a ends (rows filled for head
/// 0), or 0 when the store does not hold [a, b) so: the whole block up to
/// blockEnd where it can, else the tile [a, b).
int64_t halfRowsEnd(const LayerStore &store, int64_t a, int64_t b,
                    int64_t blockEnd, const uint16_t **rows) {
  if (store.halfKeyRows(a, blockEnd, 0, rows))
    return blockEnd;
  return store.halfKeyRows(a, b, 0, rows) ? b : 0;
}

} // namespace

/// Tiles of kKeyTile tokens: per tile the angles once for every head, then
/// per head the canonical scores (rope_keys.h) of the store's keys, by
/// columns where the store scores the tile itself (scoreKeyColumns: the
/// run of tiles it takes together, e.g. a KIVI key group's, so tables it
/// builds per head serve them all), else from the tile's rows (the store's
/// own scoreKeyRows, or loadKeys and ropeScoresRows). Keys
/// a store holds as fp16 rows (halfKeyRows) go by blocks of kHalfKeyBlock
/// tokens instead: the block's angles once, then head by head, so each head's
/// rows are read as one run (an fp16 page holds them so), the walk of the
/// post-RoPE key pass.
void kvq::attendKeysRotated(const LayerStore &store, const Rope &rope,
                            AttendJob &job) {
  const int64_t d = job.d, H = job.heads, C = H * d, P = d / 2;
  const int64_t nq = job.nq, K = H * nq;
  const bool interleaved = rope.interleaved();
  Rope::Cursor &cursor = job.ropeCursor;
  job.scratch.resize(static_cast<size_t>(kKeyTile * C + 2 * kHalfKeyBlock * P));
  float *keys = job.scratch.data(), *cosT = keys + kKeyTile * C;
  float *sinT = cosT + kHalfKeyBlock * P;
  job.halfRows.resize(static_cast<size_t>(H * kHalfKeyBlock));
  const uint16_t **rows = job.halfRows.data();
  for (int64_t a = job.t0, b; a < job.t1; a = b) {
    b = std::min(job.t1, (a / kKeyTile + 1) * kKeyTile);
    const int64_t n = b - a;
    const int64_t blockEnd =
        std::min(job.t1, (a / kHalfKeyBlock + 1) * kHalfKeyBlock);
    const int64_t tiles =
        n == kKeyTile ? store.keyColumnTiles(
                            a, std::min(kHalfKeyBlock, job.t1 - a) / kKeyTile)
                      : 0;
    if (tiles > 0) {
      b = a + tiles * kKeyTile;
      for (int64_t u = 0; u < tiles; ++u)
        rope.anglesTile(a + u * kKeyTile, kKeyTile, cursor,
                        cosT + u * P * kKeyTile, sinT + u * P * kKeyTile, 1,
                        kKeyTile);
      for (int64_t h = 0; h < H; ++h)
        store.scoreKeyColumns(job, a, tiles, h, cosT, sinT, interleaved,
                              job.scoreRow(a, h), K);
    } else if (const int64_t e = halfRowsEnd(store, a, b, blockEnd, rows)) {
      b = e;
      for (int64_t h = 1; h < H; ++h)
        store.halfKeyRows(a, b, h, rows + h * kHalfKeyBlock);
      rope.anglesTile(a, b - a, cursor, cosT, sinT, P, 1);
      scoreHalfRowsBlock(store, job, a, b, rows, cosT, sinT, interleaved);
    } else {
      rope.anglesTile(a, n, cursor, cosT, sinT, P, 1);
      if (!store.scoreKeyRows(job, a, b, cosT, sinT, interleaved)) {
        store.loadKeys(job, a, b, keys);
        for (int64_t h = 0; h < H; ++h)
          ropeScoresRows(keys + h * d, C, n, cosT, sinT, job.ropeQueries,
                         h * nq, nq, interleaved, job.scoreRow(a, h), K);
      }
    }
  }
}

void LayerStore::loadKeys(AttendJob &job, int64_t t0, int64_t t1,
                          float *out) const {
  job.scratch3.resize(static_cast<size_t>(channels_));
  for (int64_t t = t0; t < t1; ++t)
    loadRow(t, out + (t - t0) * channels_, job.scratch3.data());
}

bool LayerStore::halfKeyRows(int64_t, int64_t, int64_t,
                             const uint16_t **) const {
  return false;
}

void LayerStore::prefetchValues(int64_t, int64_t, int64_t) const {}

int64_t LayerStore::keyColumnTiles(int64_t, int64_t) const { return 0; }

bool LayerStore::scoreKeyRows(AttendJob &, int64_t, int64_t, const float *,
                              const float *, bool) const {
  return false;
}

void LayerStore::scoreKeyColumns(AttendJob &, int64_t, int64_t, int64_t,
                                 const float *, const float *, bool, float *,
                                 int64_t) const {}

void kvq::attendValuesByRows(const LayerStore &store, AttendJob &job) {
  const int64_t C = job.heads * job.d, d = job.d, nq = job.nq;
  job.scratch.resize(static_cast<size_t>(2 * C));
  float *k = job.scratch.data(), *v = k + C;
  for (int64_t t = job.t0; t < job.t1; ++t) {
    store.loadRow(t, k, v);
    for (int64_t h = 0; h < job.heads; ++h) {
      const float *w = job.scoreRow(t, h);
      float *a = job.accumulator(h);
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t c = 0; c < d; ++c)
          a[j * d + c] += w[j] * v[h * d + c];
    }
  }
}

void LayerStore::attendKeys(AttendJob &job) const {
  attendKeysByRows(*this, job);
}

void LayerStore::attendValues(AttendJob &job) const {
  attendValuesByRows(*this, job);
}

void kvq::attendReference(const LayerStore &store, const kvq_config &cfg,
                          const Rope &rope, const float *queries,
                          int64_t n_queries, int32_t q_heads, float *out) {
  // One pass over the tokens with an online softmax per query head; each
  // token's K/V row is dequantized once into a small buffer.
  const int32_t kvHeads = cfg.num_kv_heads;
  const int64_t d = cfg.head_dim, c = int64_t{kvHeads} * d;
  const int64_t length = store.length();
  const int64_t groupSize = q_heads / kvHeads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> k(static_cast<size_t>(c)), v(static_cast<size_t>(c));
  const int64_t qd = int64_t{q_heads} * d;
  std::vector<double> acc(static_cast<size_t>(n_queries * qd), 0.0);
  std::vector<double> runMax(static_cast<size_t>(n_queries * q_heads),
                             -INFINITY);
  std::vector<double> runSum(static_cast<size_t>(n_queries * q_heads), 0.0);
  const int64_t first = length - n_queries;
  Rope::Cursor cursor;
  for (int64_t t = 0; t < length; ++t) {
    store.loadRow(t, k.data(), v.data());
    if (rope.enabled())
      rope.rotateAt(k.data(), kvHeads, t, cursor);
    // Query i (position first + i) sees tokens t <= first + i.
    for (int64_t i = t > first ? t - first : 0; i < n_queries; ++i) {
      for (int32_t h = 0; h < q_heads; ++h) {
        const float *q = queries + i * qd + int64_t{h} * d;
        const int64_t kvh = h / groupSize;
        double dot = 0.0;
        for (int64_t j = 0; j < d; ++j)
          dot += static_cast<double>(q[j]) * k[kvh * d + j];
        double score = dot * scale;
        size_t slot = static_cast<size_t>(i * q_heads + h);
        double *a = &acc[static_cast<size_t>(i * qd + int64_t{h} * d)];
        if (score > runMax[slot]) {
          double rescale = std::exp(runMax[slot] - score);
          runSum[slot] *= rescale;
          for (int64_t j = 0; j < d; ++j)
            a[j] *= rescale;
          runMax[slot] = score;
        }
        double w = std::exp(score - runMax[slot]);
        runSum[slot] += w;
        for (int64_t j = 0; j < d; ++j)
          a[j] += w * v[kvh * d + j];
      }
    }
  }
  for (int64_t i = 0; i < n_queries; ++i)
    for (int32_t h = 0; h < q_heads; ++h) {
      size_t slot = static_cast<size_t>(i * q_heads + h);
      for (int64_t j = 0; j < d; ++j)
        out[i * qd + int64_t{h} * d + j] = static_cast<float>(
            acc[static_cast<size_t>(i * qd + int64_t{h} * d + j)] /
            runSum[slot]);
    }
}
