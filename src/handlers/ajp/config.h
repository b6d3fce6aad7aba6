// The ajp handler's registration: ajp = "GROUP or ajp://ADDRESS", ajp_secret, ajp_secret_file,
// ajp_secret_required, ajp_packet_size, ajp_buffer, ajp_cping_after.
#pragma once

#include <string>
#include <string_view>

#include "handlers/handler_type.h"

namespace peregrine::ajp {

const handlers::HandlerType& handler_type();

// "ajp://127.0.0.1:8009" -> "127.0.0.1:8009"; a group name comes back unchanged (it has no
// ':'). *is_address says which it was.
std::string_view strip_scheme(std::string_view target, bool* is_address);

}  // namespace peregrine::ajp
