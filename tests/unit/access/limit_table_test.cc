#include "access/limit_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace peregrine::access {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kLog = 10 * kSecond;

TEST(LimitTable, RejectModeAllowsTheBurstThenTheRate) {
  LimitTable table(1024);
  const uint64_t key = table.hash("10.0.0.1");
  const int64_t interval = kSecond / 10;  // 10 r/s
  int64_t now = 100 * kSecond;
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(table.take(key, now, interval, 5, kLog).allowed) << i;
  LimitTable::Take refused = table.take(key, now, interval, 5, kLog);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_us, interval);
  EXPECT_TRUE(refused.log);
  EXPECT_FALSE(table.take(key, now, interval, 5, kLog).log) << "logged once per interval";
  now += interval;  // one token back
  EXPECT_TRUE(table.take(key, now, interval, 5, kLog).allowed);
  EXPECT_FALSE(table.take(key, now, interval, 5, kLog).allowed);
  EXPECT_TRUE(table.take(key, now + kLog, interval, 5, kLog).allowed);
  EXPECT_TRUE(table.take(key, now + kLog, interval, 5, kLog).allowed);
}

TEST(LimitTable, LogsAgainAfterTheInterval) {
  LimitTable table(64);
  const uint64_t key = table.hash("k");
  int64_t now = kSecond;
  EXPECT_TRUE(table.take(key, now, kSecond, 0, kLog).allowed);
  EXPECT_TRUE(table.take(key, now, kSecond, 0, kLog).log);
  EXPECT_FALSE(table.take(key, now + kSecond / 2, kSecond, 0, kLog).log);
  // 10.5 s later: refused again (the first request of the new second takes the token).
  now += kLog + kSecond / 2;
  EXPECT_TRUE(table.take(key, now, kSecond, 0, kLog).allowed);
  EXPECT_TRUE(table.take(key, now, kSecond, 0, kLog).log);
}

TEST(LimitTable, WaitGrowsByOneIntervalPerEarlyRequest) {
  LimitTable table(64);
  const uint64_t key = table.hash("k");
  const int64_t interval = kSecond / 4;
  for (int i = 0; i < 4; ++i) {
    LimitTable::Take take = table.take(key, kSecond, interval, 3, kLog);
    ASSERT_TRUE(take.allowed);
    EXPECT_EQ(take.wait_us, i * interval);
  }
  EXPECT_FALSE(table.take(key, kSecond, interval, 3, kLog).allowed);
}

TEST(LimitTable, KeysAreIndependent) {
  LimitTable table(1024);
  const uint64_t a = table.hash("a"), b = table.hash("b");
  EXPECT_TRUE(table.take(a, kSecond, kSecond, 0, kLog).allowed);
  EXPECT_FALSE(table.take(a, kSecond, kSecond, 0, kLog).allowed);
  EXPECT_TRUE(table.take(b, kSecond, kSecond, 0, kLog).allowed);
}

// The memory bound: a table of 8 slots holds 8 keys (32 bytes each); a ninth evicts the key
// that has refilled the longest, which starts again with a full bucket. Nobody is refused for
// lack of room.
TEST(LimitTable, FullTableEvictsTheMostRefilledKey) {
  LimitTable table(8);
  ASSERT_EQ(table.capacity(), 8u);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 8; ++i) keys.push_back(table.hash("key" + std::to_string(i)));
  // Key 0 was last seen long ago; the others just now, each exhausted.
  EXPECT_TRUE(table.take(keys[0], kSecond, kSecond, 0, kLog).allowed);
  for (int i = 1; i < 8; ++i) {
    EXPECT_TRUE(table.take(keys[i], 50 * kSecond, kSecond, 0, kLog).allowed);
    EXPECT_FALSE(table.take(keys[i], 50 * kSecond, kSecond, 0, kLog).allowed);
  }
  for (uint64_t k : keys) EXPECT_GE(table.value_of(k), 0);
  const uint64_t newcomer = table.hash("newcomer");
  EXPECT_TRUE(table.take(newcomer, 50 * kSecond, kSecond, 0, kLog).allowed);
  EXPECT_EQ(table.value_of(keys[0]), -1) << "the idle key made room";
  for (int i = 1; i < 8; ++i) EXPECT_GE(table.value_of(keys[i]), 0) << i;
  EXPECT_FALSE(table.take(keys[1], 50 * kSecond, kSecond, 0, kLog).allowed) << "kept its state";
  // Thousands of keys through 8 slots: every newcomer still gets its first request through.
  for (int i = 0; i < 5000; ++i)
    EXPECT_TRUE(table.take(table.hash("flood" + std::to_string(i)), 50 * kSecond, kSecond, 0, kLog)
                    .allowed);
}

TEST(LimitTable, ConnectionsCountAndRelease) {
  LimitTable table(64);
  const uint64_t key = table.hash("10.0.0.1");
  LimitTable::Acquire first = table.acquire(key, 2, kSecond, kLog);
  LimitTable::Acquire second = table.acquire(key, 2, kSecond, kLog);
  ASSERT_TRUE(first.allowed && second.allowed);
  LimitTable::Acquire third = table.acquire(key, 2, kSecond, kLog);
  EXPECT_FALSE(third.allowed);
  EXPECT_TRUE(third.log);
  EXPECT_EQ(table.value_of(key), 2);
  table.release(first.slot, key);
  EXPECT_EQ(table.value_of(key), 1);
  EXPECT_TRUE(table.acquire(key, 2, kSecond, kLog).allowed);
  table.release(second.slot, key);
  table.release(second.slot, key);
  table.release(second.slot, key);
  EXPECT_EQ(table.value_of(key), 0) << "never below zero";
}

TEST(LimitTable, FullConnectionTableEvictsKeysWithoutConnectionsFirst) {
  LimitTable table(8);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 8; ++i) keys.push_back(table.hash("c" + std::to_string(i)));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(table.acquire(keys[i], 5, kSecond + i, kLog).allowed);
  auto released = table.acquire(keys[5], 5, kSecond + 20, kLog);
  table.release(released.slot, keys[5]);
  table.release(released.slot, keys[5]);  // key 5 has none open now
  EXPECT_TRUE(table.acquire(table.hash("new"), 5, 2 * kSecond, kLog).allowed);
  EXPECT_EQ(table.value_of(keys[5]), -1);
  EXPECT_EQ(table.value_of(keys[0]), 1);
}

// Several threads on one key: the CAS loop loses no update, so exactly burst + 1 pass at once.
TEST(LimitTable, ThreadsShareOneBucketExactly) {
  LimitTable table(1024);
  const uint64_t key = table.hash("shared");
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i)
        if (table.take(key, kSecond, kSecond, 99, kLog).allowed) passed.fetch_add(1);
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(passed.load(), 100);
}

}  // namespace
}  // namespace peregrine::access
