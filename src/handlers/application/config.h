// The application handler's registration: handler = "NAME" for a name no other handler has, the
// handler an embedding program registered under that name (handlers/application/registry.h).
// The name is checked when a worker builds its route table, where the program's handlers are
// known.
#pragma once

#include <memory>
#include <string>

#include "handlers/application/options.h"
#include "handlers/handler_type.h"

namespace peregrine::application {

const handlers::HandlerType& handler_type();

// A route's options naming `name`, for routes an embedding program adds in code.
std::shared_ptr<const ApplicationOptions> options_for(std::string name);

}  // namespace peregrine::application
