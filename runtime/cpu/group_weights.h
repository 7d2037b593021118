//===- group_weights.h - Group weights of the KIVI value pass -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// KIVI values are quantized per token in groups of G channels, so a chunk's
// weighted sum needs, per coded token, each group's weight times its scale
// (the factor of the raw codes) and the weight times its zero (summed per
// group, added once per chunk).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_CPU_GROUP_WEIGHTS_H
#define KVQ_RUNTIME_CPU_GROUP_WEIGHTS_H

#include <cstdint>

namespace kvq {

/// For the coded tokens i = 0 .. n-1 in order, with w = scores + rowOf[i] *
/// heads * nq, the token's scales sc = sz + i * 2 * perRow and zeros
/// zr = sc + perRow (perRow = heads * perHead), and k = h * nq + j:
///   ws[i * heads*nq*perHead + k*perHead + g] = w[k] * sc[h*perHead + g]
///   zsum[k*perHead + g] += w[k] * zr[h*perHead + g]
/// One multiply and one add per element (no contraction), tokens in order,
/// so every ISA and AttendOps::groupWeightsHalf give the same bits.
void groupWeightsPortable(const float *scores, const int64_t *rowOf, int64_t n,
                          const float *sz, int64_t heads, int64_t nq,
                          int64_t perHead, float *ws, float *zsum);

} // namespace kvq

#endif // KVQ_RUNTIME_CPU_GROUP_WEIGHTS_H
