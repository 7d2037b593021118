//===- kivi_plan_test.cpp - The KIVI / KIVI-Sink update planner -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// planKiviUpdate on its own, with hand-computed expectations: the window
// targets of both residual modes, which tokens become sinks (top-k of the
// norms seen so far, ties to the earlier position, decided when a token
// first leaves the window, within the budget), and that it never moves
// progress backwards. The CPU store and the Metal host execute this plan;
// the CPU-vs-Metal equality tests check that they do.
//
//===----------------------------------------------------------------------===//
#include "kivi_plan.h"

#include <gtest/gtest.h>

#include <vector>

using namespace kvq;

namespace {
kvq_config config(kvq_method method, int32_t G, int32_t R,
                  kvq_residual_mode mode, int32_t sinks) {
  kvq_config c;
  kvq_config_init(&c, method);
  c.group_size = G;
  c.residual_length = R;
  c.residual_mode = mode;
  c.n_sink_tokens = sinks;
  return c;
}

std::vector<int64_t> sinksOf(const KiviPlan &p) {
  std::vector<int64_t> out;
  for (int64_t q = p.decidedFrom; q < p.decidedTo; ++q)
    if (p.becomesSink(q))
      out.push_back(q);
  return out;
}
} // namespace

TEST(KiviPlan, SlidingWindowLeavesInWholeGroupsValuesTokenByToken) {
  kvq_config c = config(KVQ_METHOD_KIVI, 4, 8, KVQ_RESIDUAL_SLIDING, 0);
  // 21 tokens, R = 8: values of [0, 13) leave; keys leave in groups of 4
  // while at least R stay fp16: 4 * floor(13 / 4) = 12.
  KiviPlan p = planKiviUpdate(c, {}, {}, nullptr, 21);
  EXPECT_EQ(p.keyTo, 12);
  EXPECT_EQ(p.valueTo, 13);
  EXPECT_EQ(p.decidedTo, 13);
  EXPECT_EQ(p.sinks, 0);
  EXPECT_TRUE(sinksOf(p).empty());
  // Within the window nothing leaves.
  KiviPlan q = planKiviUpdate(c, {}, {}, nullptr, 8);
  EXPECT_EQ(q.keyTo, 0);
  EXPECT_EQ(q.valueTo, 0);
  EXPECT_EQ(q.decidedTo, 0);
}

TEST(KiviPlan, BlockModeFlushesRKeysAtATime) {
  kvq_config c = config(KVQ_METHOD_KIVI, 4, 8, KVQ_RESIDUAL_BLOCK, 0);
  KiviPlan p = planKiviUpdate(c, {}, {}, nullptr, 21);
  EXPECT_EQ(p.keyTo, 16); // 8 * floor(21 / 8)
  EXPECT_EQ(p.valueTo, 13);
  EXPECT_EQ(p.decidedTo, 16);
}

TEST(KiviPlan, NeverMovesProgressBackwards) {
  // A layer whose progress is ahead of the targets of its length (as after
  // some truncations) keeps it.
  kvq_config c = config(KVQ_METHOD_KIVI, 4, 8, KVQ_RESIDUAL_SLIDING, 0);
  KiviPlan p = planKiviUpdate(c, {10, 8, 9, 9, 0}, {}, nullptr, 1);
  EXPECT_EQ(p.keyTo, 8);
  EXPECT_EQ(p.valueTo, 9);
  EXPECT_EQ(p.decidedTo, 9);
  EXPECT_EQ(p.decidedFrom, 9);
}

