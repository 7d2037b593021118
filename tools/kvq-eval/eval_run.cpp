//===- eval_run.cpp - kvq-eval's runs of the caches -----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "eval_run.h"

#include "reference_attention.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>


namespace kvq::eval {

namespace {

//===----------------------------------------------------------------------===//
// Progress on stderr for long runs
//===----------------------------------------------------------------------===//

class Progress {
public:
  /// Print `what` if the run is over 3 s old and the last line is 2 s old.
  void report(const std::string &what) {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = seconds();
    if (now < 3 || now - last_ < 2)
      return;
    last_ = now;
    std::fprintf(stderr, "kvq-eval: [%.0f s] %s\n", now, what.c_str());
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start_)
        .count();
  }

private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
  double last_ = -1e9;
};

Progress gProgress;

/// --save: the cache as kvq_cache_save writes it (docs/RUNTIME.md, "Saved
/// cache format"), and its size next to the payload's.
void saveCache(const kvq_cache_t *cache, const std::string &path,
               const std::string &label) {
  int64_t size = 0;
  kvq_stats st;
  if (kvq_cache_save(cache, nullptr, 0, &size) != KVQ_OK ||
      kvq_cache_stats(cache, -1, &st) != KVQ_OK)
    die(std::string("--save: ") + kvq_last_error());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (kvq_cache_save(cache, bytes.data(), size, &size) != KVQ_OK)
    die(std::string("--save: ") + kvq_last_error());
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0)
    die("--save: cannot write '" + path + "'");
  std::fprintf(stderr,
               "kvq-eval: saved the %s cache to %s: %lld bytes (payload "
               "%lld + %lld of header and bookkeeping)\n",
               label.c_str(), path.c_str(), static_cast<long long>(size),
               static_cast<long long>(st.total_bytes),
               static_cast<long long>(size - st.total_bytes));
}

/// The attention kvq-eval measures: q holds the queries at `pos`
/// ([pos.size(), qHeads, D]), k and v are [T, kvHeads, D]; scores summed
/// in float lanes (kvq::reference::ScoreSum::FloatLanes8).
std::vector<double> attention(const std::vector<float> &q, int64_t qHeads,
                              const std::vector<float> &k,
                              const std::vector<float> &v, int64_t kvHeads,
                              int64_t D, const std::vector<int64_t> &pos,
                              int threads, const std::string &label) {
  return kvq::reference::causalAttention(
      q.data(), qHeads, k.data(), v.data(), kvHeads, D, pos,
      kvq::reference::ScoreSum::FloatLanes8, threads,
      [&](int64_t done, int64_t total) {
        gProgress.report(label + ": attention " +
                         std::to_string(100 * done / total) + "%");
      });
}

