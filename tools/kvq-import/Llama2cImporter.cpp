//===- Llama2cImporter.cpp - a llama2.c model as an MLIR module -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Emits text, as small frontends do, then parses and verifies it: the
// verifier, not this file, is the judge of the IR. Every tensor value is
// written once (SSA); names are %v<N>.
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-import/Llama2cImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

using kvq::model::Llama2cConfig;
using kvq::model::Llama2cLayout;

namespace kvq::import {

namespace {

std::string join(const std::vector<std::string> &parts, const char *sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? sep : "") + parts[i];
  return out;
}

/// `tensor<2x?x8xf32>` from dims (-1 dynamic) and an element type.
std::string tensorType(const std::vector<int64_t> &dims,
                       const std::string &el) {
  std::string s = "tensor<";
  for (int64_t d : dims)
    s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return s + el + ">";
}

/// A float as an exact MLIR literal (hex bit pattern).
std::string f32Literal(float v) {
  uint32_t bits;
  static_assert(sizeof(bits) == sizeof(v));
  std::memcpy(&bits, &v, sizeof(bits));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%08X", bits);
  return buf;
}

std::string affineMap(int loops, const std::vector<std::string> &results) {
  std::vector<std::string> dims;
  for (int i = 0; i < loops; ++i)
    dims.push_back("d" + std::to_string(i));
  return "affine_map<(" + join(dims, ", ") + ") -> (" + join(results, ", ") +
         ")>";
}

/// A tensor value: its SSA name, dims and element type.
struct Val {
  std::string name;
  std::vector<int64_t> dims;
  std::string el = "f32";
  std::string type() const { return tensorType(dims, el); }
};

class Emitter {
public:
  Emitter(const Llama2cConfig &c, const ImportOptions &o)
      : c(c), o(o), layout(model::llama2cLayout(c)),
        context(o.contextLength > 0 ? o.contextLength : c.seqLen) {}

  std::string module() {
    out << "// " << c.layers << " layers, dim " << c.dim << ", " << c.heads
        << " query heads, " << c.kvHeads << " KV heads, head_dim "
        << c.headDim() << ", hidden " << c.hiddenDim << ", vocab " << c.vocab
        << ", cache " << context << " tokens\n";
    out << "module {\n";
    if (o.prefillTokens > 0)
      entryPoint("prefill", o.prefillTokens);
    entryPoint("decode", 1);
    out << "}\n";
    return out.str();
  }

private:
  const Llama2cConfig &c;
  const ImportOptions &o;
  Llama2cLayout layout;
  int64_t context;
  std::ostringstream out;
  int counter = 0;
  int64_t n = 1;      // tokens of the entry point being emitted
  std::string dynLen; // SSA name of pos + n (the attended length)

  std::string fresh() { return "%v" + std::to_string(counter++); }
  std::string weightEl() const { return weightTypeName(o.weightType); }
  /// A body value of element type `el` as f32 (arith.extf unless it is).
  std::string widened(const std::string &value, const std::string &el) {
    if (el == "f32")
      return value;
    return op("arith.extf " + value + " : " + el + " to f32");
  }
  std::string cacheEl() const { return o.cacheF16 ? "f16" : "f32"; }
  bool perLayer() const {
    return o.cacheLayout == ImportOptions::CacheLayout::PerLayer;
  }

  std::string cst(float v, const std::string &type = "f32") {
    std::string name = fresh();
    out << "    " << name << " = arith.constant " << f32Literal(v) << " : "
        << type << "\n";
    return name;
  }
  std::string idx(int64_t v) {
    std::string name = fresh();
    out << "    " << name << " = arith.constant " << v << " : index\n";
    return name;
  }

  /// tensor.empty with the dynamic dims bound to the attended length.
  Val empty(const std::vector<int64_t> &dims, const std::string &el = "f32") {
    Val v{fresh(), dims, el};
    std::vector<std::string> dyn;
    for (int64_t d : dims)
      if (d < 0)
        dyn.push_back(dynLen);
    out << "    " << v.name << " = tensor.empty(" << join(dyn, ", ")
        << ") : " << v.type() << "\n";
    return v;
  }
  Val filled(const std::vector<int64_t> &dims, const std::string &value) {
    Val e = empty(dims);
    Val v{fresh(), dims};
    out << "    " << v.name << " = linalg.fill ins(" << value << " : f32) outs("
        << e.name << " : " << e.type() << ") -> " << v.type() << "\n";
    return v;
  }

