#pragma once
// When a busy worker's next wait gathers a batch instead of waking at the first event
// (docs/architecture.md, "Waiting in batches"). Pure, so that the rule is tested apart from the
// kernel's timing.
#include <algorithm>

namespace peregrine::event {

// How long a wait may hold for more (`batch_wait_us`): long enough for a busy worker's next few
// events to come, short against a request's own latency.
constexpr unsigned kDefaultBatchWaitUs = 100;
// The setting's ceiling: past a millisecond, the hold would be felt as latency.
constexpr unsigned kBatchWaitUsCeiling = 1000;
// A wait that reported one event found the worker idle: there is no batch to gather.
constexpr unsigned kMinBatchWait = 2;
// Fewer registrations than this outside the last batch: the few clients are most likely
// waiting for the replies just sent, and holding the wait makes the two CPUs take turns instead
// of working at once (at 5 and 10 keep-alive connections that cost 7-40 % of the requests per
// second).
constexpr unsigned kMinOthersForBatchWait = 16;
// io_uring's wait ends early once this many completions are ready, besides those of the replies
// queued since the last wait (up to as many again).
constexpr unsigned kMaxBatchWait = 64;

// Whether the next wait holds for the batch wait, to wake once for what would have been several
// wake-ups: after a batch (`last_batch`: the events the last wait reported), with enough
// registrations outside it (`registered`: connections, listeners, upstreams) for more to come.
// Until the clients have read the replies just sent, only those others can bring anything.
constexpr bool should_batch_wait(unsigned last_batch, unsigned registered) {
  return last_batch >= kMinBatchWait && registered >= last_batch + kMinOthersForBatchWait;
}

// should_batch_wait() with what the holds brought: a hold that gathered fewer than 2 events
// saved no wake-up and cost one more (a back end streaming a large answer, one event at a
// time: phpinfo() through php-fpm cost 5-12 % more CPU per request). After each such hold the
// next eligible waits skip holding, 1, 2, 4 ... up to 64 of them; a hold that gathered a batch
// starts over.
class BatchWaitRule {
 public:
  // Whether the next wait holds, with `registered` descriptors.
  bool hold(unsigned registered) {
    if (!should_batch_wait(last_batch_, registered)) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    return true;
  }
  // The events a wait reported, and whether it held.
  void reported(unsigned events, bool held) {
    last_batch_ = events;
    if (!held) return;
    backoff_ = events >= kMinBatchWait ? 0 : std::min(backoff_ == 0 ? 1 : backoff_ * 2, kMaxSkip);
    skip_ = backoff_;
  }

 private:
  static constexpr unsigned kMaxSkip = 64;
  unsigned last_batch_ = 0;
  unsigned backoff_ = 0;
  unsigned skip_ = 0;
};

}  // namespace peregrine::event
