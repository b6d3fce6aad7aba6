// Keeps one kind of error line from flooding the log. A back end that refuses connections under
// 1,000 clients failed ~23,000 requests a second, and each wrote its own line: 116,000 lines
// (14 MB) in 5 s, which fill a disk during an outage and bury the lines about anything else.
//
// At most kBurst lines in each window of kWindowMs. The lines held back are counted; the next
// line logged says how many, or, when none follows, take_overdue() hands the count over once the
// window is over, for a line of its own. Single-threaded: one per worker and kind of line.
#pragma once

#include <cstdint>
#include <cstdio>

namespace peregrine {

class LogThrottle {
 public:
  static constexpr uint32_t kBurst = 10;
  static constexpr int64_t kWindowMs = 1000;

  // True when a line may be written at `now_ms`; `*suppressed` is then the number held back
  // since the last one, for this line to report.
  bool allow(int64_t now_ms, uint64_t* suppressed) {
    if (now_ms - window_start_ms_ >= kWindowMs) {
      window_start_ms_ = now_ms;
      written_ = 0;
    }
    if (written_ == kBurst) {
      ++suppressed_;
      return false;
    }
    ++written_;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

  // The lines held back in a window that is over (then 0 are left); 0 while it runs, since a
  // line may still come in it to report them.
  uint64_t take_overdue(int64_t now_ms) {
    if (now_ms - window_start_ms_ < kWindowMs) return 0;
    return take_all();
  }
  // The lines held back, whatever the window: for the last report of a throttle going away.
  uint64_t take_all() {
    uint64_t n = suppressed_;
    suppressed_ = 0;
    return n;
  }

 private:
  int64_t window_start_ms_ = INT64_MIN / 2;  // far in the past: the first line opens a window
  uint32_t written_ = 0;
  uint64_t suppressed_ = 0;
};

// The tail of a line allow() let through: " [N similar lines suppressed]", or "" when none were.
struct SuppressedNote {
  explicit SuppressedNote(uint64_t suppressed) {
    if (suppressed > 0)
      std::snprintf(text, sizeof text, " [%llu similar lines suppressed]",
                    static_cast<unsigned long long>(suppressed));
  }
  char text[64] = "";
};

}  // namespace peregrine
