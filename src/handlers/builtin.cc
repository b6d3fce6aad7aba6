#include "handlers/builtin.h"

#include "handlers/ajp/config.h"
#include "handlers/application/config.h"
#include "handlers/fastcgi/config.h"
#include "handlers/proxy/config.h"
#include "handlers/return/config.h"
#include "handlers/static/config.h"

namespace peregrine::handlers {

const config::HandlerSet& builtin() {
  // `return` first: a route with `return` answers by itself whatever else is set.
  static const config::HandlerSet kHandlers({
      &return_route::handler_type(),
      &fastcgi::handler_type(),
      &proxy::handler_type(),
      &ajp::handler_type(),
      &static_files::handler_type(),
      &application::handler_type(),
  });
  return kHandlers;
}

}  // namespace peregrine::handlers
