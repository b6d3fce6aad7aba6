// The proxy handler's registration: proxy = "URL", strip_prefix, proxy_host, x_forwarded,
// forwarded, request_headers, response_headers, rewrite_location, intercept_errors, proxy_buffer,
// proxy_temp_file_max, websocket, tunnel_timeout.
#pragma once

#include "handlers/handler_type.h"

namespace peregrine::proxy {

const handlers::HandlerType& handler_type();

}  // namespace peregrine::proxy
