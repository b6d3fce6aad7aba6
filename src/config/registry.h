// Key catalogs, for "unknown key" hints that say where a key belongs. A route's handler keys
// come from the handlers a load knows (HandlerSet::route_keys, config/handler_type.h); these are
// the keys every load has.
#pragma once

#include <string_view>
#include <vector>

namespace peregrine::config {

const std::vector<std::string_view>& top_keys();
const std::vector<std::string_view>& limit_keys();
const std::vector<std::string_view>& site_keys();
// A route's keys that belong to no handler: the match keys, `handler`, the static options (with
// `alias` after `root`), methods, compress, access, limit, headers, auth.
const std::vector<std::string_view>& common_route_keys();
const std::vector<std::string_view>& upstream_keys();

}  // namespace peregrine::config
