// A WebSocket echo server: every text or binary message comes back unchanged, as the same type.
// The WebSocket benchmark drives it; the integration tests too, through /stats.
//
//   ws://ADDR/...   any path but /stats and /broadcast: the echo (subprotocol "echo" when the
//                   client offers it)
//   ws://ADDR/broadcast  every message goes unchanged to every client of /broadcast, on every
//                   worker, the sender included (the benchmark's broadcast scenario)
//   GET /stats      {"open": N, "closed": N, "last_close": CODE}, over all workers
//
// Usage: websocket_echo [--listen ADDR] [--workers N] [--max-message-bytes N]
//                       [--max-queued-bytes N] [--ping-interval-ms MS] [--deflate MODE]
//   --deflate   permessage-deflate when the client offers it: "on" (the default: the library's,
//               no context takeover), "off", or "takeover" (context takeover both ways)
//        websocket_echo --config FILE [...]   routes from a TOML file naming the handlers
//                                             "echo" (the WebSocket) and "stats"
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../common/command_line.h"
#include "../common/websocket_deflate.h"
#include "peregrine/server.h"
#include "peregrine/websocket.h"

namespace {

// Relaxed atomics: the figures are for /stats, read by any worker.
std::atomic<int> open_count{0};
std::atomic<int> closed_count{0};
std::atomic<int> last_close{0};

uint64_t number(std::map<std::string, std::string>& options, const char* name, uint64_t value) {
  return options.count(name) ? std::strtoull(options[name].c_str(), nullptr, 10) : value;
}

class Stats final : public peregrine::Handler {
 public:
  void handle(const peregrine::Request&, peregrine::Response& r) override {
    r.set_content_type("application/json");
    r.set_body("{\"open\": " + std::to_string(open_count.load()) +
               ", \"closed\": " + std::to_string(closed_count.load()) +
               ", \"last_close\": " + std::to_string(last_close.load()) + "}\n");
  }
};

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  auto options = examples::apply_command_line(server, argc, argv);
  peregrine::WebSocketOptions ws;
  ws.max_message_bytes = number(options, "--max-message-bytes", ws.max_message_bytes);
  ws.max_queued_bytes = number(options, "--max-queued-bytes", ws.max_queued_bytes);
  ws.ping_interval = std::chrono::milliseconds(number(options, "--ping-interval-ms", 0));
  ws.subprotocols = {"echo"};
  examples::apply_deflate_mode(ws, options);

  peregrine::WebSocketCallbacks echo;
  echo.on_open = [](peregrine::WebSocket) { open_count.fetch_add(1, std::memory_order_relaxed); };
  echo.on_message = [](peregrine::WebSocket socket, std::string_view data,
                       peregrine::MessageType type) {
    // A client that stops reading gets kFull, then is dropped past max_queued_bytes: an echo
    // server has nothing better to do than keep echoing.
    socket.send(data, type);
  };
  echo.on_close = [](peregrine::WebSocket, uint16_t code, std::string_view) {
    open_count.fetch_sub(1, std::memory_order_relaxed);
    closed_count.fetch_add(1, std::memory_order_relaxed);
    last_close.store(code, std::memory_order_relaxed);
  };
  peregrine::WebSocketCallbacks broadcast;
  broadcast.on_message = [](peregrine::WebSocket socket, std::string_view data,
                            peregrine::MessageType type) {
    socket.endpoint().broadcast_all(std::string(data), type);
  };
  if (options.count("--config")) {
    auto handler = peregrine::websocket_handler(echo);
    server.config_file(options["--config"])
        .register_websocket(
            "echo", [handler] { return handler; }, ws)
        .register_handler("stats", [] { return std::make_shared<Stats>(); });
  } else {
    server.route("/stats", std::make_shared<Stats>())
        .websocket("/broadcast", broadcast, ws)
        .websocket("/", echo, ws);
  }
  return server.run();
}
