#include "upstream/operator_state.h"

namespace peregrine::upstream {

std::optional<OperatorState> operator_action(std::string_view action) {
  if (action == "drain") return OperatorState::kDrained;
  if (action == "disable") return OperatorState::kDisabled;
  if (action == "enable") return OperatorState::kNone;
  return std::nullopt;
}

const char* to_string(OperatorState state) {
  switch (state) {
    case OperatorState::kDrained:
      return "drained";
    case OperatorState::kDisabled:
      return "disabled";
    case OperatorState::kNone:
      break;
  }
  return "";
}

OperatorState OperatorStates::get(std::string_view group, std::string_view server) const {
  std::lock_guard lock(mutex_);
  auto it = states_.find(std::pair<std::string, std::string>(group, server));
  return it == states_.end() ? OperatorState::kNone : it->second;
}

void OperatorStates::set(std::string_view group, std::string_view server, OperatorState state) {
  std::lock_guard lock(mutex_);
  std::pair<std::string, std::string> key(group, server);
  if (state == OperatorState::kNone)
    states_.erase(key);
  else
    states_[std::move(key)] = state;
  version_.fetch_add(1, std::memory_order_release);
  // Under the lock, so that a worker that unsubscribes (and is then destroyed) is never called
  // afterwards; a subscriber only posts to a mailbox and never calls back in here.
  for (auto& [id, on_change] : subscribers_) on_change();
}

void OperatorStates::retain(const config::Config& config) {
  std::lock_guard lock(mutex_);
  for (auto it = states_.begin(); it != states_.end();) {
    bool kept = false;
    for (const config::UpstreamGroup& g : config.upstreams) {
      if (g.name != it->first.first) continue;
      for (const config::UpstreamServer& s : g.servers)
        kept = kept || s.address == it->first.second;
    }
    it = kept ? std::next(it) : states_.erase(it);
  }
}

int OperatorStates::subscribe(std::function<void()> on_change) {
  std::lock_guard lock(mutex_);
  subscribers_[next_id_] = std::move(on_change);
  return next_id_++;
}

void OperatorStates::unsubscribe(int id) {
  std::lock_guard lock(mutex_);
  subscribers_.erase(id);
}

OperatorStates& operator_states() {
  static OperatorStates states;
  return states;
}

}  // namespace peregrine::upstream
