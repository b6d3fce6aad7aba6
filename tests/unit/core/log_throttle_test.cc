// Tests for the bound on repeated error lines (src/core/log_throttle.h).
#include "core/log_throttle.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine {
namespace {

constexpr int64_t kStart = 1'000'000;

// Lines written and held back over `count` calls at `now_ms`.
int allow_many(LogThrottle& throttle, int64_t now_ms, int count, uint64_t* last_suppressed) {
  int written = 0;
  for (int i = 0; i < count; ++i) {
    uint64_t suppressed = 0;
    if (throttle.allow(now_ms, &suppressed)) {
      ++written;
      *last_suppressed = suppressed;
    }
  }
  return written;
}

TEST(LogThrottle, WritesABurstAWindowAndCountsTheRest) {
  LogThrottle throttle;
  uint64_t suppressed = 99;
  EXPECT_EQ(allow_many(throttle, kStart, 25, &suppressed), 10);
  EXPECT_EQ(suppressed, 0u);  // nothing was held back before the burst's lines
  EXPECT_EQ(allow_many(throttle, kStart + 999, 5, &suppressed), 0);  // the same window
}

TEST(LogThrottle, TheNextLineWrittenReportsTheLinesHeldBack) {
  LogThrottle throttle;
  uint64_t suppressed = 0;
  allow_many(throttle, kStart, 25, &suppressed);  // 10 written, 15 held back
  ASSERT_TRUE(throttle.allow(kStart + 1000, &suppressed));
  EXPECT_EQ(suppressed, 15u);
  ASSERT_TRUE(throttle.allow(kStart + 1001, &suppressed));
  EXPECT_EQ(suppressed, 0u);  // said once
}

TEST(LogThrottle, HeldBackLinesAreOverdueOnlyOnceTheirWindowIsOver) {
  LogThrottle throttle;
  uint64_t suppressed = 0;
  allow_many(throttle, kStart, 12, &suppressed);
  EXPECT_EQ(throttle.take_overdue(kStart + 999), 0u);  // a line may still come to say it
  EXPECT_EQ(throttle.take_overdue(kStart + 1000), 2u);
  EXPECT_EQ(throttle.take_overdue(kStart + 5000), 0u);  // handed over once
  ASSERT_TRUE(throttle.allow(kStart + 5000, &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

TEST(LogThrottle, TakeAllHandsOverTheCountOfAWindowStillRunning) {
  LogThrottle throttle;
  uint64_t suppressed = 0;
  allow_many(throttle, kStart, 13, &suppressed);
  EXPECT_EQ(throttle.take_all(), 3u);
  EXPECT_EQ(throttle.take_all(), 0u);
  EXPECT_FALSE(throttle.allow(kStart + 1, &suppressed));  // the window's burst is still spent
}

TEST(LogThrottle, NothingHeldBackIsNothingOverdue) {
  LogThrottle throttle;
  EXPECT_EQ(throttle.take_overdue(kStart), 0u);
  uint64_t suppressed = 0;
  allow_many(throttle, kStart, 10, &suppressed);
  EXPECT_EQ(throttle.take_overdue(kStart + 2000), 0u);
}

TEST(LogThrottle, TheFirstLineOfAProcessIsWrittenWhateverTheClock) {
  LogThrottle throttle;
  uint64_t suppressed = 0;
  EXPECT_TRUE(throttle.allow(0, &suppressed));  // a monotonic clock may start near 0
}

TEST(SuppressedNote, SaysHowManyOrNothing) {
  EXPECT_EQ(std::string(SuppressedNote(0).text), "");
  EXPECT_EQ(std::string(SuppressedNote(15).text), " [15 similar lines suppressed]");
  EXPECT_EQ(std::string(SuppressedNote(UINT64_MAX).text),
            " [18446744073709551615 similar lines suppressed]");
}

}  // namespace
}  // namespace peregrine
