// Application handlers an embedding program registered by name (peregrine::Server's
// register_handler and its route methods). Each worker calls the factory once per route that
// names it; returning one shared, thread-safe instance is fine. One of the three is set: a
// synchronous Handler, an AsyncHandler (run through AsyncAdapter) or a WebSocket endpoint
// (WebSocketEndpoint, with its options).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "peregrine/server.h"

namespace peregrine::application {

struct RegisteredHandler {
  Server::HandlerFactory sync;
  Server::AsyncHandlerFactory async;
  Server::WebSocketFactory websocket = nullptr;
  WebSocketOptions websocket_options = {};
};

struct Registry : std::map<std::string, RegisteredHandler, std::less<>> {};

}  // namespace peregrine::application
