#include "event/batch_wait.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace peregrine::event
