// Readers of the document's own sections that the command line reuses, so that quick mode gets
// the same defaults and checks as a file. Private to src/config/.
#pragma once

#include <toml++/toml.h>

#include "config/config.h"
#include "config/reader.h"
#include "config/registry.h"

namespace peregrine::config {

// A [limits] table into *limits (keys not in the table keep their value).
void read_limits(Reader& reader, const toml::table& table, Limits* limits);

// One [[site.route]] table: its match key, its handler (through the registry) and the handler's
// keys. Returns false when the route is unusable (an error was reported).
bool read_route(RouteContext& context, const toml::table& table, Route* route);

}  // namespace peregrine::config
