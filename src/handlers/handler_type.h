// A handler's one registration: its configuration side (config::HandlerType: name, selection,
// keys, reader, upstream use, default methods, admin description) and the factory that makes its
// runtime for one worker. Each handler defines one in its folder (src/handlers/NAME/config.cc);
// handlers/builtin.cc lists the built-in ones. It lives here, above config/, because the factory
// needs the worker's environment, the upstream groups and the MIME table.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "handlers/stream_handler.h"
#include "peregrine/handler.h"

namespace peregrine::static_files {
class MimeTable;
}

namespace peregrine::upstream {
class GroupRuntime;
}

namespace peregrine::application {
struct Registry;
}

namespace peregrine::handlers {

// What a factory gets: the route, its site, this worker's environment and tables.
struct BuildContext {
  const config::Route& route;
  const config::Site& site;
  const WorkerEnv& env;
  const static_files::MimeTable& mime;
  // The embedding program's handlers by name (handler = "NAME"); may be empty.
  const application::Registry& applications;
  // This table's runtime of the group `name` (null when there is none).
  std::function<upstream::GroupRuntime*(std::string_view name)> find_group;

  // The group `name`, or null after setting the error "FILE:LINE:COL: no upstream named ...".
  upstream::GroupRuntime* group(std::string_view name, std::string* error) const;
  // "FILE:LINE:COL" of the route, for errors.
  std::string position() const;
};

// A route's runtime for one worker: exactly one is set, a handler that answers at once (static,
// return, a synchronous application handler) or one that answers later from the worker's loop
// (FastCGI, proxy, AJP, an asynchronous application handler).
struct Runtime {
  std::shared_ptr<Handler> handler;
  std::shared_ptr<StreamHandler> stream;
};

class HandlerType : public config::HandlerType {
 public:
  // Called for each of its routes whenever a worker builds a route table (at start and on each
  // reload), never per request: what it makes is what each request then calls, once. On failure
  // it returns an empty Runtime and sets *error.
  virtual Runtime make(const BuildContext& context, std::string* error) const = 0;
};

}  // namespace peregrine::handlers
