// Timer lists for durations that come from the configuration (upstream connect/read/send
// timeouts, queue waits, idle pools): one FIFO list per distinct duration, created on first use
// and swept by the worker with its own lists. Keeps every arm/disarm O(1) like TimerList.
// Also the "soon" list: work an object put off so that others get their turn (an upstream read
// past its budget), run after the current batch of events without the loop blocking first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "event/timer_list.h"

namespace peregrine::event {

class TimerSet {
 public:
  TimerList& list(int64_t duration_ms) {
    std::unique_ptr<TimerList>& slot = lists_[duration_ms];
    if (!slot) slot = std::make_unique<TimerList>(duration_ms);
    return *slot;
  }
  void arm(TimerNode& node, int64_t duration_ms, int64_t now_ms) {
    list(duration_ms).arm(node, now_ms);
  }
  // Fires `node` at a coming run(), in the order asked, and the loop's wait does not block
  // meanwhile. A run fires at most kSoonPerRun of them, so that the loop polls between (each is
  // a turn of work: a thousand of them would hold new events, and a stop, for seconds); one
  // armed during run() (an owner that put off its work again) waits for a later run.
  static constexpr int kSoonPerRun = 64;
  void arm_soon(TimerNode& node) { soon_.arm(node, round_); }
  // Fires every expired node (its owner may arm or disarm others meanwhile).
  void run(int64_t now_ms) {
    const int64_t due = round_++;  // the soon list's deadlines count runs, not milliseconds
    for (int i = 0; i < kSoonPerRun; ++i) {
      TimerNode* node = soon_.pop_expired(due);
      if (!node) break;
      node->owner->on_timeout();
    }
    for (auto& [duration, timers] : lists_)
      while (TimerNode* node = timers->pop_expired(now_ms)) node->owner->on_timeout();
  }
  // Milliseconds until the earliest deadline, or -1.
  int64_t next_in(int64_t now_ms) const {
    if (!soon_.empty()) return 0;
    int64_t best = -1;
    for (const auto& [duration, timers] : lists_) {
      int64_t next = timers->next_in(now_ms);
      if (next >= 0 && (best < 0 || next < best)) best = next;
    }
    return best;
  }

 private:
  // Lists are never removed: nodes point at them, and the set of durations is small.
  std::map<int64_t, std::unique_ptr<TimerList>> lists_;
  TimerList soon_;
  int64_t round_ = 0;
};

}  // namespace peregrine::event
