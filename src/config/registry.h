// The registry of route handler readers: which key selects which handler, which keys belong to
// it, and the function that reads them. The route loader (load.cc) and the command line
// (cli.cc) consult it instead of a chain of ifs; each handler's reader lives beside the handler
// (src/handlers/NAME/config.cc). Adding a handler's keys is one entry in registry.cc.
#pragma once

#include <toml++/toml.h>

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::upstream {
class RouteGroups;
}

namespace peregrine::config {

// What a handler's reader gets besides its route's table.
struct RouteContext {
  Reader& reader;
  const Site& site;                             // the route's site (its root and static defaults)
  upstream::RouteGroups& groups;                // upstream groups, for the routes that name one
  const access::Definitions* limits = nullptr;  // the [[limit]]s routes may name
};

struct RouteHandlerReader {
  HandlerKind kind;
  // The key that selects the handler, also its name in messages: return = 301, fastcgi = "..."
  std::string_view name;
  const std::vector<std::string_view>* keys;  // the handler's route keys, `name` included
  // How the selecting key's value is written, for hints: "STATUS", "\"URL\"".
  std::string_view value_form;
  std::string_view example;  // "e.g. proxy = \"http://127.0.0.1:8080\""
  // handler = "NAME" is accepted as a synonym (the selecting key is still needed): return only.
  bool handler_key_selects;
  // Hint when its keys appear on another handler's route.
  std::string_view foreign_hint;
  // For a static option (or `alias`) on the handler's route: nullopt when the handler uses it,
  // else the hint for "'KEY' does not apply to a 'NAME' route" (possibly empty).
  std::optional<std::string_view> (*static_key)(std::string_view key);
  // Reads the handler's keys into *route (route->static_files already holds the site's
  // defaults overridden by the route's static options). Errors go to context.reader.
  void (*read)(RouteContext& context, const toml::table& table, const toml::node& selector,
               Route* route);
};

// In precedence order: when several selecting keys are set, the first one's handler is used
// (after an error).
std::span<const RouteHandlerReader> route_handlers();

// Key catalogs, for "unknown key" hints that say where a key belongs.
const std::vector<std::string_view>& top_keys();
const std::vector<std::string_view>& limit_keys();
const std::vector<std::string_view>& site_keys();
const std::vector<std::string_view>& route_keys();  // every route key of every handler
const std::vector<std::string_view>& upstream_keys();

}  // namespace peregrine::config
