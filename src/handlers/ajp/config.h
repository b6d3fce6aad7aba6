// The keys of an ajp route: ajp = "GROUP or ajp://ADDRESS", ajp_secret, ajp_secret_file,
// ajp_secret_required, ajp_packet_size, ajp_buffer, ajp_cping_after.
#pragma once

#include <string>
#include <string_view>

#include "config/registry.h"

namespace peregrine::ajp {

const config::RouteHandlerReader& route_reader();

// "ajp://127.0.0.1:8009" -> "127.0.0.1:8009"; a group name comes back unchanged (it has no
// ':'). *is_address says which it was.
std::string_view strip_scheme(std::string_view target, bool* is_address);

}  // namespace peregrine::ajp
