// The static file options (root, index, directory_listing, ...): keys of a [[site]], which its
// routes inherit and may override, and `alias` on a prefix route. Common to every route (static
// and FastCGI routes serve files with them); a handler says which apply to its routes
// (HandlerType::static_key).
#pragma once

#include <toml++/toml.h>

#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/handler_type.h"
#include "config/reader.h"

namespace peregrine::config {

// Keys of a [[site]] and of a [[site.route]] (without `alias`, a route's only).
const std::vector<std::string_view>& static_option_keys();

// The static option `key` of `table`, when set, into *options. `prefix` makes the key's dotted
// name for messages: "site." or "site.route.".
void read_static_option(config::Reader& reader, const toml::table& table, std::string_view key,
                        std::string_view prefix, config::StaticOptions* options);

// A route's static options: the site's, overridden by the route's own keys, and `alias`.
// `handler` is the route's handler (null when none could be chosen), which says which of the
// keys apply to it; `match_key` is the route's match key ("prefix", ...).
void read_static_route_options(config::RouteContext& context, const toml::table& table,
                               const config::HandlerType* handler, std::string_view match_key,
                               config::Route* route);

}  // namespace peregrine::config
