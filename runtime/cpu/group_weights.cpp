//===- group_weights.cpp - Per-token group weights of the KIVI value pass -===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The portable loops behind groupWeightsPortable (group_weights.h).
//
//===----------------------------------------------------------------------===//
#include "group_weights.h"

namespace {

/// Per coded token of a chunk: its group weights ws[k*PH + g] = w[k] *
/// scale[h*PH + g] and the zero-point sums zsum[k*PH + g] += w[k] *
/// zero[h*PH + g], for the K = heads * nq query vectors k = h*nq + j (PH
/// groups per head row). PH is a template parameter for the usual shapes so
/// the g loop is straight-line and the compiler vectorizes across groups;
/// each element is still one multiply and one add in token order (no
/// contraction: -ffp-contract=off), so every ISA rounds the same way.
template <int PH>
void groupWeightsFor(const float *scores, const int64_t *rowOf, int64_t n,
                     const float *sz, int64_t heads, int64_t nq,
                     int64_t perHeadRt, float *__restrict ws,
                     float *__restrict zsum) {
  const int64_t perHead = PH > 0 ? PH : perHeadRt;
  const int64_t perRow = heads * perHead, stride = heads * nq * perHead;
  for (int64_t i = 0; i < n; ++i) {
    const float *__restrict w = scores + rowOf[i] * heads * nq;
    const float *__restrict sc = sz + i * 2 * perRow;
    const float *__restrict zr = sc + perRow;
    float *__restrict wsRow = ws + i * stride;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < nq; ++j) {
        const float wj = w[h * nq + j];
        const int64_t k = (h * nq + j) * perHead;
        for (int64_t g = 0; g < perHead; ++g) {
          wsRow[k + g] = wj * sc[h * perHead + g];
          zsum[k + g] += wj * zr[h * perHead + g];
        }
      }
  }
}

} // namespace

void kvq::groupWeightsPortable(const float *scores, const int64_t *rowOf,
                               int64_t n, const float *sz, int64_t heads,
                               int64_t nq, int64_t perHead, float *ws,
                               float *zsum) {
#define KVQ_GROUP_WEIGHTS(PH)                                                  \
  groupWeightsFor<PH>(scores, rowOf, n, sz, heads, nq, perHead, ws, zsum)
  switch (perHead) {
  case 1:
    KVQ_GROUP_WEIGHTS(1);
    break;
  case 2:
    KVQ_GROUP_WEIGHTS(2);
    break;
  case 4:
    KVQ_GROUP_WEIGHTS(4);
    break;
  case 8:
    KVQ_GROUP_WEIGHTS(8);
    break;
  default:
    KVQ_GROUP_WEIGHTS(0);
    break;
  }
#undef KVQ_GROUP_WEIGHTS
}
