//===- guard_test.cpp - The catch-all at the C ABI boundary ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "guard.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

TEST(Guard, ExceptionsBecomeStatusesWithAMessage) {
  EXPECT_EQ(kvq::guarded("e0", [] { return KVQ_OK; }), KVQ_OK);
  EXPECT_EQ(kvq::guarded("e1", []() -> kvq_status { throw std::bad_alloc(); }),
            KVQ_ERR_OUT_OF_MEMORY);
  EXPECT_STREQ(kvq_last_error(), "e1: out of memory");
  EXPECT_EQ(
      kvq::guarded("e2",
                   []() -> kvq_status { throw std::length_error("vector"); }),
      KVQ_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(kvq_last_error()).find("e2: out of memory"),
            std::string::npos);
  EXPECT_EQ(kvq::guarded(
                "e3", []() -> kvq_status { throw std::runtime_error("boom"); }),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(kvq_last_error(), "e3: internal error: boom");
  EXPECT_EQ(kvq::guarded("e4", []() -> kvq_status { throw 42; }),
            KVQ_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(kvq_last_error(), "e4: internal error");
}

} // namespace
