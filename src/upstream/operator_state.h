// What an operator set on upstream servers at run time (the admin's drain, disable and enable),
// process-wide. Each worker keeps its own upstream state (group_runtime.h), so a change here is
// announced to every worker (Worker subscribes; its mailbox applies the change between two
// events), and each GroupRuntime reads this table when it is built: a reload keeps the state of
// the servers it keeps (same group name, same address) and forgets the others (retain()).
//
//   drained:  no new requests; requests in flight and pooled connections finish.
//   disabled: no new requests; idle pooled connections are closed, in-flight requests finish
//             and their connections are closed instead of pooled.
//
// Not on the request path: a worker reads it when it builds a route table or gets the news.
#pragma once

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
};

OperatorStates& operator_states();

}  // namespace peregrine::upstream
