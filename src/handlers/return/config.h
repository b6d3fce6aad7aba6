// The return handler's registration: return = STATUS, location, body, content_type.
#pragma once

#include "handlers/handler_type.h"

namespace peregrine::return_route {

const handlers::HandlerType& handler_type();

}  // namespace peregrine::return_route
