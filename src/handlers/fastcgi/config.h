// The keys of a fastcgi route: fastcgi = "GROUP or ADDRESS", split_path, try_files,
// fastcgi_params, fastcgi_buffer, check_script, fastcgi_pipelining (and the static options it
// shares with static routes: root, index, ...).
#pragma once

#include "config/registry.h"

namespace peregrine::fastcgi {

const config::RouteHandlerReader& route_reader();

}  // namespace peregrine::fastcgi
