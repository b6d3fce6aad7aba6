#include "event/batch_wait.h"

#include <gtest/gtest.h>

namespace peregrine::event {
namespace {

TEST(BatchWaitTest, SmallBatchesWakeAtTheFirstCompletion) {
  EXPECT_LE(batch_wait_size(0, 100), 1u);
  EXPECT_LE(batch_wait_size(1, 100), 1u);
  EXPECT_LE(batch_wait_size(kMinBatchWait - 1, 100), 1u);
}

TEST(BatchWaitTest, ALargeBatchAsksForAsManyAgain) {
  EXPECT_EQ(batch_wait_size(kMinBatchWait, 100), kMinBatchWait);
  EXPECT_EQ(batch_wait_size(20, 1000), 20u);
  EXPECT_EQ(batch_wait_size(500, 1000), kMaxBatchWait);
}

// Every connection was in the batch: anything more needs the clients to read their replies
// first, so the worker must not sleep waiting for it.
TEST(BatchWaitTest, NeverMoreThanTheRegistrationsOutsideTheBatch) {
  EXPECT_LE(batch_wait_size(10, 10), 1u);
  EXPECT_LE(batch_wait_size(10, 5), 1u);  // a batch with several events per descriptor
  EXPECT_EQ(batch_wait_size(10, 14), 4u);
  EXPECT_EQ(batch_wait_size(64, 100), 36u);
}

}  // namespace
}  // namespace peregrine::event
