// The `auth` key of a site or route:
//   auth = { htpasswd = "/etc/peregrine/staging.htpasswd", realm = "Staging" }
//   auth = "off"            (a route only: lifts its site's authentication)
// The htpasswd file is read and parsed here, when the configuration is loaded, so a reload
// re-reads it and a broken file leaves the old configuration serving.
#pragma once

#include <string_view>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::auth {

// `name` is the key's dotted path ("site.auth", "site.route.auth"). `inherited` is what the
// route has from its site (or nothing, for a site).
void read_options(config::Reader& reader, const toml::node& node, std::string_view name, bool route,
                  config::AuthOptions* out);

}  // namespace peregrine::auth
