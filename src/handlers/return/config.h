// The keys of a `return` route: return = STATUS, location, body, content_type.
#pragma once

#include "config/registry.h"

namespace peregrine::return_route {

const config::RouteHandlerReader& route_reader();

}  // namespace peregrine::return_route
