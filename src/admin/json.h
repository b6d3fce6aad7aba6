// The little JSON the admin API reads: a string member of a request body's top-level object
// ({"password": "..."}, {"etag": "..."}). Pure; anything else in the object is skipped.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace peregrine::admin {

// The string value of `name` in the JSON object `text` (escapes decoded, \u to UTF-8); nullopt
// when `text` is not an object, is malformed, or `name` is absent or not a string.
std::optional<std::string> json_string_member(std::string_view text, std::string_view name);

}  // namespace peregrine::admin
