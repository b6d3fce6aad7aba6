// What an operator set on upstream servers at run time (the admin's drain, disable and enable),
// process-wide. Each worker keeps its own upstream state (group_runtime.h), so a change here is
// announced to every worker (Worker subscribes; its mailbox applies the change between two
// events), a pick that finds the table's version moved applies it first, and each GroupRuntime
// reads this table when it is built: a reload keeps the state of the servers it keeps (same
// group name, same address) and forgets the others (retain()).
//
//   drained:  no new requests; requests in flight and pooled connections finish.
//   disabled: no new requests; idle pooled connections are closed, in-flight requests finish
//             and their connections are closed instead of pooled.
//
// On the request path only as one atomic load per pick (version()).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "config/config.h"

namespace peregrine::upstream {

enum class OperatorState : uint8_t { kNone, kDrained, kDisabled };
// "drain", "disable", "enable" as the state they set; nullopt for anything else.
std::optional<OperatorState> operator_action(std::string_view action);
const char* to_string(OperatorState state);  // "", "drained", "disabled"

class OperatorStates {
 public:
  OperatorState get(std::string_view group, std::string_view server) const;
  // Records the state and tells every subscriber (from the calling thread).
  void set(std::string_view group, std::string_view server, OperatorState state);
  // Moves on with every set(). A worker compares it before each pick: the subscribers' posts
  // reach a worker's loop later, and a request sent after the admin's answer must already see
  // the new state, whichever worker takes it.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Forgets the servers `config` no longer has (called once a reload's snapshot is built).
  void retain(const config::Config& config);

  // `on_change` runs on the thread that called set(), under this table's lock: it must only
  // post (a worker's mailbox).
  int subscribe(std::function<void()> on_change);
  void unsubscribe(int id);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, OperatorState, std::less<>> states_;
  std::map<int, std::function<void()>> subscribers_;
  int next_id_ = 0;
  std::atomic<uint64_t> version_{0};
};

OperatorStates& operator_states();

}  // namespace peregrine::upstream
