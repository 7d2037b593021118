//===- kvquant_plan_test.cpp - The KVQuant update planner -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// planKvquantUpdate on its own, with hand-computed expectations: prefill
// sinks and the prefill fit, frozen levels after it, refit batches of
// refit_interval tokens, and tokens waiting fp16 in between. The CPU store
// and the Metal host execute this plan; the CPU-vs-Metal equality tests
// check that they do.
//
//===----------------------------------------------------------------------===//
#include "kvquant_plan.h"

#include <gtest/gtest.h>

using namespace kvq;

namespace {
kvq_config config(int32_t sinks, int32_t refit) {
  kvq_config c;
  kvq_config_init(&c, KVQ_METHOD_KVQUANT);
  c.kvquant_n_sink = sinks;
  c.refit_interval = refit;
  return c;
}

void expectBatch(const KvquantBatch &b, int64_t from, int64_t to, bool fresh) {
  EXPECT_EQ(b.from, from);
  EXPECT_EQ(b.to, to);
  EXPECT_EQ(b.fresh, fresh);
}
} // namespace

TEST(KvquantPlan, PrefillKeepsLeadingSinksAndFitsTheRestAtOnce) {
  KvquantPlan p = planKvquantUpdate(config(4, 16), 0, 0, 0, 100);
  EXPECT_EQ(p.sinks, 4);
  EXPECT_EQ(p.first, 4);
  EXPECT_EQ(p.quantEnd, 100);
  ASSERT_EQ(p.batches.size(), 1u);
  expectBatch(p.batches[0], 4, 100, true);
  EXPECT_EQ(p.freshFits(), 1);
}

TEST(KvquantPlan, APrefillOfSinksOnlyDefersTheFit) {
  KvquantPlan p = planKvquantUpdate(config(4, 16), 0, 0, 0, 3);
  EXPECT_EQ(p.sinks, 3);
  EXPECT_EQ(p.quantEnd, 3);
  EXPECT_TRUE(p.batches.empty());
  // The next update is the first with eligible tokens: it is the prefill
  // fit, and no more sinks are taken.
  KvquantPlan q = planKvquantUpdate(config(4, 16), 3, 3, 0, 5);
  EXPECT_EQ(q.sinks, 0);
  ASSERT_EQ(q.batches.size(), 1u);
  expectBatch(q.batches[0], 3, 8, true);
}

TEST(KvquantPlan, FrozenLevelsQuantizeEveryNewTokenAtOnce) {
  KvquantPlan p = planKvquantUpdate(config(1, 0), 10, 10, 1, 3);
  EXPECT_EQ(p.sinks, 0);
  EXPECT_EQ(p.quantEnd, 13);
  ASSERT_EQ(p.batches.size(), 1u);
  expectBatch(p.batches[0], 10, 13, false);
  EXPECT_EQ(p.freshFits(), 0);
}

TEST(KvquantPlan, RefitsWaitForFullBatches) {
  kvq_config c = config(1, 4);
  // 10 tokens held, all quantized; 3 more: fewer than 4 waiting, none fit.
  KvquantPlan p = planKvquantUpdate(c, 10, 10, 1, 3);
  EXPECT_EQ(p.quantEnd, 10);
  EXPECT_TRUE(p.batches.empty());
  // 13 held, 10 quantized; 7 more: [10, 14) and [14, 18) fit, 2 wait.
  KvquantPlan q = planKvquantUpdate(c, 13, 10, 1, 7);
  EXPECT_EQ(q.quantEnd, 18);
  ASSERT_EQ(q.batches.size(), 2u);
  expectBatch(q.batches[0], 10, 14, true);
  expectBatch(q.batches[1], 14, 18, true);
  EXPECT_EQ(q.freshFits(), 2);
}
