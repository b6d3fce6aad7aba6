#include "config/registry.h"

#include <array>

#include "handlers/ajp/config.h"
#include "handlers/fastcgi/config.h"
#include "handlers/proxy/config.h"
#include "handlers/return/config.h"
#include "handlers/static/config.h"
#include "upstream/config.h"

namespace peregrine::config {

std::span<const RouteHandlerReader> route_handlers() {
  // `return` first: a route with `return` answers by itself whatever else is set.
  static const std::array<RouteHandlerReader, 4> kReaders = {
      return_route::route_reader(),
      fastcgi::route_reader(),
      proxy::route_reader(),
      ajp::route_reader(),
  };
  return kReaders;
}

const std::vector<std::string_view>& route_keys() {
  // In the order of docs/configuration.md, which "valid keys: ..." hints follow.
  static const std::vector<std::string_view> kKeys = [] {
    std::vector<std::string_view> keys = {"exact", "prefix", "extension", "regex"};
    std::span<const RouteHandlerReader> handlers = route_handlers();
    keys.insert(keys.end(), handlers[0].keys->begin(), handlers[0].keys->end());
    keys.push_back("handler");
    for (std::string_view key : static_files::option_keys()) {
      keys.push_back(key);
      if (key == "root") keys.push_back("alias");
    }
    keys.push_back("methods");
    keys.push_back("compress");
    keys.push_back("access");
    keys.push_back("limit");
    keys.push_back("headers");
    keys.push_back("auth");
    for (const RouteHandlerReader& handler : handlers.subspan(1)) {
      keys.insert(keys.end(), handler.keys->begin(), handler.keys->end());
    }
    return keys;
  }();
  return kKeys;
}

const std::vector<std::string_view>& upstream_keys() {
  return upstream::group_keys();
}

}  // namespace peregrine::config