  /// A linalg.generic over `loops` dims; `body` gets the block arguments'
  /// names and writes ops, returning the yielded value.
  template <typename Body>
  Val generic(int loops, const std::vector<std::string> &iterators,
              const std::vector<std::pair<Val, std::vector<std::string>>> &ins,
              const Val &init, const std::vector<std::string> &initMap,
              Body body) {
    std::vector<std::string> maps, names, types, args;
    for (auto &[val, map] : ins) {
      maps.push_back(affineMap(loops, map));
      names.push_back(val.name);
      types.push_back(val.type());
    }
    maps.push_back(affineMap(loops, initMap));
    std::vector<std::string> its;
    for (auto &it : iterators)
      its.push_back("\"" + it + "\"");
    Val result{fresh(), init.dims, init.el};
    out << "    " << result.name << " = linalg.generic {indexing_maps = ["
        << join(maps, ", ") << "], iterator_types = [" << join(its, ", ")
        << "]}";
    if (!ins.empty())
      out << " ins(" << join(names, ", ") << " : " << join(types, ", ") << ")";
    out << " outs(" << init.name << " : " << init.type() << ") {\n";
    std::vector<std::string> blockArgs;
    for (size_t i = 0; i < ins.size(); ++i) {
      std::string a = "%in" + std::to_string(i);
      blockArgs.push_back(a + ": " + ins[i].first.el);
      args.push_back(a);
    }
    blockArgs.push_back("%acc: " + init.el);
    args.push_back("%acc");
    out << "    ^bb0(" << join(blockArgs, ", ") << "):\n";
    std::string yielded = body(args);
    out << "      linalg.yield " << yielded << " : " << init.el << "\n"
        << "    } -> " << result.type() << "\n";
    return result;
  }

  /// One body op `%r = <text>`; returns %r.
  std::string op(const std::string &text) {
    std::string name = fresh();
    out << "      " << name << " = " << text << "\n";
    return name;
  }

  static std::vector<std::string> dimsOf(std::initializer_list<int> ds) {
    std::vector<std::string> r;
    for (int d : ds)
      r.push_back("d" + std::to_string(d));
    return r;
  }
  static std::vector<std::string> parallel(int k) {
    return std::vector<std::string>(k, "parallel");
  }
  static std::vector<std::string> identity(int rank) {
    std::vector<std::string> r;
    for (int i = 0; i < rank; ++i)
      r.push_back("d" + std::to_string(i));
    return r;
  }

  /// A weight array: `rows x cols` weights at `offset` of %w.
  Val weight(int64_t offset, int64_t rows, int64_t cols) {
    Val flat{fresh(), {rows * cols}, weightEl()};
    out << "    " << flat.name << " = tensor.extract_slice %weights[" << offset
        << "] [" << rows * cols
        << "] [1] : " << tensorType({layout.total}, weightEl()) << " to "
        << flat.type() << "\n";
    if (rows == 1)
      return flat;
    Val v{fresh(), {rows, cols}, weightEl()};
    out << "    " << v.name << " = tensor.expand_shape " << flat.name
        << " [[0, 1]] output_shape [" << rows << ", " << cols
        << "] : " << flat.type() << " into " << v.type() << "\n";
    return v;
  }

  Val reshape(const Val &v, const std::vector<int64_t> &dims,
              const std::string &reassociation, bool expand) {
    Val r{fresh(), dims, v.el};
    out << "    " << r.name << " = tensor."
        << (expand ? "expand_shape " : "collapse_shape ") << v.name << " "
        << reassociation;
    if (expand) {
      std::vector<std::string> shape;
      for (int64_t d : dims)
        shape.push_back(d < 0 ? dynLen : std::to_string(d));
      out << " output_shape [" << join(shape, ", ") << "]";
    }
    out << " : " << v.type() << " into " << r.type() << "\n";
    return r;
  }

