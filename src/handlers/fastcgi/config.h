// The fastcgi handler's registration: fastcgi = "GROUP or ADDRESS", split_path, try_files,
// fastcgi_params, fastcgi_buffer, check_script, fastcgi_pipelining (and the static options it
// shares with static routes: root, index, ...).
#pragma once

#include "handlers/handler_type.h"

namespace peregrine::fastcgi {

const handlers::HandlerType& handler_type();

}  // namespace peregrine::fastcgi