TEST(KiviPlan, SinksAreTheTopNormsSeenSoFarWhenTheyLeave) {
  kvq_config c = config(KVQ_METHOD_KIVI_SINK, 2, 4, KVQ_RESIDUAL_SLIDING, 2);
  //                 0  1  2  3  4  5  6  7  8  9
  std::vector<float> n{1, 9, 2, 7, 3, 8, 1, 1, 1, 1};
  // 10 tokens, R = 4: [0, 6) leave; top-2 of all ten norms = {1, 5}.
  KiviPlan p = planKiviUpdate(c, {}, {}, n.data(), 10);
  EXPECT_EQ(p.decidedTo, 6);
  EXPECT_EQ(sinksOf(p), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(p.sinks, 2);
}

TEST(KiviPlan, ATokenDisplacedBeforeItLeavesIsNoSink) {
  kvq_config c = config(KVQ_METHOD_KIVI_SINK, 2, 4, KVQ_RESIDUAL_SLIDING, 1);
  // Token 0 (norm 5) is the top-1 while it sits in the window...
  std::vector<float> first{5, 1, 1};
  KiviPlan p = planKiviUpdate(c, {}, {}, first.data(), 3);
  EXPECT_EQ(p.decidedTo, 0);
  ASSERT_EQ(p.top.size(), 1u);
  EXPECT_EQ(p.top[0].second, 0);
  // ... and is displaced by token 3 (norm 6) in the update that pushes it
  // out: no sink among [0, 2), and token 3 becomes one only when it leaves.
  std::vector<float> second{6, 1, 1};
  KiviPlan q = planKiviUpdate(c, {3, 0, 0, 0, 0}, p.top, second.data(), 3);
  EXPECT_EQ(q.decidedTo, 2);
  EXPECT_TRUE(sinksOf(q).empty());
  EXPECT_EQ(q.top[0].second, 3);
  std::vector<float> third{1, 1};
  KiviPlan r = planKiviUpdate(c, {6, q.keyTo, q.valueTo, q.decidedTo, q.sinks},
                              q.top, third.data(), 2);
  EXPECT_EQ(sinksOf(r), (std::vector<int64_t>{3}));
}

TEST(KiviPlan, EqualNormsGoToTheEarlierPosition) {
  KiviTopK top;
  kiviFoldTopK(top, 1, 4.0f, 0);
  kiviFoldTopK(top, 1, 4.0f, 1); // equal: position 0 stays
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].second, 0);
  kiviFoldTopK(top, 1, 4.5f, 2);
  EXPECT_EQ(top[0].second, 2);
  // With two slots, the weakest of two equal norms is the later one.
  KiviTopK two{{3.0f, 5}, {3.0f, 2}};
  kiviFoldTopK(two, 2, 3.5f, 9);
  EXPECT_EQ(two[0], (std::pair<float, int64_t>{3.5f, 9}));
  EXPECT_EQ(two[1].second, 2);
}

TEST(KiviPlan, TheBudgetIsNeverExceeded) {
  kvq_config c = config(KVQ_METHOD_KIVI_SINK, 2, 2, KVQ_RESIDUAL_SLIDING, 1);
  // One sink already chosen (position 0); a later top-1 is no sink.
  KiviTopK top{{2.0f, 0}};
  std::vector<float> n{9, 1, 1, 1};
  KiviPlan p = planKiviUpdate(c, {2, 0, 0, 2, 1}, top, n.data(), 4);
  EXPECT_EQ(p.top[0].second, 2);
  EXPECT_TRUE(sinksOf(p).empty());
  EXPECT_EQ(p.sinks, 1);
}

TEST(KiviPlan, PlainKiviReadsNoNorms) {
  // Null norms are fine without a sink budget (the caches skip the norm
  // pass), whatever n_sink_tokens says.
  kvq_config c = config(KVQ_METHOD_KIVI, 2, 2, KVQ_RESIDUAL_SLIDING, 5);
  EXPECT_EQ(kiviSinkBudget(c), 0);
  KiviPlan p = planKiviUpdate(c, {}, {}, nullptr, 7);
  EXPECT_TRUE(p.top.empty());
  EXPECT_TRUE(sinksOf(p).empty());
}

TEST(KiviPlan, DroppedTopKPositionNeedsAFullTopK) {
  KiviTopK top{{1.0f, 3}, {2.0f, 7}};
  EXPECT_EQ(droppedTopKPosition(top, 2, 8), -1);
  EXPECT_EQ(droppedTopKPosition(top, 2, 7), 7);
  EXPECT_EQ(droppedTopKPosition(top, 3, 2), -1); // not full: recomputable
}