  /// y[n, o] = sum_i x[n, i] w[o, i] (llama2.c stores W as [out][in]).
  Val project(const Val &x, const Val &w) {
    Val init = filled({x.dims[0], w.dims[0]}, zero);
    return generic(3, {"parallel", "parallel", "reduction"},
                   {{x, dimsOf({0, 2})}, {w, dimsOf({1, 2})}}, init,
                   dimsOf({0, 1}), [&](auto a) {
                     std::string wv = widened(a[1], w.el);
                     std::string m =
                         op("arith.mulf " + a[0] + ", " + wv + " : f32");
                     return op("arith.addf " + a[2] + ", " + m + " : f32");
                   });
  }

  Val elementwise2(const Val &a, const Val &b, const std::string &opName) {
    int rank = int(a.dims.size());
    Val init = empty(a.dims);
    return generic(rank, parallel(rank),
                   {{a, identity(rank)}, {b, identity(rank)}}, init,
                   identity(rank), [&](auto x) {
                     return op(opName + " " + x[0] + ", " + x[1] + " : f32");
                   });
  }

  /// x / sqrt(mean(x^2) + eps) * g over the last dim of [n, dim].
  Val rmsnorm(const Val &x, const Val &g) {
    int64_t rows = x.dims[0];
    Val init = filled({rows}, zero);
    Val ss = generic(2, {"parallel", "reduction"}, {{x, dimsOf({0, 1})}}, init,
                     dimsOf({0}), [&](auto a) {
                       std::string sq =
                           op("arith.mulf " + a[0] + ", " + a[0] + " : f32");
                       return op("arith.addf " + a[1] + ", " + sq + " : f32");
                     });
    std::string invDim = cst(1.0f / float(c.dim));
    std::string eps = cst(c.normEps);
    Val outInit = empty(x.dims);
    return generic(2, parallel(2),
                   {{x, dimsOf({0, 1})}, {ss, dimsOf({0})}, {g, dimsOf({1})}},
                   outInit, dimsOf({0, 1}), [&](auto a) {
                     std::string mean =
                         op("arith.mulf " + a[1] + ", " + invDim + " : f32");
                     std::string s =
                         op("arith.addf " + mean + ", " + eps + " : f32");
                     std::string r = op("math.rsqrt " + s + " : f32");
                     std::string y =
                         op("arith.mulf " + a[0] + ", " + r + " : f32");
                     std::string gain = widened(a[2], g.el);
                     return op("arith.mulf " + y + ", " + gain + " : f32");
                   });
  }

