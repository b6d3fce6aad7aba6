// The configuration of access control, read beside the code it configures:
//   [[limit]]                       a named limit, defined once
//   name = "login"
//   rate = "5r/s"                   or "30r/m"; or connections = 10 (at once, per key)
//   burst = 10                      requests that may come early (default 0)
//   mode = "reject"                 or "delay": early requests wait up to the burst
//   key = "$remote_addr"            or "$http_NAME", "$cookie_NAME"
//   status = 429                    (503 for connection limits)
//   size = "1m"                     the table: 32 bytes per key
//   log_interval = "10s"            one log line per refused key per interval
// and, on a [[site]] or [[site.route]]:
//   limit = ["login"]
//   access = [ { allow = "10.0.0.0/8" }, { deny = "all" } ]
#pragma once

#include <toml++/toml.h>

#include <string_view>
#include <vector>

#include "access/options.h"
#include "config/reader.h"

namespace peregrine::access {

const std::vector<std::string_view>& limit_keys();

// Reads the top-level `limit` key (an array of tables) into *definitions, making each limit's
// shared table.
void read_limits(config::Reader& reader, const toml::node& node, Definitions* definitions);

// Reads the `access` and `limit` keys of a site or route table (if present) over *options.
// `section` is "site" or "site.route", for messages.
void read_options(config::Reader& reader, const toml::table& table, const Definitions& definitions,
                  std::string_view section, Options* options);

// Parses "5r/s", "30r/m", "0.5r/s" into microseconds per request; false when malformed or the
// rate is 0 or faster than 1,000,000 r/s.
bool parse_rate(std::string_view text, int64_t* interval_us);

}  // namespace peregrine::access
