// Tests for the loop's clock (src/core/clock.h): one read gives every figure.
#include "core/clock.h"

#include <gtest/gtest.h>
#include <time.h>

namespace peregrine {
namespace {

time_t wall_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec;
}

// The wall clock is derived in whole µs, so it may trail a direct reading by a µs at a second's
// edge.
void expect_wall_between(const Clock& clock, time_t before, time_t after) {
  EXPECT_GE(clock.wall_seconds, before - 1);
  EXPECT_LE(clock.wall_seconds, after);
}

TEST(Clock, OneReadGivesMillisecondsAndTheWallClock) {
  Clock clock;
  const time_t before = wall_now();
  clock.update();
  expect_wall_between(clock, before, wall_now());
  EXPECT_EQ(clock.monotonic_ms, clock.monotonic_us / 1000);
}

TEST(Clock, MovesOnBetweenWallClockSyncs) {
  Clock clock;
  clock.update();
  const int64_t first_us = clock.monotonic_us;
  timespec pause{0, 20'000'000};  // 20 ms: inside the one-second period between syncs
  nanosleep(&pause, nullptr);
  const time_t before = wall_now();
  clock.update();
  expect_wall_between(clock, before, wall_now());
  EXPECT_GE(clock.monotonic_us - first_us, 20'000);
  EXPECT_EQ(clock.monotonic_ms, clock.monotonic_us / 1000);
}

}  // namespace
}  // namespace peregrine