  /// RoPE on [n, heads, head_dim] in f32, as llama2.c computes it: pair i
  /// (channels (2i, 2i+1) when interleaved, (i, i + head_dim/2) when half)
  /// rotated by (pos + token) * f_i. Unscaled, f_i = 1 / theta^(2i/head_dim)
  /// is computed in the graph; with a rope_scaling it comes from a constant
  /// table (model::ropeInverseFrequencies).
  Val rope(const Val &x) {
    int64_t heads = x.dims[1], hd = c.headDim();
    bool half = c.ropePairs == model::RopePairs::Half;
    // Pairs as [n, heads, hd/2, 2] (interleaved) or [n, heads, 2, hd/2].
    Val pairs = reshape(x,
                        half ? std::vector<int64_t>{n, heads, 2, hd / 2}
                             : std::vector<int64_t>{n, heads, hd / 2, 2},
                        "[[0], [1], [2, 3]]", true);
    std::vector<std::string> first = {"d0", "d1", "d2", "0"},
                             second = {"d0", "d1", "d2", "1"};
    if (half)
      first = {"d0", "d1", "0", "d3"}, second = {"d0", "d1", "1", "d3"};
    const char *pairDim = half ? "3" : "2", *memberDim = half ? "2" : "3";
    bool scaled = c.ropeScaling.kind != model::RopeScaling::Kind::None;
    std::string theta, invHd, two, table;
    std::string tableType = tensorType({hd / 2}, "f32");
    if (scaled) {
      std::vector<std::string> values;
      for (double f : model::ropeInverseFrequencies(c))
        values.push_back(f32Literal(float(f)));
      table = fresh();
      out << "    " << table << " = arith.constant dense<["
          << join(values, ", ") << "]> : " << tableType << "\n";
    } else {
      theta = cst(c.ropeTheta);
      invHd = cst(1.0f / float(hd));
      two = cst(2.0f);
    }
    Val init = empty(pairs.dims);
    Val rotated = generic(
        4, parallel(4), {{pairs, first}, {pairs, second}}, init, identity(4),
        [&](auto a) {
          std::string t = op("linalg.index 0 : index");
          std::string i =
              op(std::string("linalg.index ") + pairDim + " : index");
          std::string j =
              op(std::string("linalg.index ") + memberDim + " : index");
          std::string p = op("arith.addi %pos, " + t + " : index");
          std::string pi = op("arith.index_cast " + p + " : index to i64");
          std::string pf = op("arith.sitofp " + pi + " : i64 to f32");
          std::string freq;
          if (scaled) {
            std::string inv =
                op("tensor.extract " + table + "[" + i + "] : " + tableType);
            freq = op("arith.mulf " + pf + ", " + inv + " : f32");
          } else {
            std::string ii = op("arith.index_cast " + i + " : index to i64");
            std::string iff = op("arith.sitofp " + ii + " : i64 to f32");
            std::string twoI = op("arith.mulf " + iff + ", " + two + " : f32");
            std::string expo =
                op("arith.mulf " + twoI + ", " + invHd + " : f32");
            std::string denom =
                op("math.powf " + theta + ", " + expo + " : f32");
            freq = op("arith.divf " + pf + ", " + denom + " : f32");
          }
          std::string cosv = op("math.cos " + freq + " : f32");
          std::string sinv = op("math.sin " + freq + " : f32");
          std::string x0c = op("arith.mulf " + a[0] + ", " + cosv + " : f32");
          std::string x1s = op("arith.mulf " + a[1] + ", " + sinv + " : f32");
          std::string x0s = op("arith.mulf " + a[0] + ", " + sinv + " : f32");
          std::string x1c = op("arith.mulf " + a[1] + ", " + cosv + " : f32");
          std::string even = op("arith.subf " + x0c + ", " + x1s + " : f32");
          std::string odd = op("arith.addf " + x0s + ", " + x1c + " : f32");
          std::string zeroIdx = op("arith.constant 0 : index");
          std::string isEven =
              op("arith.cmpi eq, " + j + ", " + zeroIdx + " : index");
          return op("arith.select " + isEven + ", " + even + ", " + odd +
                    " : f32");
        });
    return reshape(rotated, x.dims, "[[0], [1], [2, 3]]", false);
  }

  /// x [n, out] + b [out] (b widened to f32 when the weights are f16/bf16).
  Val addBias(const Val &x, const Val &b) {
    Val init = empty(x.dims);
    return generic(2, parallel(2), {{x, dimsOf({0, 1})}, {b, dimsOf({1})}},
                   init, identity(2), [&](auto a) {
                     return op("arith.addf " + a[0] + ", " +
                               widened(a[1], b.el) + " : f32");
                   });
  }

  /// f32 <-> the cache's element type, elementwise.
  Val convert(const Val &x, const std::string &to) {
    if (x.el == to)
      return x;
    int rank = int(x.dims.size());
    Val init = empty(x.dims, to);
    return generic(rank, parallel(rank), {{x, identity(rank)}}, init,
                   identity(rank), [&](auto a) {
                     std::string opName =
                         to == "f16" ? "arith.truncf " : "arith.extf ";
                     return op(opName + a[0] + " : " + x.el + " to " + to);
                   });
  }

