#include "event/batch_wait.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace peregrine::event {
namespace {

TEST(BatchWaitTest, AnIdleWorkerWakesAtTheFirstEvent) {
  EXPECT_FALSE(should_batch_wait(0, 100));
  EXPECT_FALSE(should_batch_wait(1, 100));
}

TEST(BatchWaitTest, ABusyWorkerWithManyConnectionsHolds) {
  EXPECT_TRUE(should_batch_wait(kMinBatchWait, 100));
  EXPECT_TRUE(should_batch_wait(64, 100));
  EXPECT_TRUE(should_batch_wait(500, 1000));
}

// With few connections outside the batch, those are as likely waiting for the replies just sent:
// holding would make the two CPUs take turns.
TEST(BatchWaitTest, NoneWithFewConnectionsOutsideTheBatch) {
  EXPECT_FALSE(should_batch_wait(10, 10));
  EXPECT_FALSE(should_batch_wait(10, 5));  // a batch with several events per descriptor
  EXPECT_FALSE(should_batch_wait(90, 100));
  EXPECT_FALSE(should_batch_wait(2, 2 + kMinOthersForBatchWait - 1));
  EXPECT_TRUE(should_batch_wait(2, 2 + kMinOthersForBatchWait));
}

TEST(BatchWaitRuleTest, HoldsWhileHoldingGathersBatches) {
  BatchWaitRule rule;
  rule.reported(4, false);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(rule.hold(100));
    rule.reported(3, true);
  }
  rule.reported(1, false);
  EXPECT_FALSE(rule.hold(100));  // the rule still applies
}

// Each hold that gathered no batch doubles the eligible waits that skip holding, up to 64.
TEST(BatchWaitRuleTest, HoldsThatGatherNothingBackOff) {
  BatchWaitRule rule;
  rule.reported(4, false);
  ASSERT_TRUE(rule.hold(100));
  unsigned expected = 1;
  for (int i = 0; i < 9; ++i) {
    rule.reported(1, true);  // the hold gathered no batch
    unsigned skipped = 0;
    for (;;) {
      rule.reported(4, false);  // a batch, not held: the next wait may hold
      if (rule.hold(100)) break;
      ++skipped;
    }
    EXPECT_EQ(skipped, expected) << i;
    expected = std::min(expected * 2, 64u);
  }
  rule.reported(2, true);  // a batch: start over
  EXPECT_TRUE(rule.hold(100));
}

TEST(BatchWaitRuleTest, WaitsTheRuleRefusesDoNotCountAsSkips) {
  BatchWaitRule rule;
  rule.reported(4, false);
  ASSERT_TRUE(rule.hold(100));
  rule.reported(0, true);
  EXPECT_FALSE(rule.hold(100));  // not eligible: the skip is still due
  rule.reported(4, false);
  EXPECT_FALSE(rule.hold(100));  // the skip
  rule.reported(4, false);
  EXPECT_TRUE(rule.hold(100));
}

}  // namespace
}  // namespace peregrine::event
