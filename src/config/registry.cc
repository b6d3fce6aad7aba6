#include "config/registry.h"

#include "config/static_options.h"
#include "upstream/config.h"

namespace peregrine::config {

const std::vector<std::string_view>& common_route_keys() {
  // In the order of docs/configuration.md, which "valid keys: ..." hints follow.
  static const std::vector<std::string_view> kKeys = [] {
    std::vector<std::string_view> keys = {"exact", "prefix", "extension", "regex", "handler"};
    for (std::string_view key : static_option_keys()) {
      keys.push_back(key);
      if (key == "root") keys.push_back("alias");
    }
    for (std::string_view key : {"methods", "compress", "access", "limit", "headers", "auth"})
      keys.push_back(key);
    return keys;
  }();
  return kKeys;
}

const std::vector<std::string_view>& upstream_keys() {
  return upstream::group_keys();
}

}  // namespace peregrine::config