  /// Writes [n, kv_heads, head_dim] at `pos` of layer `layer`'s cache
  /// tensor and reads back positions 0 .. pos + n - 1, as f32.
  Val writeAndRead(std::string &cache, int64_t layer, const Val &kv) {
    int64_t kvh = c.kvHeads, hd = c.headDim();
    Val stored = convert(kv, cacheEl());
    std::string cacheType =
        perLayer() ? tensorType({context, kvh, hd}, cacheEl())
                   : tensorType({c.layers, context, kvh, hd}, cacheEl());
    std::string written = fresh();
    if (perLayer())
      out << "    " << written << " = tensor.insert_slice " << stored.name
          << " into " << cache << "[%pos, 0, 0] [" << n << ", " << kvh << ", "
          << hd << "] [1, 1, 1] : " << stored.type() << " into " << cacheType
          << "\n";
    else
      out << "    " << written << " = tensor.insert_slice " << stored.name
          << " into " << cache << "[" << layer << ", %pos, 0, 0] [1, " << n
          << ", " << kvh << ", " << hd << "] [1, 1, 1, 1] : " << stored.type()
          << " into " << cacheType << "\n";
    cache = written;
    Val read{fresh(), {-1, kvh, hd}, cacheEl()};
    if (perLayer())
      out << "    " << read.name << " = tensor.extract_slice " << written
          << "[0, 0, 0] [" << dynLen << ", " << kvh << ", " << hd
          << "] [1, 1, 1] : " << cacheType << " to " << read.type() << "\n";
    else
      out << "    " << read.name << " = tensor.extract_slice " << written << "["
          << layer << ", 0, 0, 0] [1, " << dynLen << ", " << kvh << ", " << hd
          << "] [1, 1, 1, 1] : " << cacheType << " to " << read.type() << "\n";
    return convert(read, "f32");
  }

  /// Causal attention of q [n, heads, hd] over k, v [len, kv_heads, hd];
  /// returns [n, heads * hd].
  Val attention(const Val &q, const Val &k, const Val &v) {
    int64_t heads = c.heads, kvh = c.kvHeads, hd = c.headDim();
    int64_t group = heads / kvh;
    bool reshapeForm = group > 1 && o.gqa == ImportOptions::Gqa::Reshape;
    // Scores: [kvh, group, n, len] (reshape) or [heads, n, len].
    Val scores;
    std::vector<int64_t> sdims;
    if (reshapeForm) {
      Val q4 = reshape(q, {n, kvh, group, hd}, "[[0], [1, 2], [3]]", true);
      sdims = {kvh, group, n, -1};
      Val init = filled(sdims, zero);
      scores = generic(
          5, {"parallel", "parallel", "parallel", "parallel", "reduction"},
          {{q4, dimsOf({2, 0, 1, 4})}, {k, dimsOf({3, 0, 4})}}, init,
          dimsOf({0, 1, 2, 3}), [&](auto a) {
            std::string m = op("arith.mulf " + a[0] + ", " + a[1] + " : f32");
            return op("arith.addf " + a[2] + ", " + m + " : f32");
          });
    } else {
      Val kx = repeatKv(k);
      sdims = {heads, n, -1};
      Val init = filled(sdims, zero);
      scores = generic(4, {"parallel", "parallel", "parallel", "reduction"},
                       {{q, dimsOf({1, 0, 3})}, {kx, dimsOf({2, 0, 3})}}, init,
                       dimsOf({0, 1, 2}), [&](auto a) {
                         std::string m =
                             op("arith.mulf " + a[0] + ", " + a[1] + " : f32");
                         return op("arith.addf " + a[2] + ", " + m + " : f32");
                       });
    }
    int rank = int(sdims.size());
    int nDim = rank - 2, tDim = rank - 1;
    std::string scale = cst(1.0f / std::sqrt(float(hd)));
    Val scaledInit = empty(sdims);
    Val x = generic(rank, parallel(rank), {{scores, identity(rank)}},
                    scaledInit, identity(rank), [&](auto a) {
                      return op("arith.mulf " + a[0] + ", " + scale + " : f32");
                    });
    if (n > 1) {
      // Causal mask: token t of the new ones (at pos + t) sees positions
      // up to pos + t.
      std::string ninf = cst(-INFINITY);
      Val maskInit = empty(sdims);
      x = generic(rank, parallel(rank), {{x, identity(rank)}}, maskInit,
                  identity(rank), [&](auto a) {
                    std::string t =
                        op("linalg.index " + std::to_string(nDim) + " : index");
                    std::string j =
                        op("linalg.index " + std::to_string(tDim) + " : index");
                    std::string limit =
                        op("arith.addi %pos, " + t + " : index");
                    std::string future =
                        op("arith.cmpi ugt, " + j + ", " + limit + " : index");
                    return op("arith.select " + future + ", " + ninf + ", " +
                              a[0] + " : f32");
                  });
    }
    Val probs = softmax(x, tDim);
    // Weighted sum of values, written as [n, heads..., hd].
    Val result;
    if (reshapeForm) {
      Val init = filled({n, kvh, group, hd}, zero);
      result = generic(
          5, {"parallel", "parallel", "parallel", "parallel", "reduction"},
          {{probs, dimsOf({1, 2, 0, 4})}, {v, dimsOf({4, 1, 3})}}, init,
          dimsOf({0, 1, 2, 3}), [&](auto a) {
            std::string m = op("arith.mulf " + a[0] + ", " + a[1] + " : f32");
            return op("arith.addf " + a[2] + ", " + m + " : f32");
          });
      result = reshape(result, {n, heads, hd}, "[[0], [1, 2], [3]]", false);
    } else {
      Val vx = repeatKv(v);
      Val init = filled({n, heads, hd}, zero);
      result = generic(4, {"parallel", "parallel", "parallel", "reduction"},
                       {{probs, dimsOf({1, 0, 3})}, {vx, dimsOf({3, 1, 2})}},
                       init, dimsOf({0, 1, 2}), [&](auto a) {
                         std::string m =
                             op("arith.mulf " + a[0] + ", " + a[1] + " : f32");
                         return op("arith.addf " + a[2] + ", " + m + " : f32");
                       });
    }
    return reshape(result, {n, heads * hd}, "[[0], [1, 2]]", false);
  }

