// A return route's options: return = STATUS, location, body, content_type.
#pragma once

#include <string>

#include "config/config.h"

namespace peregrine::return_route {

struct ReturnOptions : config::HandlerOptions {
  int status = 200;
  std::string body;
  std::string location;  // for 301/302/303/307/308; $1..$9 are regex captures, $uri the path
  std::string content_type = "text/plain";
};

}  // namespace peregrine::return_route
