// WebSocket endpoints (peregrine/websocket.h) on real connections. The pure codec
// (websocket/handshake.h, session.h) decides; this file moves its bytes: an Exchange over the raw
// tunnel a 101 head opens (handlers/stream_handler.h), the application's callbacks, per-client
// back-pressure and the endpoint's set of open connections on one worker (broadcast, graceful
// stop, reload).
//
// Ownership: a WebSocketConnection is reference counted: one reference per WebSocket handle, one
// for the link to the connection while the tunnel is open (dropped when the exchange ends or the
// client is gone), one for each deferred call. The hub (one per endpoint, route table and worker)
// lists the open connections by raw pointer: each removes itself as it ends.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "handlers/stream_handler.h"
#include "peregrine/ref_counted.h"
#include "peregrine/websocket.h"
#include "websocket/session.h"

namespace peregrine::detail {

class WebSocketConnection;

class WebSocketHub : public std::enable_shared_from_this<WebSocketHub> {
 public:
  // `name`: the registered handler's name, the same on every worker (broadcast_all finds the
  // other workers' hubs by it). `draining`: the worker's graceful-stop flag (null: never).
  WebSocketHub(std::string name, std::shared_ptr<WebSocketHandler> handler,
               WebSocketOptions options, const bool* draining);
  ~WebSocketHub();

  // This worker's current hub for `name` (the newest route table's), or null.
  static std::shared_ptr<WebSocketHub> current(const std::string& name);
  // Makes this hub the current one for its name on this thread.
  void make_current();

  const std::string& name() const { return name_; }
  WebSocketHandler& handler() { return *handler_; }
  const WebSocketOptions& options() const { return options_; }
  const std::vector<std::string_view>& subprotocols() const { return subprotocols_; }
  // What the upgrade negotiates from (options().permessage_deflate in the codec's terms).
  const websocket::DeflateServerPolicy& deflate_policy() const { return deflate_policy_; }
  Worker& worker() const { return *worker_; }
  // Whether the calling thread is the worker this hub belongs to (its route table's).
  bool on_own_worker() const { return worker_ && worker_ == this_worker(); }

  void add(WebSocketConnection* connection);
  void remove(WebSocketConnection* connection);
  size_t size() const { return open_.size(); }
  size_t broadcast(std::string_view data, MessageType type);
  void for_each(const std::function<void(WebSocket&)>& f);

 private:
  // Every kTickMs while connections are open: graceful stop, reload, pings, close timeouts.
  void tick();

  std::string name_;
  std::shared_ptr<WebSocketHandler> handler_;
  WebSocketOptions options_;
  std::vector<std::string_view> subprotocols_;  // views into options_.subprotocols
  websocket::DeflateServerPolicy deflate_policy_;
  const bool* draining_;
  Worker* worker_;
  std::vector<WebSocketConnection*> open_;
  Worker::TimerId tick_ = 0;
  // A broadcast's frames, each encoded once: the uncompressed one, and the compressed one per
  // server window (8-15) for the connections without server context takeover (their frames
  // depend on nothing else: a reset compressor and the endpoint's level and memLevel).
  std::string frame_;
  std::array<std::string, 8> deflated_frames_;
};

class WebSocketConnection final : public RefCounted, public handlers::Exchange {
 public:
  // `deflate`: the permessage-deflate parameters negotiated at the upgrade, if any.
  WebSocketConnection(const Request& request, handlers::Downstream& downstream,
                      std::shared_ptr<WebSocketHub> hub, std::string subprotocol,
                      const std::optional<websocket::PerMessageDeflate>& deflate);

  // The 101 is out: joins the hub and runs on_open.
  void open();
  // Whether the connection still holds this exchange (start() returns it then).
  bool linked() const { return downstream_ != nullptr; }

  // ---- handlers::Exchange ----
  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;
  void on_abort() override;

  // ---- For WebSocket and the hub ----
  uint64_t id() const { return id_; }
  bool is_open() const {
    return open_ && !ended_ && session_.state() == websocket::Session::State::kOpen;
  }
  const Request& request() const { return *request_; }
  std::string_view subprotocol() const { return subprotocol_; }
  const std::optional<websocket::PerMessageDeflate>& deflate() const { return deflate_; }
  WebSocketHub& hub() const { return *hub_; }
  std::any& data() { return data_; }
  IoStatus send(std::string_view data, MessageType type);
  IoStatus send_frame(std::string_view frame);  // an already encoded data frame (broadcast)
  void set_writable_callback(std::function<void()> callback) {
    writable_callback_ = std::move(callback);
  }
  uint64_t queued_bytes() const { return backlog_.size(); }
  void close(uint16_t code, std::string_view reason);
  // Called by the hub's timer. `now_ms`: steady clock.
  void tick(int64_t now_ms, bool draining, bool superseded);

 private:
  ~WebSocketConnection() override = default;
  // Hands bytes to the client, or to the backlog while it is behind.
  IoStatus push(std::string_view bytes);
  // The connection is over: leaves the hub, lets go of the tunnel (`finish`: close it after the
  // queued bytes; otherwise it is gone already) and runs on_close from the loop.
  void end(uint16_t code, std::string_view reason, bool finish);
  void handle_events();

  const Request* request_;
  handlers::Downstream* downstream_;  // null once the exchange ended
  std::shared_ptr<WebSocketHub> hub_;
  std::string subprotocol_;
  std::optional<websocket::PerMessageDeflate> deflate_;
  uint64_t id_;
  websocket::Session session_;
  std::vector<websocket::Event> events_;
  std::string out_;      // frames the session just wrote
  std::string backlog_;  // frames the client has not taken (after a kFull)
  bool full_ = false;    // the connection's queue is over its high-water mark
  bool open_ = false;
  bool ended_ = false;
  bool going_away_ = false;  // a 1001 was sent for a stop or reload
  int64_t last_heard_ms_;
  bool ping_sent_ = false;
  int64_t close_deadline_ms_ = 0;  // after our close(): when to stop waiting for the answer
  uint16_t close_code_ = 0;        // what our close() sent
  std::function<void()> writable_callback_;
  std::any data_;
};

}  // namespace peregrine::detail

namespace peregrine::application {

// The StreamHandler a route with a WebSocket handler gets (server/route_table.cc): the opening
// handshake, then a WebSocketConnection.
class WebSocketEndpoint final : public handlers::StreamHandler {
 public:
  WebSocketEndpoint(std::string name, std::shared_ptr<WebSocketHandler> handler,
                    WebSocketOptions options, const bool* draining);
  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

 private:
  std::shared_ptr<detail::WebSocketHub> hub_;
};

}  // namespace peregrine::application
