// The one interface every handler implements: static files, `return` routes and the
// in-process application handlers of libperegrine alike.
#pragma once

#include "peregrine/request.h"
#include "peregrine/response.h"

namespace peregrine {

class Handler {
 public:
  virtual ~Handler() = default;
  // Runs on the worker thread that owns the connection, possibly on several workers at once: a
  // handler shared between workers must be thread-safe (or be created per worker, see Server).
  virtual void handle(const Request& request, Response& response) = 0;
  // A handler that reads the request body gets it buffered in request.body, up to the
  // configured max body size (413 beyond). Others never see it; it is read and discarded.
  virtual bool wants_body() const { return false; }
};

}  // namespace peregrine