  /// [len, kv_heads, hd] -> [len, heads, hd], each KV head repeated for its
  /// group of query heads (Hugging Face's repeat_kv).
  Val repeatKv(const Val &kv) {
    int64_t kvh = c.kvHeads, group = c.heads / c.kvHeads, hd = c.headDim();
    if (group == 1)
      return kv;
    Val init = empty({-1, kvh, group, hd});
    Val b{fresh(), init.dims};
    out << "    " << b.name << " = linalg.broadcast ins(" << kv.name << " : "
        << kv.type() << ") outs(" << init.name << " : " << init.type()
        << ") dimensions = [2]\n";
    return reshape(b, {-1, c.heads, hd}, "[[0], [1, 2], [3]]", false);
  }

  Val softmax(const Val &x, int dim) {
    int rank = int(x.dims.size());
    if (!o.expandSoftmax) {
      Val init = empty(x.dims);
      Val r{fresh(), x.dims};
      out << "    " << r.name << " = linalg.softmax dimension(" << dim
          << ") ins(" << x.name << " : " << x.type() << ") outs(" << init.name
          << " : " << init.type() << ") -> " << r.type() << "\n";
      return r;
    }
    std::vector<int64_t> rdims(x.dims.begin(), x.dims.end() - 1);
    std::vector<std::string> its = parallel(rank - 1);
    its.push_back("reduction");
    std::vector<std::string> reduced = identity(rank - 1);
    Val maxInit = filled(rdims, cst(-INFINITY));
    Val m = generic(
        rank, its, {{x, identity(rank)}}, maxInit, reduced, [&](auto a) {
          return op("arith.maximumf " + a[0] + ", " + a[1] + " : f32");
        });
    Val expInit = empty(x.dims);
    Val e = generic(rank, parallel(rank), {{x, identity(rank)}, {m, reduced}},
                    expInit, identity(rank), [&](auto a) {
                      std::string d =
                          op("arith.subf " + a[0] + ", " + a[1] + " : f32");
                      return op("math.exp " + d + " : f32");
                    });
    Val sumInit = filled(rdims, zero);
    Val s = generic(rank, its, {{e, identity(rank)}}, sumInit, reduced,
                    [&](auto a) {
                      return op("arith.addf " + a[0] + ", " + a[1] + " : f32");
                    });
    Val divInit = empty(x.dims);
    return generic(rank, parallel(rank), {{e, identity(rank)}, {s, reduced}},
                   divInit, identity(rank), [&](auto a) {
                     return op("arith.divf " + a[0] + ", " + a[1] + " : f32");
                   });
  }

  std::string zero;

