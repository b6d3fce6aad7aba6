// An application route's options: the name its handler was registered under (handler = "NAME").
#pragma once

#include <string>

#include "config/config.h"

namespace peregrine::application {

struct ApplicationOptions : config::HandlerOptions {
  std::string name;
};

}  // namespace peregrine::application
