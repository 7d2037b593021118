//===- eval_inputs.cpp - The K/V/Q dumps kvq-eval judges on ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "eval_inputs.h"

#include "flags.h"
#include "kvq/config_limits.h"
#include "kvq/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace kvq::eval {

using kvq::cli::printable;

namespace {

constexpr long long kDefaultPrefill = 128;

Input load(const std::string &spec, const std::vector<std::string> &names,
           const char *role) {
  Input in;
  in.spec = spec;
  std::string err;
  if (!kvq::tio::load(spec, names, in.t, err))
    die(std::string(role) + ": " + err);
  for (size_t i = 0; i < in.t.data.size(); ++i)
    if (!std::isfinite(in.t.data[i]))
      die(std::string(role) + " contains NaN or Inf (first at flat index " +
          std::to_string(i) + ")");
  return in;
}

Axes axes(const std::vector<int64_t> &shape, const std::string &layout,
          const char *role) {
  if (shape.size() != layout.size())
    die(std::string(role) + " is " + std::to_string(shape.size()) + "-D " +
        shapeStr(shape) + " but --layout " + layout + " names " +
        std::to_string(layout.size()) + " axes");
  Axes a;
  int64_t stride = 1;
  for (size_t i = layout.size(); i-- > 0;) {
    const int64_t n = shape[i];
    switch (layout[i]) {
    case 'l':
      a.l = n, a.sl = stride;
      break;
    case 'b':
      a.b = n, a.sb = stride;
      break;
    case 't':
      a.t = n, a.st = stride;
      break;
    case 'h':
      a.h = n, a.sh = stride;
      break;
    default:
      a.d = n, a.sd = stride;
      break;
    }
    stride *= n; // bounded: the data is in memory
  }
  return a;
}

/// --layout checked, or the default of a 3-D keys tensor (thd).
std::string layoutOf(const std::string &given, const Input &K) {
  std::string layout = given;
  if (!layout.empty()) {
    bool ok = layout.size() >= 3 && layout.size() <= 5;
    for (size_t i = 0; ok && i < layout.size(); ++i)
      ok = std::strchr("lbthd", layout[i]) &&
           layout.find(layout[i], i + 1) == std::string::npos;
    ok = ok && layout.find('t') != std::string::npos &&
         layout.find('h') != std::string::npos &&
         layout.find('d') != std::string::npos;
    if (!ok)
      die("--layout expects distinct axis letters naming t (tokens), h "
          "(heads), d (head_dim) and optionally b (batch), l (layers), e.g. "
          "thd, htd, bhtd, lbhtd; got '" +
          printable(layout, 20) + "'");
  } else if (K.t.shape.size() == 3) {
    layout = "thd";
  } else {
    die("keys are " + std::to_string(K.t.shape.size()) + "-D " +
        shapeStr(K.t.shape) +
        ": name the axes with --layout (e.g. bhtd for a Hugging Face "
        "per-layer cache [batch, heads, tokens, head_dim], lbhtd with "
        "layers, thd for [tokens, heads, head_dim])");
  }
  return layout;
}

/// --query-positions: all, the last N or N sampled with --seed.
void choosePositions(const Options &opt, Inputs &in, Warnings &warn) {
  const int64_t T = in.T;
  std::vector<int64_t> &positions = in.positions;
  std::string &qpMode = in.qpMode;
  if (in.haveQ) {
    const std::string &qp = opt.queryPositions;
    if (qp == "all") {
      for (int64_t t = 0; t < T; ++t)
        positions.push_back(t);
    } else if (qp.rfind("last:", 0) == 0 || qp.rfind("sample:", 0) == 0) {
      const bool last = qp[0] == 'l';
      qpMode = last ? "last" : "sample";
      const int64_t n =
          kvq::cli::parseInt(kTool, "--query-positions " + qpMode + ":N",
                             qp.substr(last ? 5 : 7), 1, 1ll << 40);
      const int64_t m = std::min(n, T);
      if (last) {
        for (int64_t t = T - m; t < T; ++t)
          positions.push_back(t);
      } else {
        std::vector<int64_t> all(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t)
          all[static_cast<size_t>(t)] = t;
        std::mt19937_64 gen(opt.seed);
        for (int64_t i = 0; i < m; ++i) {
          std::uniform_int_distribution<int64_t> u(i, T - 1);
          std::swap(all[static_cast<size_t>(i)],
                    all[static_cast<size_t>(u(gen))]);
        }
        positions.assign(all.begin(), all.begin() + m);
        std::sort(positions.begin(), positions.end());
      }
    } else {
      die("--query-positions expects all, last:N or sample:N, got '" +
          printable(qp, 40) + "'");
    }
  } else if (given(opt, "--query-positions")) {
    warn("--query-positions does not apply without --queries: ignored");
  }
  if (!in.haveQ && given(opt, "--seed"))
    warn("--seed does not apply without --queries: ignored");
}

} // namespace

