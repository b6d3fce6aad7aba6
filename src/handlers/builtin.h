// The handlers this build ships, in precedence order: the one list of registrations (each
// defined in its own folder, src/handlers/NAME/config.cc) that the server, quick mode and
// embedding programs load configurations with. Adding a handler is one entry here.
#pragma once

#include "config/handler_type.h"

namespace peregrine::handlers {

const config::HandlerSet& builtin();

}  // namespace peregrine::handlers
