// The configuration of upstream groups: [[upstream]] tables with their servers and health
// check, and the resolution of the group a fastcgi or proxy route names (a declared group, or an
// implicit one-server group for an address).
#pragma once

#include <toml++/toml.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::upstream {

// keepalive_timeout of a group fastcgi routes use, unless written: long enough to carry a busy
// period's connections from one request to the next, short enough that a client of the same
// php-fpm pool that finds every child held by an idle connection waits no longer than this.
inline constexpr config::Millis kFastcgiKeepaliveTimeout{2'000};

// The keys of an [[upstream]] table.
const std::vector<std::string_view>& group_keys();

// The `upstream` array of tables into config->upstreams (before the sites: routes name them).
void read_groups(config::Reader& reader, const toml::node& node, config::Config* config);

// The TLS keys an [[upstream]] with tls = true and an https:// proxy route share: tls_ca,
// tls_verify, tls_server_name, tls_certificate, tls_key.
const std::vector<std::string_view>& tls_keys();

// Reads those keys of `table` into *tls (`prefix`: "upstream" or "site.route", for messages;
// `default_name`: the name verified when tls_server_name is absent), checks that the files load,
// and warns when verification is off. False after reporting a problem.
bool read_tls_keys(config::Reader& reader, const toml::table& table, std::string_view prefix,
                   const std::string& default_name, config::UpstreamTls* tls);

// "$uri", "$http_NAME", "$cookie_NAME" into *out. Returns "" or the problem.
std::string parse_hash_key(std::string_view text, config::HashKey* out);

// The groups routes refer to. Remembers which protocol first used each group: a group speaks
// one protocol, so a fastcgi and a proxy route cannot share one.
class RouteGroups {
 public:
  explicit RouteGroups(config::Config* config) : config_(config) {}

  const config::UpstreamGroup* find(std::string_view name) const;

  // The group a fastcgi or proxy route at `node` uses: the declared group `name`, or the
  // implicit group of `address`. Returns "" after reporting a problem.
  // `tls`: a proxy route's TLS (enabled for https://; the settings of an implicit group), or
  // null (FastCGI). A declared group's tls must match the route's scheme.
  // `use`: how the route's handler uses groups (its registration's UpstreamUse).
  std::string resolve(config::Reader& reader, const toml::node& node,
                      const config::UpstreamUse& use, const std::string& name,
                      const std::string& address, const config::UpstreamTls* tls = nullptr);

 private:
  struct Use {
    const config::UpstreamUse* use;
    config::SourcePos pos;
  };
  config::Config* config_;
  std::map<std::string, Use> uses_;  // group -> the first route that uses it
};

}  // namespace peregrine::upstream
