// The application's HTTP client (peregrine/http_client.h) on the worker's loop. A call is a
// reverse-proxy exchange (handlers/proxy/) with a Request built from the URL and a Downstream
// that collects the response for the application instead of a client connection: the upstream
// exchange's pools, keep-alive, connect/read timeouts, stale-connection retry and TLS
// (upstream/exchange.h), and the proxy's response parser and body reader, serve it unchanged.
// Each worker keeps one upstream group per origin (and set of connection options), created on
// first use; the proxy's own path is not touched (no branch was added to it).
#pragma once

#include "handlers/stream_handler.h"

namespace peregrine::client {

// Lets this thread make client calls while it lives: server::Worker::run() holds one around
// its loop. Its end aborts the calls still in flight (they resolve with kCancelled) and closes
// the pools.
class WorkerScope {
 public:
  explicit WorkerScope(const handlers::WorkerEnv& env);
  ~WorkerScope();
  WorkerScope(const WorkerScope&) = delete;
  WorkerScope& operator=(const WorkerScope&) = delete;
};

}  // namespace peregrine::client
