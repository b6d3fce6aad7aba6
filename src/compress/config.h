// The `compress` key of a [[site]] and of a [[site.route]], read beside the code it configures.
// It is either a boolean (on with the defaults / off) or a table of options, which turns
// compression on unless it says enabled = false:
//   compress = true
//   compress = { gzip_level = 5, types = ["text/*", "application/json"], min_length = "1k" }
// A route starts from its site's options and applies its own on top.
#pragma once

#include <toml++/toml.h>

#include <string_view>
#include <vector>

#include "compress/options.h"
#include "config/reader.h"

namespace peregrine::compress {

// The keys of the table form, in documentation order.
const std::vector<std::string_view>& option_keys();

// Reads `node` (the value of a `compress` key) over *options. `name` is its dotted name for
// messages: "site.compress" or "site.route.compress".
void read_options(config::Reader& reader, const toml::node& node, std::string_view name,
                  Options* options);

// Parses "br", "gzip", "zstd" (case-insensitive); false for anything else.
bool parse_coding(std::string_view text, Coding* coding);

}  // namespace peregrine::compress
