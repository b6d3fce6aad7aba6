// What a new configuration text changes against the running one, at the level an operator
// reads before applying: top-level settings, sites (by their hosts), their routes, upstream
// groups (by name). Pure: compares the two TOML documents, not the loaded snapshots.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace peregrine::admin {

// Lines such as "site a.test: 1 route added", "upstream app: changed", "workers: changed".
// Empty when both mean the same TOML; {"configuration replaced"} when either does not parse.
std::vector<std::string> summarize_changes(std::string_view before, std::string_view after);

}  // namespace peregrine::admin