/// Every configuration on the unit (layer l, batch b), the unitIndex-th;
/// `where` names it in progress lines. The rows' attention parts are
/// filled in from the reference.
std::vector<Row> evaluateUnit(const Options &opt, const Inputs &in,
                              const std::vector<Config> &configs, int64_t l,
                              int64_t b, int64_t unitIndex,
                              const std::string &where, int threads) {
  const kvq::tio::Tensor &K = in.K.t, &V = in.V.t, &Q = in.Q.t;
  const Axes &ka = in.ka, &qa = in.qa;
  const bool haveQ = in.haveQ;
  const int64_t T = in.T, H = in.H, D = in.D, Hq = in.Hq, C = in.C,
                prefill = in.prefill;
  const float ropeTheta = in.ropeTheta;
  const std::vector<int64_t> &positions = in.positions;
  const std::vector<float> k = slice(K, ka, l, b), v = slice(V, ka, l, b);
  // kRef: the keys as attention uses them (rotated by the oracle when
  // they are pre-RoPE): the reference's and every key error's. A
  // pre-RoPE cache gets k, a post-RoPE one kRef.
  std::vector<float> rotated;
  if (opt.preRope)
    rotated = kvq::reference::rotateRope(k, T, H, D, ropeTheta,
                                         opt.ropeStyle == KVQ_ROPE_INTERLEAVED);
  const std::vector<float> &kRef = opt.preRope ? rotated : k;
  std::vector<float> q;
  if (haveQ) {
    // The queries at the selected positions, [positions][Hq][D].
    q = slice(Q, qa, l, b);
    if (positions.size() != static_cast<size_t>(T)) {
      std::vector<float> at;
      at.reserve(positions.size() * static_cast<size_t>(Hq * D));
      for (int64_t p : positions)
        at.insert(at.end(), q.begin() + p * Hq * D,
                  q.begin() + (p + 1) * Hq * D);
      q = std::move(at);
    }
  }
  // Tasks: the reference attention and one per configuration (its
  // cache run, fetch and attention). They are independent, so they run
  // side by side over --threads (a task's attention gets the threads
  // left over); each result is computed by one task in a fixed order,
  // so nothing depends on --threads or on the schedule. kvquant's
  // refits are the longest cache runs: they start first.
  std::vector<double> reference;
  std::vector<Row> unitRows(configs.size());
  std::vector<std::vector<double>> approx(configs.size());
  std::vector<long> order; // -1: the reference
  for (int heavy = 1; heavy >= 0; --heavy) {
    if (!heavy && haveQ)
      order.push_back(-1);
    for (size_t ci = 0; ci < configs.size(); ++ci)
      if ((configs[ci].method == "kvquant") == (heavy == 1))
        order.push_back(static_cast<long>(ci));
  }
  const int outer =
      std::max(1, std::min(threads, static_cast<int>(order.size())));
  const int inner = std::max(1, threads / outer);
  std::mutex failMu;
  std::string failure;
  auto runConfig = [&](size_t ci) {
    const Config &c = configs[ci];
    const std::string label = where + " " + c.label();
    gProgress.report(label + ": running the cache");
    auto failed = [&](kvq_status s) {
      std::lock_guard<std::mutex> lock(failMu);
      if (failure.empty())
        failure =
            c.label() + ": " + kvq_status_string(s) + ": " + kvq_last_error();
    };
    kvq_cache_t *cache = nullptr;
    if (kvq_status s = kvq_cache_create(&c.cfg, &cache))
      return failed(s);
    const std::vector<float> &kIn = c.preRope() ? k : kRef;
    kvq_status s = kvq_cache_update(cache, 0, kIn.data(), v.data(), prefill,
                                    KVQ_DTYPE_F32);
    for (int64_t t = prefill; s == KVQ_OK && t < T; ++t) {
      s = kvq_cache_update(cache, 0, &kIn[t * C], &v[t * C], 1, KVQ_DTYPE_F32);
      if ((t & 255) == 0)
        gProgress.report(label + ": decode step " +
                         std::to_string(t - prefill) + "/" +
                         std::to_string(T - prefill));
    }
    std::vector<float> kf(static_cast<size_t>(T * C)), vf(kf.size());
    if (s == KVQ_OK)
      s = kvq_cache_fetch(cache, 0, kf.data(), vf.data(), T, KVQ_DTYPE_F32);
    if (s != KVQ_OK) {
      kvq_cache_destroy(cache);
      return failed(s);
    }
    Row &r = unitRows[ci];
    r.config = ci;
    r.layer = l;
    r.batch = b;
    // kvq_cache_fetch returns a pre-RoPE cache's keys rotated.
    r.key = {sums(kf, kRef, 0, T, C), sums(kf, kRef, 0, prefill, C),
             sums(kf, kRef, prefill, T, C)};
    r.value = {sums(vf, v, 0, T, C), sums(vf, v, 0, prefill, C),
               sums(vf, v, prefill, T, C)};
    kvq_cache_stats(cache, 0, &r.stats);
    if (!opt.save.empty() && ci == 0 && unitIndex == 0)
      saveCache(cache, opt.save, c.label());
    if (c.method == "kivi_sink") {
      int64_t count = 0;
      kvq_cache_sink_positions(cache, 0, nullptr, 0, &count);
      r.sinkPositions.resize(static_cast<size_t>(count));
      if (count)
        kvq_cache_sink_positions(cache, 0, r.sinkPositions.data(), count,
                                 &count);
    }
    kvq_cache_destroy(cache);
    if (haveQ)
      approx[ci] = attention(q, Hq, kf, vf, H, D, positions, inner, label);
  };
  std::atomic<size_t> nextTask{0};
  auto worker = [&]() {
    for (size_t i; (i = nextTask.fetch_add(1)) < order.size();) {
      if (order[i] < 0)
        reference = attention(q, Hq, kRef, v, H, D, positions, inner,
                              where + " reference");
      else
        runConfig(static_cast<size_t>(order[i]));
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < outer; ++i)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  if (!failure.empty())
    die(failure);
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    Row &r = unitRows[ci];
    if (haveQ) {
      const int64_t row = Hq * D;
      r.attn = {attnSums(approx[ci], reference, positions, 0, T, row),
                attnSums(approx[ci], reference, positions, 0, prefill, row),
                attnSums(approx[ci], reference, positions, prefill, T, row)};
    }
  }
  return unitRows;
}

} // namespace

Results runAll(const Options &opt, const Inputs &in,
               const std::vector<Config> &configs) {
  Results res;
  const int threads = res.threads = static_cast<int>(
      opt.threads > 0
          ? opt.threads
          : std::max(1u, std::min(64u, std::thread::hardware_concurrency())));
  const int64_t L = in.L, B = in.B, units = in.units();
  std::vector<Row> &rows = res.rows;
  std::vector<Summary> &summary = res.summary;
  summary.resize(configs.size());
  int64_t unitIndex = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t b = 0; b < B; ++b, ++unitIndex) {
      const std::string where =
          units > 1 ? "layer " + std::to_string(l) +
                          (B > 1 ? " batch " + std::to_string(b) : "") + " (" +
                          std::to_string(unitIndex + 1) + "/" +
                          std::to_string(units) + ")"
                    : std::string("input");
      std::vector<Row> unitRows =
          evaluateUnit(opt, in, configs, l, b, unitIndex, where, threads);
      for (size_t ci = 0; ci < configs.size(); ++ci) {
        Row &r = unitRows[ci];
        Summary &s = summary[ci];
        s.key.add(r.key);
        s.value.add(r.value);
        s.attn.add(r.attn);
        s.totalBytes += r.stats.total_bytes;
        s.fp16Bytes += r.stats.fp16_bytes;
        s.compressed += r.stats.compressed_tokens;
        rows.push_back(std::move(r));
      }
    }
  return res;
}

} // namespace kvq::eval
