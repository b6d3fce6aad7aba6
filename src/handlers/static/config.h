// The static file handler's registration: the route's handler when no other is selected (or with
// handler = "static"). Its options are the route's static_files, common to every route
// (config/static_options.h), so it owns no key of its own.
#pragma once

#include "handlers/handler_type.h"

namespace peregrine::static_files {

const handlers::HandlerType& handler_type();

}  // namespace peregrine::static_files