  void entryPoint(const std::string &name, int64_t tokens) {
    n = tokens;
    int64_t dim = c.dim, hd = c.headDim(), kvh = c.kvHeads;
    std::vector<std::string> params = {"%weights: " +
                                       tensorType({layout.total}, weightEl())};
    std::vector<std::string> caches, cacheTypes;
    if (perLayer()) {
      for (int l = 0; l < c.layers; ++l)
        for (const char *kv : {"k", "v"}) {
          caches.push_back("%" + std::string(kv) + "cache" + std::to_string(l));
          cacheTypes.push_back(tensorType({context, kvh, hd}, cacheEl()));
        }
    } else {
      caches = {"%kcache", "%vcache"};
      cacheTypes.assign(2, tensorType({c.layers, context, kvh, hd}, cacheEl()));
    }
    for (size_t i = 0; i < caches.size(); ++i)
      params.push_back(caches[i] + ": " + cacheTypes[i]);
    params.push_back("%tokens: " + tensorType({n}, "i32"));
    params.push_back("%pos: index");
    std::vector<std::string> results = {tensorType({c.vocab}, "f32")};
    results.insert(results.end(), cacheTypes.begin(), cacheTypes.end());
    out << "  // "
        << (n > 1 ? "Prefill: " + std::to_string(n) + " tokens"
                  : std::string("Decode: one token"))
        << " at positions pos.., attending causally over 0 .. pos + " << n - 1
        << "; returns the logits of the last token and the caches.\n";
    out << "  func.func @" << name << "(" << join(params, ", ") << ") -> ("
        << join(results, ", ") << ") attributes {llvm.emit_c_interface} {\n";
    zero = cst(0.0f);
    std::string cn = idx(n);
    dynLen = fresh();
    out << "    " << dynLen << " = arith.addi %pos, " << cn << " : index\n";

    // Embedding rows of the tokens.
    Val table = weight(layout.embedding, c.vocab, dim);
    Val tokenIds{"%tokens", {n}, "i32"};
    Val xInit = empty({n, dim});
    Val x = generic(2, parallel(2), {{tokenIds, dimsOf({0})}}, xInit,
                    dimsOf({0, 1}), [&](auto a) {
                      std::string row =
                          op("arith.index_cast " + a[0] + " : i32 to index");
                      std::string col = op("linalg.index 1 : index");
                      std::string e = op("tensor.extract " + table.name + "[" +
                                         row + ", " + col + "] : " +
                                         table.type());
                      return widened(e, table.el);
                    });

    std::vector<std::string> live = caches;
    for (int64_t l = 0; l < c.layers; ++l) {
      out << "    // layer " << l << "\n";
      Val h = rmsnorm(x, weight(layout.attnNorm + l * dim, 1, dim));
      int64_t qDim = c.qDim(), kvDim = c.kvDim();
      Val q = project(h, weight(layout.wq + l * qDim * dim, qDim, dim));
      Val k = project(h, weight(layout.wk + l * kvDim * dim, kvDim, dim));
      Val v = project(h, weight(layout.wv + l * kvDim * dim, kvDim, dim));
      if (c.qkvBias) {
        q = addBias(q, weight(layout.bq + l * qDim, 1, qDim));
        k = addBias(k, weight(layout.bk + l * kvDim, 1, kvDim));
        v = addBias(v, weight(layout.bv + l * kvDim, 1, kvDim));
      }
      q = rope(reshape(q, {n, c.heads, hd}, "[[0], [1, 2]]", true));
      k = rope(reshape(k, {n, kvh, hd}, "[[0], [1, 2]]", true));
      Val v3 = reshape(v, {n, kvh, hd}, "[[0], [1, 2]]", true);
      std::string &kc = perLayer() ? live[2 * l] : live[0];
      Val keys = writeAndRead(kc, l, k);
      std::string &vc = perLayer() ? live[2 * l + 1] : live[1];
      Val values = writeAndRead(vc, l, v3);
      Val att = attention(q, keys, values);
      Val o = project(att, weight(layout.wo + l * dim * qDim, dim, qDim));
      if (c.outBias)
        o = addBias(o, weight(layout.bo + l * dim, 1, dim));
      x = elementwise2(x, o, "arith.addf");
      // Feed-forward: w2 (silu(w1 h) * w3 h).
      Val h2 = rmsnorm(x, weight(layout.ffnNorm + l * dim, 1, dim));
      int64_t hid = c.hiddenDim;
      Val a = project(h2, weight(layout.w1 + l * hid * dim, hid, dim));
      Val b = project(h2, weight(layout.w3 + l * hid * dim, hid, dim));
      std::string one = cst(1.0f);
      Val gInit = empty({n, hid});
      Val gated = generic(
          2, parallel(2), {{a, identity(2)}, {b, identity(2)}}, gInit,
          identity(2), [&](auto s) {
            std::string neg = op("arith.negf " + s[0] + " : f32");
            std::string e = op("math.exp " + neg + " : f32");
            std::string d = op("arith.addf " + one + ", " + e + " : f32");
            std::string silu = op("arith.divf " + s[0] + ", " + d + " : f32");
            return op("arith.mulf " + silu + ", " + s[1] + " : f32");
          });
      Val f = project(gated, weight(layout.w2 + l * dim * hid, dim, hid));
      x = elementwise2(x, f, "arith.addf");
    }
    // Logits of the last token only.
    Val last{fresh(), {1, dim}};
    out << "    " << last.name << " = tensor.extract_slice " << x.name << "["
        << n - 1 << ", 0] [1, " << dim << "] [1, 1] : " << x.type() << " to "
        << last.type() << "\n";
    Val hf = rmsnorm(last, weight(layout.finalNorm, 1, dim));
    Val logits = project(hf, weight(layout.classifier, c.vocab, dim));
    Val flat = reshape(logits, {c.vocab}, "[[0, 1]]", false);
    std::vector<std::string> rets = {flat.name}, retTypes = {flat.type()};
    rets.insert(rets.end(), live.begin(), live.end());
    retTypes.insert(retTypes.end(), cacheTypes.begin(), cacheTypes.end());
    out << "    return " << join(rets, ", ") << " : " << join(retTypes, ", ")
        << "\n  }\n";
  }
};

} // namespace

