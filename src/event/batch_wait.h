#pragma once
// When a busy worker's next wait gathers a batch instead of waking at the first event
// (docs/architecture.md, "Waiting in batches"). Pure, so that the rule is tested apart from the
// kernel's timing.

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
// io_uring's wait ends early once this many completions are ready.
constexpr unsigned kMaxBatchWait = 64;

// Whether the next wait holds for the batch wait, to wake once for what would have been several
// wake-ups: after a batch (`last_batch`: the events the last wait reported), with enough
// registrations outside it (`registered`: connections, listeners, upstreams) for more to come.
// Until the clients have read the replies just sent, only those others can bring anything.
constexpr bool should_batch_wait(unsigned last_batch, unsigned registered) {
  return last_batch >= kMinBatchWait && registered >= last_batch + kMinOthersForBatchWait;
}

}  // namespace peregrine::event
