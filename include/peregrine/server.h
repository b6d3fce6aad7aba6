// libperegrine: the whole server around your own in-process handlers.
//
//   peregrine::Server server;
//   server.listen("127.0.0.1:8080")
//         .route("/", [](const peregrine::Request&, peregrine::Response& r) {
//           r.set_content_type("text/plain");
//           r.set_body("Hello world");
//         });
//   return server.run();
//
// Handlers run on the worker threads (one per core by default), several at once: a handler
// must be thread-safe, or be registered with a factory so each worker gets its own instance.
// Asynchronous handlers (peregrine/async.h) answer later from the worker's loop: callbacks or
// C++20 coroutines, streamed bodies both ways, timers and cross-worker posts
// (peregrine/worker.h). See docs/library.md.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "peregrine/async.h"
#include "peregrine/handler.h"
#include "peregrine/request.h"
#include "peregrine/response.h"
#include "peregrine/websocket.h"

namespace peregrine {

class Server {
 public:
  using HandlerFunction = std::function<void(const Request&, Response&)>;
  using HandlerFactory = std::function<std::shared_ptr<Handler>()>;
  // Also takes a coroutine: a function returning peregrine::Task.
  using AsyncFunction = std::function<void(const Request&, AsyncResponse)>;
  using AsyncHandlerFactory = std::function<std::shared_ptr<AsyncHandler>()>;
  using WebSocketFactory = std::function<std::shared_ptr<WebSocketHandler>()>;

  Server();
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // ---- Configure in code (ignored when config_file() is used) ----
  Server& listen(std::string address);     // repeatable; default 127.0.0.1:8080; port 0 = any free
  Server& workers(int count);              // 0 (default): one per core
  Server& access_log(std::string target);  // "off" (default), "stdout", "stderr" or a path
  // Requests whose path starts with `prefix` go to the handler; routes match in call order.
  // A HandlerFunction receives the request body in request.body.
  Server& route(std::string prefix, std::shared_ptr<Handler> handler);
  Server& route(std::string prefix, HandlerFunction function);
  Server& route_factory(std::string prefix, HandlerFactory factory);
  Server& static_files(std::string prefix, std::string root);  // serve a directory
  // Asynchronous routes. The request body is streamed to the handler (AsyncResponse::read or
  // on_body), never buffered in request.body. A factory runs once per worker (at start and on
  // each reload of a config file), on that worker's thread.
  Server& route_async(std::string prefix, AsyncFunction function);
  Server& route_async(std::string prefix, std::shared_ptr<AsyncHandler> handler);
  Server& route_async_factory(std::string prefix, AsyncHandlerFactory factory);
  // WebSocket endpoints (peregrine/websocket.h): an upgrade request to `prefix` opens a
  // connection; any other request gets 426 (no upgrade) or 400 (a malformed one). A shared
  // handler's callbacks run on every worker at once; a factory gives each worker its own.
  Server& websocket(std::string prefix, WebSocketCallbacks callbacks,
                    WebSocketOptions options = {});
  Server& websocket(std::string prefix, std::shared_ptr<WebSocketHandler> handler,
                    WebSocketOptions options = {});
  Server& websocket_factory(std::string prefix, WebSocketFactory factory,
                            WebSocketOptions options = {});

  // ---- Or from a TOML file, whose `handler = "NAME"` routes name handlers registered here ----
  Server& config_file(std::string path);
  Server& register_handler(std::string name, HandlerFactory factory);
  Server& register_async_handler(std::string name, AsyncHandlerFactory factory);
  Server& register_websocket(std::string name, WebSocketFactory factory,
                             WebSocketOptions options = {});

  // Whether run() handles SIGTERM/SIGINT/SIGQUIT/SIGHUP/SIGUSR1 (default: yes).
  Server& handle_signals(bool enabled);

  // Serves until stop() or a stop signal. Returns 0 after a clean stop, 1 when the configuration
  // is invalid or a listening socket cannot be bound (the reason goes to the error log).
  int run();
  // Thread-safe. graceful: finish in-flight requests first.
  void stop(bool graceful = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace peregrine
