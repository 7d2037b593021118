//===- group_weights_test.cpp - Fused KIVI value headers ------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// AttendOps::groupWeightsHalf of every table this CPU runs, where
// selectAttendOps gives one (the cache's shape), for one query vector per KV
// head and for several (GQA, batched steps), against the portable path (fp16
// headers converted, then groupWeightsPortable), bit for bit.
//
//===----------------------------------------------------------------------===//
#include "fp16.h"
#include "group_weights.h"
#include "kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace kvq;
using kvqtest::Rng;

namespace {

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return false;
  return a.empty() ||
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GroupWeights, FusedHeadersGiveThePortableBitsOnEveryTable) {
  std::vector<const KernelTable *> tables = {&referenceKernels()};
  for (const KernelTable *k : simdKernelVariants())
    tables.push_back(k);
  int fused = 0;
  Rng rng(5);
  for (int64_t heads : {int64_t{8}, int64_t{2}, int64_t{3}})
    for (int64_t perHead : {1, 2, 4, 8, 16, 32})
      for (int64_t nq : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}})
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{128}}) {
          const int64_t perRow = heads * perHead, K = heads * nq;
          const int64_t chunk = n + 3; // score rows, some not coded
          std::vector<float> scores(static_cast<size_t>(chunk * K));
          for (float &x : scores)
            x = static_cast<float>(rng.uniform());
          std::vector<std::vector<uint16_t>> headerData(static_cast<size_t>(n));
          std::vector<const uint16_t *> headers;
          std::vector<int64_t> rowOf;
          for (int64_t i = 0; i < n; ++i) {
            auto &h = headerData[static_cast<size_t>(i)];
            for (int64_t e = 0; e < 2 * perRow; ++e)
              h.push_back(floatToHalf(static_cast<float>(rng.normal() * 4)));
            headers.push_back(h.data());
            rowOf.push_back(i + (i % 3 == 2 ? 1 : 0) + (i > 5 ? 2 : 0));
          }
          // Portable: convert every header, then the loops.
          std::vector<float> sz(static_cast<size_t>(n * 2 * perRow));
          for (int64_t i = 0; i < n; ++i)
            for (int64_t e = 0; e < 2 * perRow; ++e)
              sz[static_cast<size_t>(i * 2 * perRow + e)] = halfToFloat(
                  headerData[static_cast<size_t>(i)][static_cast<size_t>(e)]);
          const size_t wsSize = static_cast<size_t>(n * K * perHead);
          std::vector<float> wantWs(wsSize, -3.0f);
          std::vector<float> wantZ(static_cast<size_t>(K * perHead), 0.5f);
          groupWeightsPortable(scores.data(), rowOf.data(), n, sz.data(), heads,
                               nq, perHead, wantWs.data(), wantZ.data());
          for (const KernelTable *k : tables) {
            // A cache of value groups of 8 channels, perHead to a head.
            const AttendOps ops =
                selectAttendOps(*k, AttendShape{8 * perHead, heads, 8, 2, 2});
            if (!ops.groupWeightsHalf)
              continue; // the store takes the portable path
            std::vector<float> ws(wsSize, -3.0f);
            std::vector<float> z(static_cast<size_t>(K * perHead), 0.5f);
            GroupWeightsArgs a;
            a.headers = headers.data();
            a.rowOf = rowOf.data();
            a.n = n;
            a.scores = scores.data();
            a.heads = heads;
            a.nq = nq;
            a.perHead = perHead;
            a.ws = ws.data();
            a.zsum = z.data();
            ops.groupWeightsHalf(a);
            const std::string what =
                std::string(k->name) + " heads " + std::to_string(heads) +
                " perHead " + std::to_string(perHead) + " nq " +
                std::to_string(nq) + " n " + std::to_string(n);
            ++fused;
            EXPECT_TRUE(sameBits(ws, wantWs)) << what;
            EXPECT_TRUE(sameBits(z, wantZ)) << what;
          }
        }
  // On x86 machines (AVX2 or AVX-512) the fused path must actually have run.
  const std::vector<const KernelTable *> v = simdKernelVariants();
  if (!v.empty() && (std::string(v[0]->name) == "avx512" ||
                     std::string(v[0]->name) == "avx2"))
    EXPECT_GT(fused, 0);
}

} // namespace
