// WebSocket endpoints (RFC 6455) for libperegrine applications, in callback style:
//
//   peregrine::WebSocketCallbacks chat;
//   chat.on_message = [](peregrine::WebSocket ws, std::string_view text, peregrine::MessageType) {
//     ws.endpoint().broadcast_all(std::string(text));  // every client, on every worker
//   };
//   server.websocket("/chat", chat);
//
// The server answers the opening handshake (426 for a request that is no upgrade, 400 for a
// malformed one), then runs the protocol: fragments are joined, text is checked to be UTF-8, pings
// are answered, protocol errors close the connection with their code (1002, 1007, 1009). The
// application sees whole messages and the close.
//
// Rules:
//  - Everything runs on the worker thread that accepted the connection (like peregrine/async.h):
//    the callbacks, and every use of a WebSocket. To reach a connection from another worker, post
//    to it (broadcast_all does).
//  - on_open runs once, then on_message for each message, then on_close exactly once, whatever
//    ends the connection: the client's close (its code and reason), a protocol error (the code
//    sent), the application's close(), a disconnect without a close (1006), a graceful stop or a
//    reload (1001), a client too slow to read (1008, see max_queued_bytes).
//  - A WebSocket is a cheap handle (a reference count, not atomic). Copies may outlive the
//    connection: their calls then do nothing (send_* return kCancelled).
//  - Back-pressure: send_* return kFull when the client is behind; the message is queued all the
//    same, but the application should wait for on_writable() before sending more. Past
//    max_queued_bytes the client is dropped (TCP closed, on_close with 1008): memory is bounded
//    per connection whatever the application sends (broadcasts included).
#pragma once

#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/async.h"
#include "peregrine/request.h"
#include "peregrine/worker.h"

namespace peregrine {

enum class MessageType : uint8_t { kText, kBinary };

// permessage-deflate (RFC 7692): messages compressed both ways, when the client offers it (browsers
// and python3-websockets do; a client that does not still works, uncompressed). The defaults keep
// no zlib memory per connection between messages (docs/websocket.md, "permessage-deflate").
struct WebSocketDeflateOptions {
  bool enabled = true;
  // Keep our compressor's window from one message to the next: a better ratio for similar
  // messages, but a compressor per connection (~256 KiB at window 15) and broadcasts compressed
  // once per connection instead of once for all.
  bool server_context_takeover = false;
  // Let the client keep its window: we then keep an inflater per connection (~39 KiB at 15).
  bool client_context_takeover = false;
  int server_max_window_bits = 15;  // 8-15 (clamped): our compressor's window
  int client_max_window_bits = 15;  // 8-15 (clamped): the client's, when its offer lets us choose
  int level = 6;                    // 1-9: zlib's compression level
  int mem_level = 8;                // 1-9: zlib's hash memory for our compressor
  // Messages shorter than this are sent uncompressed (received ones are inflated whatever their
  // size): compressing a 64-byte message costs ~30x the instructions of sending it plain to save
  // a few bytes (docs/websocket.md, "Wiring").
  size_t min_compress_bytes = 1024;
};

struct WebSocketOptions {
  // A message (all its fragments) over this many bytes closes the connection with 1009.
  uint64_t max_message_bytes = 1024 * 1024;
  // Bytes waiting for a slow client (beyond what the socket took) before it is dropped with 1008.
  uint64_t max_queued_bytes = 4 * 1024 * 1024;
  // Subprotocols the endpoint speaks: the first of the client's Sec-WebSocket-Protocol list found
  // here is answered (WebSocket::subprotocol()); none in common: no subprotocol is named.
  std::vector<std::string> subprotocols;
  // Sends a ping after this long without hearing from the client; closes with 1001 when the next
  // interval passes in silence too (dead peers behind NAT, proxies). 0: off.
  std::chrono::milliseconds ping_interval{0};
  // Compression, negotiated per connection at the upgrade; `permessage_deflate.enabled = false`
  // never offers it.
  WebSocketDeflateOptions permessage_deflate;
};

namespace detail {
class WebSocketConnection;  // one open connection (src/handlers/application/websocket_endpoint.h)
class WebSocketHub;         // an endpoint's open connections on one worker
}  // namespace detail

class WebSocket;

// An endpoint's connections on the calling worker. Cheap to copy; one thread, like WebSocket.
class WebSocketEndpoint {
 public:
  explicit WebSocketEndpoint(std::shared_ptr<detail::WebSocketHub> hub) : hub_(std::move(hub)) {}

  // Sends one message to every open connection of this endpoint on this worker (one frame
  // encoded once for the connections without compression, one compressed frame for those with it
  // and the same window). Returns how many connections it was queued for.
  size_t broadcast(std::string_view data, MessageType type = MessageType::kText);
  // The same on every worker of the server (this one included, asynchronously): the way to reach
  // every client of a chat. Each worker encodes it once.
  void broadcast_all(std::string data, MessageType type = MessageType::kText);
  size_t size() const;  // open connections on this worker
  void for_each(const std::function<void(WebSocket&)>& f);

 private:
  std::shared_ptr<detail::WebSocketHub> hub_;
};

class WebSocket {
 public:
  explicit WebSocket(detail::WebSocketConnection* connection);
  WebSocket(const WebSocket& other);
  WebSocket(WebSocket&& other) noexcept;
  WebSocket& operator=(WebSocket other) noexcept;
  ~WebSocket();

  uint64_t id() const;   // unique in the process
  bool is_open() const;  // messages may be sent (false from the start of on_close)
  // The upgrade request. Valid while is_open(); copy what you need for later.
  const Request& request() const;
  std::string_view subprotocol() const;  // the one answered, or empty
  Worker& worker() const;
  WebSocketEndpoint endpoint() const;
  // Whatever the application keeps per connection (a user name, a room); dropped after on_close.
  std::any& data();

  IoStatus send_text(std::string_view text);  // `text` must be UTF-8
  IoStatus send_binary(std::string_view data);
  IoStatus send(std::string_view data, MessageType type);
  void on_writable(std::function<void()> callback);  // after a kFull, once the queue drained
  uint64_t queued_bytes() const;                     // waiting for the client

  // Starts the closing handshake (the code and a reason of at most 123 bytes). on_close runs when
  // the client answers, or after 5 seconds without its answer.
  void close(uint16_t code = 1000, std::string_view reason = {});

 private:
  detail::WebSocketConnection* connection_;
};

// Subclass for an object-style endpoint; a factory gives each worker its own (no locks).
class WebSocketHandler {
 public:
  virtual ~WebSocketHandler() = default;
  virtual void on_open(WebSocket ws) { (void)ws; }
  virtual void on_message(WebSocket ws, std::string_view data, MessageType type) = 0;
  virtual void on_close(WebSocket ws, uint16_t code, std::string_view reason) {
    (void)ws, (void)code, (void)reason;
  }
};

// Or functions; any may be empty.
struct WebSocketCallbacks {
  std::function<void(WebSocket)> on_open;
  std::function<void(WebSocket, std::string_view, MessageType)> on_message;
  std::function<void(WebSocket, uint16_t, std::string_view)> on_close;
};
// The functions as a handler (for Server::register_websocket, say).
std::shared_ptr<WebSocketHandler> websocket_handler(WebSocketCallbacks callbacks);

}  // namespace peregrine
