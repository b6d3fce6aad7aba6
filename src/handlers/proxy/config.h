// The keys of a proxy route: proxy = "URL", strip_prefix, proxy_host, x_forwarded, forwarded,
// request_headers, response_headers, rewrite_location, intercept_errors, proxy_buffer,
// proxy_temp_file_max, websocket, tunnel_timeout.
#pragma once

#include "config/registry.h"

namespace peregrine::proxy {

const config::RouteHandlerReader& route_reader();

}  // namespace peregrine::proxy
