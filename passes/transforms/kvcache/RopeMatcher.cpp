//===- RopeMatcher.cpp - prove that a cached key is RoPE(x) ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The interpreter evaluates one element at a time, on demand, in double:
// what it cannot evaluate (a value that is neither the candidate x, a
// constant, nor the write position) makes the match fail, so a rotation
// whose angle depends on anything but pos + t is never taken for a RoPE.
//
//===----------------------------------------------------------------------===//
#include "passes/transforms/kvcache/RopeMatcher.h"
#include "passes/transforms/kvcache/ElementEvaluator.h"

#include "kvq/config_limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::kvq;

namespace {

constexpr const char *kOtherArgument =
    "the rotation depends on a function argument other than the write "
    "position";

/// A deterministic probe input in [-1, 1) for element idx.
double probe(ArrayRef<int64_t> idx, uint64_t seed) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ull;
  for (int64_t i : idx)
    h = (h ^ static_cast<uint64_t>(i)) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) / 4503599627370496.0 - 1.0;
}

/// The tensors of the key's shape in front of it, nearest first.
SmallVector<Value> candidates(Value key) {
  auto type = cast<RankedTensorType>(key.getType());
  llvm::SetVector<Value> seen;
  SmallVector<Value> found, queue = {key};
  for (size_t i = 0; i < queue.size() && seen.size() < 64; ++i) {
    Operation *op = queue[i].getDefiningOp();
    if (!op ||
        !isa<linalg::GenericOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             arith::TruncFOp, arith::ExtFOp>(op))
      continue;
    SmallVector<Value> ins;
    if (auto g = dyn_cast<linalg::GenericOp>(op))
      llvm::append_range(ins, g.getDpsInputs());
    else
      ins.push_back(op->getOperand(0));
    for (Value in : ins) {
      if (!seen.insert(in))
        continue;
      queue.push_back(in);
      auto t = dyn_cast<RankedTensorType>(in.getType());
      if (t && t.getShape() == type.getShape() &&
          isa<FloatType>(t.getElementType()))
        found.push_back(in);
    }
  }
  return found;
}

/// RoPE of probe x at (t, h, c), in double.
double ropeOf(uint64_t seed, int64_t t, int64_t h, int64_t c, int64_t d,
              double position, double theta, RopeStyle style) {
  const bool inter = style == RopeStyle::Interleaved;
  const int64_t i = inter ? c / 2 : c % (d / 2);
  const int64_t a = inter ? 2 * i : i, b = inter ? 2 * i + 1 : i + d / 2;
  const double angle = position * std::pow(theta, -2.0 * i / d);
  const double x = probe({t, h, a}, seed), y = probe({t, h, b}, seed);
  return c == a ? x * std::cos(angle) - y * std::sin(angle)
                : x * std::sin(angle) + y * std::cos(angle);
}

} // namespace

FailureOr<RopeMatch> mlir::kvq::matchRope(Value key, Value pos, int64_t context,
                                          std::string &why, Location &where) {
  auto type = cast<RankedTensorType>(key.getType());
  if (!type.hasStaticShape() || type.getRank() != 3) {
    why = "the key has a dynamic shape";
    return failure();
  }
  const int64_t n = type.getDimSize(0), heads = type.getDimSize(1),
                d = type.getDimSize(2);
  if (d % 2 != 0 || d < 4) {
    why = "head_dim " + std::to_string(d) + " has no channel pairs to rotate";
    return failure();
  }
  SmallVector<Value> xs = candidates(key);
  if (xs.empty()) {
    why = "no rotation found in front of the key";
    return failure();
  }
  for (Value x : xs) {
    for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::Half}) {
      // Pair 1 of token 0 at position 1 turns by theta^(-2/d): a unit
      // vector on its first channel comes out as (cos, sin) of that angle.
      const bool inter = style == RopeStyle::Interleaved;
      const int64_t a = inter ? 2 : 1, b = inter ? 3 : 1 + d / 2;
      ElementEvaluator unit(
          x,
          [&](ArrayRef<int64_t> i) -> std::optional<double> {
            return i[0] == 0 && i[1] == 0 && i[2] == a ? 1.0 : 0.0;
          },
          pos, /*posValue=*/1, kOtherArgument);
      auto ca = unit.element(key, {0, 0, a});
      auto sb = ca ? unit.element(key, {0, 0, b}) : std::nullopt;
      if (!ca || !sb) {
        why = unit.why();
        where = unit.where();
        break; // the same op stops the other style too
      }
      const double angle = std::atan2(*sb, *ca);
      if (!(angle > 0.0 && angle < 1.0) ||
          std::fabs(std::hypot(*ca, *sb) - 1.0) > 1e-3) {
        why = "the key is not a rotation of channel pairs of any candidate "
              "pre-rotation value";
        if (Operation *op = key.getDefiningOp())
          where = op->getLoc();
        continue;
      }
      double theta = std::pow(angle, -0.5 * static_cast<double>(d));
      // Snap to 6 significant digits: the graph computes in f32.
      const double scale =
          std::pow(10.0, 5 - static_cast<int>(std::floor(std::log10(theta))));
      theta = std::nearbyint(theta * scale) / scale;
      if (const char *rule = ::kvq::ropeRule(theta, d)) {
        why = std::string("the rotation's base ") + std::to_string(theta) +
              " breaks the runtime's rule: " + rule;
        if (Operation *op = key.getDefiningOp())
          where = op->getLoc();
        continue;
      }
      // Every channel of the first and last token and head, on random
      // input, at several write positions.
      bool ok = true;
      // Write positions: the first, an early one, the last the context
      // allows (constant tables cover exactly the context).
      const int64_t last = std::max<int64_t>(context - n, 0);
      for (int64_t p : {int64_t{0}, std::min<int64_t>(5, last), last}) {
        for (uint64_t seed : {1u, 2u}) {
          ElementEvaluator e(
              x,
              [&](ArrayRef<int64_t> i) -> std::optional<double> {
                return probe(i, seed);
              },
              pos, p, kOtherArgument);
          for (int64_t t : {int64_t{0}, n - 1})
            for (int64_t h : {int64_t{0}, heads - 1})
              for (int64_t c = 0; c < d && ok; ++c) {
                auto got = e.element(key, {t, h, c});
                double want =
                    ropeOf(seed, t, h, c, d, double(p + t), theta, style);
                if (!got) {
                  why = e.why();
                  where = e.where();
                  ok = false;
                } else if (std::fabs(*got - want) >
                           1e-3 * (1 + std::fabs(want))) {
                  why = "key channel " + std::to_string(c) + " at position " +
                        std::to_string(p + t) + " is " + std::to_string(*got) +
                        ", a RoPE would give " + std::to_string(want);
                  ok = false;
                }
              }
          if (!ok)
            break;
        }
        if (!ok)
          break;
      }
      if (ok)
        return RopeMatch{x, theta, style};
    }
  }
  return failure();
}
