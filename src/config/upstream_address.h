// Back-end addresses as written in [[upstream]] groups, fastcgi routes and proxy URLs, shared by
// the TOML loader and the command line:
//   "127.0.0.1:9000"  "[::1]:8080"  "localhost:8080" (127.0.0.1)  "unix:/run/php/fpm.sock"
// and the proxy targets "http://GROUP[/path]", "http://host:port[/path]",
// "http://unix:/path/to.sock:[/path]", and the same with https:// (TCP only). Host names other than
// "localhost" are not resolved, for the same reason as listen addresses: starting must not depend
// on DNS.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace peregrine::config {

// Fills out->addr, out->addr_len and out->address (= text). On failure returns false and sets
// *error (and *hint, possibly empty). Leaves the other fields of *out alone.
bool parse_upstream_address(std::string_view text, UpstreamServer* out, std::string* error,
                            std::string* hint);

// One spelling per endpoint, used to name implicit groups: "127.0.0.1:9000", "[::1]:8080",
// "unix:/run/php/fpm.sock". So "localhost:9000" and "127.0.0.1:9000" share one group.
std::string canonical_upstream_address(const UpstreamServer& server);

// [A-Za-z0-9_.-]+: the names of [[upstream]] groups. (Addresses always contain ':', so a name
// can never be mistaken for one.)
bool is_group_name(std::string_view text);

// The parts of a proxy URL. Exactly one of `name` and `address` is set: `name` when the authority
// is a bare word without a port (a group name, or "localhost"/an IP literal meaning port 80 when
// no group has that name), `address` otherwise (an upstream address for parse_upstream_address).
struct ProxyUrl {
  std::string name;
  std::string address;
  std::string default_port_address;  // with `name`: the address it means if it is no group, or ""
  std::string path;                  // "" or starting with '/'
  bool tls = false;                  // https://: the default port is 443
};
bool parse_proxy_url(std::string_view text, ProxyUrl* out, std::string* error, std::string* hint);

// The group for a route that names an address instead of a group: an existing implicit group of
// the same endpoint, or a new one with default settings appended to config->upstreams. Returns
// its name. With `tls` (enabled), the group speaks TLS and is named "https://ADDRESS", so that
// http:// and https:// routes to one port never share a pool; `*tls_conflict` is set when such
// a group exists already with other TLS settings.
std::string add_implicit_group(Config* config, const UpstreamServer& server, const SourcePos& pos,
                               const UpstreamTls* tls = nullptr, bool* tls_conflict = nullptr);

// "name1, name2, ..." of the groups in `config` that were declared (not implicit), for hints.
std::string declared_group_names(const Config& config);

// '^(.+?\.php)(/.*)?$': SCRIPT_NAME up to the first ".php" segment, PATH_INFO the rest.
inline constexpr std::string_view kDefaultSplitPath = R"(^(.+?\.php)(/.*)?$)";
// The compiled default, shared (Regex is immutable).
std::shared_ptr<const Regex> default_split_path();

}  // namespace peregrine::config
