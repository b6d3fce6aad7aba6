#include "server/app_worker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peregrine::server {
namespace {

using std::chrono::milliseconds;

class AppWorkerTest : public ::testing::Test {
 protected:
  AppWorkerTest() { clock_.monotonic_ms = 1000; }
  void advance(int64_t ms) {
    clock_.monotonic_ms += ms;
    worker_.run(clock_.monotonic_ms);
  }
  Clock clock_;
  AppWorker worker_{nullptr, 0, 1, clock_};
  std::vector<std::string> log_;
};

TEST_F(AppWorkerTest, NothingScheduled) {
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), -1);
}

TEST_F(AppWorkerTest, OnceRunsAtItsDeadline) {
  worker_.after(milliseconds(50), [this] { log_.push_back("a"); });
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), 50);
  advance(49);
  EXPECT_TRUE(log_.empty());
  advance(1);
  EXPECT_EQ(log_, std::vector<std::string>{"a"});
  advance(100);
  EXPECT_EQ(log_.size(), 1u);
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), -1);
}

TEST_F(AppWorkerTest, OrderByDeadlineThenCreation) {
  worker_.after(milliseconds(20), [this] { log_.push_back("b"); });
  worker_.after(milliseconds(10), [this] { log_.push_back("a"); });
  worker_.after(milliseconds(20), [this] { log_.push_back("c"); });
  advance(30);
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(AppWorkerTest, ZeroDelayRunsThisTurnButNotWhatItSchedules) {
  worker_.after(milliseconds(0), [this] {
    log_.push_back("first");
    worker_.after(milliseconds(0), [this] { log_.push_back("second"); });
  });
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), 0);
  advance(0);
  EXPECT_EQ(log_, std::vector<std::string>{"first"});
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), 0);
  advance(0);
  EXPECT_EQ(log_, (std::vector<std::string>{"first", "second"}));
}

TEST_F(AppWorkerTest, RepeatingUntilItCancelsItself) {
  int runs = 0;
  AppWorker::TimerId id = 0;
  id = worker_.every(milliseconds(10), [&] {
    if (++runs == 3) {
      EXPECT_TRUE(worker_.cancel(id));
    }
  });
  for (int i = 0; i < 10; ++i) advance(10);
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(worker_.cancel(id));
}

TEST_F(AppWorkerTest, CancelBeforeItRuns) {
  auto a = worker_.after(milliseconds(10), [this] { log_.push_back("a"); });
  auto b = worker_.after(milliseconds(0), [this] { log_.push_back("b"); });
  auto c = worker_.every(milliseconds(5), [this] { log_.push_back("c"); });
  EXPECT_TRUE(worker_.cancel(a));
  EXPECT_TRUE(worker_.cancel(b));
  EXPECT_TRUE(worker_.cancel(c));
  EXPECT_FALSE(worker_.cancel(a));
  EXPECT_FALSE(worker_.cancel(12345));
  advance(100);
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(worker_.next_in(clock_.monotonic_ms), -1);
}

TEST_F(AppWorkerTest, OneRunCancelsAnotherDueInTheSameTurn) {
  AppWorker::TimerId second = 0;
  worker_.after(milliseconds(0), [&] { worker_.cancel(second); });
  second = worker_.after(milliseconds(0), [this] { log_.push_back("never"); });
  advance(0);
  EXPECT_TRUE(log_.empty());
}

TEST_F(AppWorkerTest, ThisWorkerFollowsTheScope) {
  EXPECT_EQ(this_worker(), nullptr);
  {
    AppWorker::Scope scope(&worker_);
    EXPECT_EQ(this_worker(), &worker_);
  }
  EXPECT_EQ(this_worker(), nullptr);
}

TEST_F(AppWorkerTest, PostToChecksTheWorkerNumber) {
  EXPECT_FALSE(worker_.post_to(1, [] {}));
  EXPECT_FALSE(worker_.post_to(-1, [] {}));
  EXPECT_EQ(worker_.count(), 1);
  EXPECT_EQ(worker_.id(), 0);
}

}  // namespace
}  // namespace peregrine::server
