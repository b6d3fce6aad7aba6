// The time a worker's event loop read after its last wakeup. Handlers use it instead of calling
// clock_gettime themselves: one read per loop iteration serves every request in it.
#pragma once

#include <time.h>

#include <cstdint>

namespace peregrine {

struct Clock {
  int64_t monotonic_ms = 0;
  time_t wall_seconds = 0;
  int64_t monotonic_us = 0;  // precise (not coarse): request durations in the metrics

  void update() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    monotonic_ms = static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    wall_seconds = ts.tv_sec;
    monotonic_us = precise_monotonic_us();
  }

  // A fresh reading, for the rare caller that must know how long the current batch has run.
  static int64_t precise_monotonic_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
  }
};

}  // namespace peregrine
