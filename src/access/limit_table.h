// The shared state of one [[limit]]: a fixed-size open-addressing table of keys that every worker
// thread updates with relaxed compare-exchange, so a limit holds for the whole server without a
// lock and without any thread reconciling counts. Only requests on limited routes touch it.
//
// Memory is bounded: kSlotBytes per key, allocated once (anonymous mmap, so pages a table never
// uses cost nothing). A key lives in one of kProbe slots after its hash; when all of them hold
// other keys, the one that has refilled the longest (rate) or was idle the longest (connections,
// preferring keys with none open) is evicted. A full table never refuses: the evicted key simply
// starts again with a full bucket. See docs/access.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace peregrine::access {

inline constexpr size_t kSlotBytes = 32;
inline constexpr uint32_t kProbe = 8;

class LimitTable {
 public:
  // `slots` is rounded down to a power of two, at least kProbe.
  explicit LimitTable(uint32_t slots);
  ~LimitTable();
  LimitTable(const LimitTable&) = delete;
  LimitTable& operator=(const LimitTable&) = delete;

  uint32_t capacity() const { return mask_ + 1; }

  // A key's 64-bit identity (seeded per table; never 0). Two keys with the same hash share a
  // bucket: with 64 bits that is a theoretical concern only.
  uint64_t hash(std::string_view key) const;

  // The generic cell rate algorithm, a token bucket kept as one number per key: the theoretical
  // arrival time (TAT) of the next request that conforms to the rate. A request `wait` early
  // (TAT - now) passes while wait <= burst * interval.
  struct Take {
    bool allowed = false;
    int64_t wait_us = 0;   // allowed: how early it came (what delay mode waits)
    int64_t retry_us = 0;  // refused: when one more request would pass
    bool log = false;      // the first refusal of this key in the log interval
  };
  Take take(uint64_t key, int64_t now_us, int64_t interval_us, uint32_t burst,
            int64_t log_interval_us);

  // Connections: one more for `key` unless it has `max` already. `*slot` says where it was
  // counted, for release().
  struct Acquire {
    bool allowed = false;
    bool log = false;
    uint32_t slot = 0;
  };
  Acquire acquire(uint64_t key, uint32_t max, int64_t now_us, int64_t log_interval_us);
  void release(uint32_t slot, uint64_t key);

  // For tests: the count a key holds now (connections), or -1 when it is not in the table.
  int64_t value_of(uint64_t key) const;

 private:
  struct Slot {
    std::atomic<uint64_t> key;
    std::atomic<int64_t> value;    // TAT in µs (rate) or open connections
    std::atomic<int64_t> touched;  // µs of the last use (connections' eviction order)
    std::atomic<int64_t> logged;   // µs of the last log line for this key
  };
  static_assert(sizeof(Slot) == kSlotBytes);

  Slot& find(uint64_t key, int64_t now_us, bool connections);
  bool should_log(Slot& slot, int64_t now_us, int64_t interval_us);

  Slot* slots_ = nullptr;
  uint32_t mask_ = 0;
  size_t bytes_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace peregrine::access
