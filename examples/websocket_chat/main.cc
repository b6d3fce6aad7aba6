// A broadcast chat over WebSocket: every message a client sends goes to every client connected,
// whichever worker holds it (WebSocketEndpoint::broadcast_all posts it to each worker, which
// sends one encoded frame to its own clients).
//
//   GET /        a small HTML page that joins the chat
//   ws://ADDR/chat   on connect: {"welcome": "guest-ID", "worker": W}; then each line any client
//                    sends arrives to all as "guest-ID: text"; joins and leaves are announced;
//                    "/quit" makes the server close the connection (1000, "bye")
//
// Usage: websocket_chat [--listen ADDR] [--workers N] [--deflate on|off|takeover]
//   --deflate   permessage-deflate when the client offers it (as in websocket_echo)
#include <string>
#include <string_view>

#include "../common/command_line.h"
#include "../common/websocket_deflate.h"
#include "peregrine/server.h"
#include "peregrine/websocket.h"

namespace {

constexpr std::string_view kPage = R"(<!doctype html>
<meta charset="utf-8"><title>Peregrine chat</title>
<pre id="log" style="height:20em;overflow:auto;border:1px solid #ccc"></pre>
<form id="f"><input id="m" autocomplete="off" autofocus size="60"><button>Send</button></form>
<script>
const log = document.getElementById("log");
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/chat");
ws.onmessage = (e) => { log.textContent += e.data + "\n"; log.scrollTop = log.scrollHeight; };
ws.onclose = (e) => { log.textContent += "(closed: " + e.code + ")\n"; };
document.getElementById("f").onsubmit = (e) => {
  e.preventDefault();
  const m = document.getElementById("m");
  if (m.value) ws.send(m.value);
  m.value = "";
};
</script>
)";

std::string name_of(peregrine::WebSocket& ws) {
  return "guest-" + std::to_string(ws.id());
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  auto options = examples::apply_command_line(server, argc, argv);
  peregrine::WebSocketOptions ws_options;
  examples::apply_deflate_mode(ws_options, options);

  peregrine::WebSocketCallbacks chat;
  chat.on_open = [](peregrine::WebSocket ws) {
    ws.data() = name_of(ws);
    ws.send_text("{\"welcome\": \"" + name_of(ws) +
                 "\", \"worker\": " + std::to_string(ws.worker().id()) + "}");
    ws.endpoint().broadcast_all(name_of(ws) + " joined");
  };
  chat.on_message = [](peregrine::WebSocket ws, std::string_view text, peregrine::MessageType) {
    if (text == "/quit") {  // the server closes: on_close follows the client's answer
      ws.close(1000, "bye");
      return;
    }
    ws.endpoint().broadcast_all(std::any_cast<std::string&>(ws.data()) + ": " + std::string(text));
  };
  chat.on_close = [](peregrine::WebSocket ws, uint16_t, std::string_view) {
    ws.endpoint().broadcast_all(name_of(ws) + " left");
  };
  server.websocket("/chat", chat, ws_options);
  server.route("/", [](const peregrine::Request&, peregrine::Response& r) {
    r.set_content_type("text/html; charset=utf-8");
    r.set_body(kPage);
  });
  return server.run();
}
