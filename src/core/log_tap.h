// Live copies of log lines for whoever subscribes (the admin's GET /api/logs). The access-log
// writer thread and the error log offer every line they write; a subscriber keeps the lines it
// wants in a bounded queue and takes them from its own thread.
//
// Cost: with no subscriber, offering a line is one relaxed load (active()). With subscribers, the
// offering thread takes the tap's lock for a copy into each queue: it never waits for a reader,
// since a full queue drops the line and counts it. Access lines are offered by the access-log
// writer thread, not by workers, so a subscriber costs the workers nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

namespace peregrine::log_tap {

enum Stream : uint8_t { kAccess = 1, kError = 2 };
// "access", "error" or "both" as a set of streams; 0 for anything else.
uint8_t streams_from(std::string_view name);

class Subscriber {
 public:
  static constexpr size_t kMaxQueuedBytes = 256 * 1024;
  // `streams`: the Stream bits wanted; `filter`: only lines containing it ("" for all).
  Subscriber(uint8_t streams, std::string filter) : streams_(streams), filter_(std::move(filter)) {}

  struct Line {
    Stream stream;
    std::string text;  // without its newline
  };
  // Moves the queued lines into `out` (appending); returns the lines dropped since the last take.
  uint64_t take(std::deque<Line>& out);

  // Offering side (the tap, under its lock).
  void offer(Stream stream, std::string_view line);
  bool wants(Stream stream) const { return (streams_ & stream) != 0; }

 private:
  const uint8_t streams_;
  const std::string filter_;
  std::mutex mutex_;
  std::deque<Line> queue_;  // guarded by mutex_
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
};

extern std::atomic<int> g_subscribers;
// True when someone subscribes: the only thing a log writer pays otherwise.
inline bool active() {
  return g_subscribers.load(std::memory_order_relaxed) != 0;
}
// Offers `bytes` (one or more newline-terminated lines) to every subscriber of `stream`.
void offer(Stream stream, std::string_view bytes);
void subscribe(Subscriber* subscriber);
void unsubscribe(Subscriber* subscriber);

}  // namespace peregrine::log_tap