std::vector<float> slice(const kvq::tio::Tensor &t, const Axes &a, int64_t l,
                         int64_t b) {
  std::vector<float> out(static_cast<size_t>(a.t * a.h * a.d));
  size_t o = 0;
  for (int64_t ti = 0; ti < a.t; ++ti)
    for (int64_t hi = 0; hi < a.h; ++hi) {
      const float *src = &t.data[static_cast<size_t>(l * a.sl + b * a.sb +
                                                     ti * a.st + hi * a.sh)];
      for (int64_t di = 0; di < a.d; ++di)
        out[o++] = src[di * a.sd];
    }
  return out;
}

Inputs loadInputs(const Options &opt, Warnings &warn) {
  Inputs in;
  const Input &K = in.K = load(opt.keys, {"keys", "k"}, "keys");
  std::string values = opt.values;
  if (values.empty()) {
    if (K.t.format == kvq::tio::Format::Npy)
      die("--values is required (with a .npy --keys)");
    values = K.t.file; // the same archive's values/v
  }
  const Input &V = in.V = load(values, {"values", "v"}, "values");
  const bool haveQ = in.haveQ = !opt.queries.empty();
  if (haveQ)
    in.Q = load(opt.queries, {"queries", "q"}, "queries");
  const Input &Q = in.Q;

  const bool explicitLayout = !opt.layout.empty();
  const std::string layout = in.layout = layoutOf(opt.layout, K);
  const Axes ka = in.ka = axes(K.t.shape, layout, "keys");
  if (K.t.shape != V.t.shape)
    die("keys and values shapes differ: " + shapeStr(K.t.shape) + " vs " +
        shapeStr(V.t.shape));
  const int64_t T = in.T = ka.t, H = in.H = ka.h, D = in.D = ka.d,
                L = in.L = ka.l, B = in.B = ka.b;
  if (T == 0 || H == 0 || D == 0 || L == 0 || B == 0)
    die("keys are empty: shape " + shapeStr(K.t.shape));
  if (T < H) {
    const std::string m =
        "keys " + shapeStr(K.t.shape) + " read as layout " + layout + " give " +
        std::to_string(T) + " tokens and " + std::to_string(H) +
        " heads: fewer tokens than heads usually means the axes are swapped";
    if (!explicitLayout)
      die(m + "; pass --layout htd for [heads, tokens, head_dim] (or "
              "--layout thd to confirm)");
    warn(m);
  }
  if (haveQ) {
    const Axes &qa = in.qa = axes(Q.t.shape, layout, "queries");
    const int64_t Hq = in.Hq = qa.h;
    if (qa.t != T || qa.d != D || qa.l != L || qa.b != B)
      die("queries " + shapeStr(Q.t.shape) + " must match the keys " +
          shapeStr(K.t.shape) + " in every axis of layout " + layout +
          " but heads");
    if (Hq == 0 || Hq % H != 0)
      die("q_heads " + std::to_string(Hq) + " is not a multiple of kv_heads " +
          std::to_string(H));
  }
  if (H > INT32_MAX || D > INT32_MAX)
    die("heads or head_dim too large");
  const float ropeTheta = in.ropeTheta = static_cast<float>(opt.ropeTheta);
  if (opt.preRope)
    if (const char *why = kvq::ropeRule(ropeTheta, D))
      die(std::string("--pre-rope: ") + why + " (rope_theta " +
          fmt("%.9g", ropeTheta) + " as a float, head_dim " +
          std::to_string(D) + ")");
  if (opt.prefill > T)
    die("--prefill " + std::to_string(opt.prefill) + " exceeds the " +
        std::to_string(T) + " tokens");
  in.prefill =
      opt.fitAll ? T
      : opt.prefill > 0
          ? opt.prefill
          : std::max<int64_t>(1, std::min<int64_t>(kDefaultPrefill, T - 1));
  in.C = H * D;
  choosePositions(opt, in, warn);
  return in;
}

} // namespace kvq::eval
