// Plain data for access control: the named limits of the top-level [[limit]] tables, and what a
// [[site]] or [[site.route]] applies (`access` rules, `limit` names). Read by access/config.cc;
// enforced by access/check.h. See docs/access.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cidr.h"

namespace peregrine::access {

class LimitTable;

// One `access` rule: allow or deny a network, or everyone ("all").
struct Rule {
  bool allow = false;
  bool all = false;
  Cidr network;  // unused with `all`
};

// What a limit counts by.
enum class KeyKind : uint8_t { kAddress, kHeader, kCookie };

// A [[limit]]: either a request rate (token bucket) or concurrent connections, per key.
struct Limit {
  std::string name;
  bool connections_limit = false;  // counts connections instead of requests
  // Request rate: one request every `interval_us`, `burst` more may come early.
  int64_t interval_us = 0;
  uint32_t burst = 0;
  bool delay = false;  // delay early requests (up to the burst) instead of answering `status`
  // Connections: at most this many at once per key.
  uint32_t max_connections = 0;
  KeyKind key = KeyKind::kAddress;
  std::string key_name;  // the header or cookie name
  int status = 429;      // the answer to a refused request
  uint32_t slots = 0;    // keys the table holds (its size / kSlotBytes)
  int64_t log_interval_ms = 10'000;
  // The shared state of this limit for every worker: made with the snapshot, so a reload starts
  // new tables (counts do not carry over).
  std::shared_ptr<LimitTable> table;
};

// The `access` and `limit` keys of a site or route. A route starts from its site's and replaces
// either list it names itself.
struct Options {
  std::vector<Rule> rules;  // first match wins; no match: allowed
  std::vector<std::shared_ptr<const Limit>> limits;
  bool any() const { return !rules.empty() || !limits.empty(); }
};

// Every [[limit]] of a configuration, in declared order; sites and routes refer to them by name.
struct Definitions {
  std::vector<std::shared_ptr<const Limit>> limits;
};

}  // namespace peregrine::access
