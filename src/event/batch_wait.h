#pragma once
// How many completions the io_uring poller's next wait gathers before it wakes (docs/io_uring.md,
// "Waiting in batches"). Pure, so that the rule is tested apart from the kernel's timing.
#include <algorithm>

namespace peregrine::event {

// How long a wait may hold completions for more (`io_uring_batch_wait_us`): long enough for a
// busy worker's next few requests to come, short against a request's own latency.
constexpr unsigned kDefaultBatchWaitUs = 100;
// The setting's ceiling: past a millisecond, the hold would be felt as latency.
constexpr unsigned kBatchWaitUsCeiling = 1000;
// Below this, a worker is lightly loaded: holding a reply would cost latency and save little.
constexpr unsigned kMinBatchWait = 8;
// At most this many completions are waited for at once.
constexpr unsigned kMaxBatchWait = 64;

// `last_batch`: the events the last wait reported; `registered`: the descriptors registered
// (connections, listeners, upstreams). Returns 0 or 1 for "wake at the first completion".
//
// The last batch's size is the guess, capped by the registrations outside it: until the clients
// have read the replies just sent, only those can bring anything. Asking for more makes the
// worker sleep with work ready while each client handles its replies, the two CPUs taking turns
// instead of working at once: at 5 and 10 keep-alive connections that cost 7-21 % of the
// requests per second.
constexpr unsigned batch_wait_size(unsigned last_batch, unsigned registered) {
  if (last_batch < kMinBatchWait) return 0;
  const unsigned others = registered > last_batch ? registered - last_batch : 0;
  return std::min({last_batch, others, kMaxBatchWait});
}

}  // namespace peregrine::event