const char *weightTypeName(ImportOptions::WeightType type) {
  switch (type) {
  case ImportOptions::WeightType::F16:
    return "f16";
  case ImportOptions::WeightType::BF16:
    return "bf16";
  default:
    return "f32";
  }
}

ImportOptions::WeightType
storedWeightType(const model::Llama2cCheckpoint &c) {
  switch (c.storage()) {
  case model::Llama2cCheckpoint::Storage::F16:
    return ImportOptions::WeightType::F16;
  case model::Llama2cCheckpoint::Storage::BF16:
    return ImportOptions::WeightType::BF16;
  default:
    return ImportOptions::WeightType::F32;
  }
}

std::optional<ImportOptions::WeightType>
parseWeightType(const std::string &name) {
  for (auto t : {ImportOptions::WeightType::F32, ImportOptions::WeightType::F16,
                 ImportOptions::WeightType::BF16})
    if (name == weightTypeName(t))
      return t;
  return std::nullopt;
}

std::string validateImportOptions(const Llama2cConfig &config,
                                  const ImportOptions &options) {
  if (options.contextLength < 1 || options.contextLength > config.seqLen)
    return "context length " + std::to_string(options.contextLength) +
           " is not in [1, seq_len " + std::to_string(config.seqLen) + "]";
  int64_t context = options.contextLength;
  if (options.prefillTokens < 0 || options.prefillTokens > context)
    return "prefill tokens " + std::to_string(options.prefillTokens) +
           " is not in [0, context " + std::to_string(context) + "]";
  return "";
}

std::string emitLlama2cModule(const Llama2cConfig &config,
                              const ImportOptions &options) {
  return Emitter(config, options).module();
}

void registerImportDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::linalg::LinalgDialect, mlir::math::MathDialect,
                  mlir::tensor::TensorDialect>();
}

mlir::OwningOpRef<mlir::ModuleOp> importLlama2c(mlir::MLIRContext &context,
                                                const Llama2cConfig &config,
                                                const ImportOptions &options) {
  mlir::DialectRegistry registry;
  registerImportDialects(registry);
  context.appendDialectRegistry(registry);
  std::string text = emitLlama2cModule(config, options);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context, "kvq-import");
  if (!module || mlir::failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

} // namespace kvq::import
