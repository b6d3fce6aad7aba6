#include "handlers/application/websocket_endpoint.h"

#include <atomic>
#include <chrono>
#include <map>
#include <utility>

#include "core/log.h"
#include "websocket/frame.h"
#include "websocket/handshake.h"

namespace peregrine::detail {

namespace {

constexpr std::chrono::milliseconds kTick(250);  // stop, reload, ping and close-timeout checks
constexpr int64_t kCloseWaitMs = 5000;           // for the client's answer to our close

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Each worker thread's newest hub per endpoint name: a reload builds new ones; the old ones see
// they are superseded and close their connections with 1001.
std::map<std::string, std::weak_ptr<WebSocketHub>>& current_hubs() {
  thread_local std::map<std::string, std::weak_ptr<WebSocketHub>> hubs;
  return hubs;
}

std::atomic<uint64_t> next_id{1};

}  // namespace

// ---- WebSocketHub ----------------------------------------------------------------------------

WebSocketHub::WebSocketHub(std::string name, std::shared_ptr<WebSocketHandler> handler,
                           WebSocketOptions options, const bool* draining)
    : name_(std::move(name)),
      handler_(std::move(handler)),
      options_(std::move(options)),
      draining_(draining),
      worker_(this_worker()) {
  for (const std::string& p : options_.subprotocols) subprotocols_.push_back(p);
  const WebSocketDeflateOptions& d = options_.permessage_deflate;
  deflate_policy_.enabled = d.enabled;
  deflate_policy_.server_context_takeover = d.server_context_takeover;
  deflate_policy_.client_context_takeover = d.client_context_takeover;
  deflate_policy_.server_max_window_bits = d.server_max_window_bits;  // the codec clamps these
  deflate_policy_.client_max_window_bits = d.client_max_window_bits;
  deflate_policy_.mem_level = d.mem_level;
  deflate_policy_.compression_level = d.level;
  deflate_policy_.min_compress_bytes = d.min_compress_bytes;
}

WebSocketHub::~WebSocketHub() {
  // Connections hold the hub, so none is open and the timer is stopped (remove()).
}

std::shared_ptr<WebSocketHub> WebSocketHub::current(const std::string& name) {
  auto it = current_hubs().find(name);
  return it == current_hubs().end() ? nullptr : it->second.lock();
}

void WebSocketHub::make_current() {
  current_hubs()[name_] = weak_from_this();
}

void WebSocketHub::add(WebSocketConnection* connection) {
  open_.push_back(connection);
  if (!tick_ && worker_)
    tick_ = worker_->every(kTick, [weak = weak_from_this()] {
      if (auto hub = weak.lock()) hub->tick();
    });
}

void WebSocketHub::remove(WebSocketConnection* connection) {
  for (size_t i = 0; i < open_.size(); ++i) {
    if (open_[i] != connection) continue;
    open_[i] = open_.back();
    open_.pop_back();
    break;
  }
  if (open_.empty() && tick_) {
    worker_->cancel(tick_);
    tick_ = 0;
  }
}

size_t WebSocketHub::broadcast(std::string_view data, MessageType type) {
  const websocket::Opcode opcode =
      type == MessageType::kText ? websocket::Opcode::kText : websocket::Opcode::kBinary;
  // A server's frames carry no mask: one encoding serves every connection that compresses
  // nothing, and one compressed encoding every connection whose compressor starts each message
  // afresh with the same window. Each is made on first need (a hub of plain clients pays as
  // before).
  frame_.clear();
  enum class Deflated : uint8_t { kNotYet, kFrame, kPlain };
  std::array<Deflated, 8> deflated{};  // by window bits - 8
  auto plain = [&]() -> std::string_view {
    if (frame_.empty()) websocket::write_frame(frame_, opcode, data);
    return frame_;
  };
  auto frame_for = [&](const websocket::PerMessageDeflate& pmd) -> std::string_view {
    if (data.empty() || data.size() < pmd.min_compress_bytes) return plain();
    const size_t i = static_cast<size_t>(pmd.server_max_window_bits - 8);
    if (deflated[i] == Deflated::kNotYet) {
      std::string compressed;
      websocket::MessageDeflater deflater(pmd.server_max_window_bits, false, pmd.mem_level,
                                          pmd.compression_level);
      deflated_frames_[i].clear();
      deflated[i] = Deflated::kPlain;  // it does not get smaller: the plain frame serves
      if (deflater.compress(data, &compressed)) {
        websocket::write_frame(deflated_frames_[i], opcode, compressed, true, websocket::kRsv1);
        deflated[i] = Deflated::kFrame;
      }
    }
    return deflated[i] == Deflated::kFrame ? std::string_view(deflated_frames_[i]) : plain();
  };
  // A client dropped as too slow leaves the list while we walk it: walk a copy, holding each.
  std::vector<Ref<WebSocketConnection>> targets(open_.begin(), open_.end());
  size_t sent = 0;
  for (const Ref<WebSocketConnection>& c : targets) {
    const std::optional<websocket::PerMessageDeflate>& pmd = c->deflate();
    IoStatus status;
    if (!pmd)
      status = c->send_frame(plain());
    else if (pmd->server_no_context_takeover)
      status = c->send_frame(frame_for(*pmd));
    else
      status = c->send(data, type);  // its own compressor's window: compressed for it alone
    if (status != IoStatus::kCancelled) ++sent;
  }
  return sent;
}

void WebSocketHub::for_each(const std::function<void(WebSocket&)>& f) {
  std::vector<Ref<WebSocketConnection>> targets(open_.begin(), open_.end());
  for (const Ref<WebSocketConnection>& c : targets) {
    if (!c->is_open()) continue;
    WebSocket ws(c.get());
    f(ws);
  }
}

void WebSocketHub::tick() {
  std::shared_ptr<WebSocketHub> newest = current(name_);
  bool superseded = false;
  if (!newest)
    make_current();  // the route table that replaced ours failed to build: we are still it
  else
    superseded = newest.get() != this;
  const bool draining = draining_ && *draining_;
  const int64_t now = now_ms();
  std::vector<Ref<WebSocketConnection>> targets(open_.begin(), open_.end());
  for (const Ref<WebSocketConnection>& c : targets) c->tick(now, draining, superseded);
}

// ---- WebSocketConnection ---------------------------------------------------------------------

WebSocketConnection::WebSocketConnection(const Request& request, handlers::Downstream& downstream,
                                         std::shared_ptr<WebSocketHub> hub, std::string subprotocol,
                                         const std::optional<websocket::PerMessageDeflate>& deflate)
    : request_(&request),
      downstream_(&downstream),
      hub_(std::move(hub)),
      subprotocol_(std::move(subprotocol)),
      deflate_(deflate),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      session_(websocket::Role::kServer,
               websocket::SessionLimits{hub_->options().max_message_bytes}),
      last_heard_ms_(now_ms()) {
  // Before any byte arrives: the client may compress its very first message.
  if (deflate_) session_.enable_permessage_deflate(*deflate_);
  add_ref();  // the link: the connection holds us until the exchange ends
}

void WebSocketConnection::open() {
  open_ = true;
  hub_->add(this);
  hub_->handler().on_open(WebSocket(this));
}

bool WebSocketConnection::on_body(std::string_view bytes, bool last) {
  if (ended_) return true;
  Ref<WebSocketConnection> keep(this);
  last_heard_ms_ = now_ms();
  ping_sent_ = false;
  events_.clear();
  out_.clear();
  session_.receive(bytes, events_, out_);
  push(out_);  // pongs, the answer to a close, the close of a failure
  handle_events();
  if (last && !ended_) end(1006, "", true);  // the client shut its side without a close frame
  return true;
}

void WebSocketConnection::handle_events() {
  for (websocket::Event& event : events_) {
    if (ended_) return;
    switch (event.type) {
      case websocket::Event::Type::kText:
      case websocket::Event::Type::kBinary:
        hub_->handler().on_message(WebSocket(this), event.data,
                                   event.type == websocket::Event::Type::kText
                                       ? MessageType::kText
                                       : MessageType::kBinary);
        break;
      case websocket::Event::Type::kPing:
      case websocket::Event::Type::kPong:
        break;  // answered by the session; either way the client is alive (on_body)
      case websocket::Event::Type::kClose:
        end(event.code, event.data, true);
        break;
      case websocket::Event::Type::kError:
        LOG_INFO("websocket %.*s: client broke the protocol, closing with %u: %s",
                 static_cast<int>(request_->path.size()), request_->path.data(), event.code,
                 event.data.c_str());
        end(event.code, event.data, true);
        break;
    }
  }
}

void WebSocketConnection::on_writable() {
  if (ended_) return;
  Ref<WebSocketConnection> keep(this);
  full_ = false;
  if (!backlog_.empty()) {
    std::string waiting;
    waiting.swap(backlog_);
    if (push(waiting) == IoStatus::kCancelled) return;
  }
  if (!full_ && writable_callback_) {
    std::function<void()> callback = writable_callback_;  // it may replace itself
    callback();
  }
}

void WebSocketConnection::on_abort() {
  downstream_ = nullptr;  // the client is gone: the connection is no longer ours to touch
  end(1006, "", false);
}

IoStatus WebSocketConnection::send(std::string_view data, MessageType type) {
  if (ended_ || session_.state() != websocket::Session::State::kOpen) return IoStatus::kCancelled;
  out_.clear();
  if (type == MessageType::kText)
    session_.send_text(data, out_);
  else
    session_.send_binary(data, out_);
  return push(out_);
}

IoStatus WebSocketConnection::send_frame(std::string_view frame) {
  if (ended_ || session_.state() != websocket::Session::State::kOpen) return IoStatus::kCancelled;
  return push(frame);
}

IoStatus WebSocketConnection::push(std::string_view bytes) {
  if (!downstream_) return IoStatus::kCancelled;
  if (full_) {
    if (backlog_.size() + bytes.size() > hub_->options().max_queued_bytes) {
      // The slow-receiver policy: no unbounded queue per client. A close frame could not reach a
      // client that does not read, so the TCP connection goes at once.
      LOG_WARN("websocket %.*s: client too slow, %zu bytes queued: dropped (1008)",
               static_cast<int>(request_->path.size()), request_->path.data(),
               backlog_.size() + bytes.size());
      backlog_.clear();
      handlers::Downstream* downstream = std::exchange(downstream_, nullptr);
      Ref<WebSocketConnection> keep(this);
      downstream->fail(500);  // after the head: closes the connection
      end(websocket::close_code::kPolicyViolation, "client too slow", false);
      return IoStatus::kCancelled;
    }
    backlog_.append(bytes);
    return IoStatus::kFull;
  }
  if (bytes.empty()) return IoStatus::kOk;
  switch (downstream_->send_body(bytes)) {
    case handlers::Downstream::Sent::kMore:
      return IoStatus::kOk;
    case handlers::Downstream::Sent::kFull:
      full_ = true;
      return IoStatus::kFull;
    case handlers::Downstream::Sent::kGone:
      downstream_ = nullptr;
      end(1006, "", false);
      return IoStatus::kCancelled;
  }
  return IoStatus::kCancelled;
}

void WebSocketConnection::close(uint16_t code, std::string_view reason) {
  if (ended_ || session_.state() != websocket::Session::State::kOpen) return;
  if (!websocket::is_valid_close_code(code) || code == 1010) code = websocket::close_code::kNormal;
  out_.clear();
  session_.close(code, reason, out_);
  close_code_ = code;
  close_deadline_ms_ = now_ms() + kCloseWaitMs;
  push(out_);
}

void WebSocketConnection::tick(int64_t now, bool draining, bool superseded) {
  if (ended_) return;
  if ((draining || superseded) && !going_away_) {
    going_away_ = true;
    close(websocket::close_code::kGoingAway,
          draining ? "server shutting down" : "server reloading");
    return;
  }
  if (close_deadline_ms_ && now >= close_deadline_ms_) {
    end(close_code_, "the client did not answer the close", true);
    return;
  }
  const int64_t interval = hub_->options().ping_interval.count();
  if (interval <= 0 || session_.state() != websocket::Session::State::kOpen) return;
  if (ping_sent_ && now - last_heard_ms_ >= 2 * interval) {
    LOG_INFO("websocket %.*s: no answer to a ping, closing",
             static_cast<int>(request_->path.size()), request_->path.data());
    out_.clear();
    session_.close(websocket::close_code::kGoingAway, "ping timeout", out_);
    push(out_);
    end(websocket::close_code::kGoingAway, "ping timeout", true);
  } else if (!ping_sent_ && now - last_heard_ms_ >= interval) {
    ping_sent_ = true;
    out_.clear();
    session_.send_ping({}, out_);
    push(out_);
  }
}

void WebSocketConnection::end(uint16_t code, std::string_view reason, bool finish) {
  if (ended_) return;
  ended_ = true;
  Ref<WebSocketConnection> keep(this);
  hub_->remove(this);
  writable_callback_ = nullptr;  // it may hold a WebSocket: a cycle otherwise
  if (handlers::Downstream* downstream = std::exchange(downstream_, nullptr)) {
    // What waits for a slow client (a close frame, say) still goes, within the queue's bound.
    if (!backlog_.empty()) downstream->send_body(backlog_);
    if (finish)
      downstream->finish();  // in a tunnel: closes once the queued bytes are out
    else
      downstream->fail(500);  // after the head: closes the connection at once
  }
  backlog_.clear();
  backlog_.shrink_to_fit();
  if (open_) {
    // From the loop, never inside another callback of the same connection (a send that finds
    // the client gone, a close inside on_message).
    hub_->worker().after(std::chrono::milliseconds(0),
                         [self = Ref<WebSocketConnection>(this), code, why = std::string(reason)] {
                           self->hub_->handler().on_close(WebSocket(self.get()), code, why);
                           self->data_.reset();
                         });
  }
  release();  // the link
}

}  // namespace peregrine::detail

// ---- The public handles ------------------------------------------------------------------------

namespace peregrine {

WebSocket::WebSocket(detail::WebSocketConnection* connection) : connection_(connection) {
  connection_->add_ref();
}
WebSocket::WebSocket(const WebSocket& other) : WebSocket(other.connection_) {}
WebSocket::WebSocket(WebSocket&& other) noexcept : connection_(other.connection_) {
  other.connection_ = nullptr;
}
WebSocket& WebSocket::operator=(WebSocket other) noexcept {
  std::swap(connection_, other.connection_);
  return *this;
}
WebSocket::~WebSocket() {
  if (connection_) connection_->release();
}

uint64_t WebSocket::id() const {
  return connection_->id();
}
bool WebSocket::is_open() const {
  return connection_->is_open();
}
const Request& WebSocket::request() const {
  return connection_->request();
}
std::string_view WebSocket::subprotocol() const {
  return connection_->subprotocol();
}
Worker& WebSocket::worker() const {
  return connection_->hub().worker();
}
WebSocketEndpoint WebSocket::endpoint() const {
  return WebSocketEndpoint(connection_->hub().shared_from_this());
}
std::any& WebSocket::data() {
  return connection_->data();
}
IoStatus WebSocket::send_text(std::string_view text) {
  return connection_->send(text, MessageType::kText);
}
IoStatus WebSocket::send_binary(std::string_view data) {
  return connection_->send(data, MessageType::kBinary);
}
IoStatus WebSocket::send(std::string_view data, MessageType type) {
  return connection_->send(data, type);
}
void WebSocket::on_writable(std::function<void()> callback) {
  connection_->set_writable_callback(std::move(callback));
}
uint64_t WebSocket::queued_bytes() const {
  return connection_->queued_bytes();
}
void WebSocket::close(uint16_t code, std::string_view reason) {
  connection_->close(code, reason);
}

size_t WebSocketEndpoint::broadcast(std::string_view data, MessageType type) {
  return hub_->broadcast(data, type);
}
void WebSocketEndpoint::broadcast_all(std::string data, MessageType type) {
  // Each worker finds its own hub of the same endpoint by name (never this one's: a hub belongs
  // to one thread).
  hub_->worker().post_all([name = hub_->name(), data = std::move(data), type] {
    if (std::shared_ptr<detail::WebSocketHub> hub = detail::WebSocketHub::current(name))
      hub->broadcast(data, type);
  });
}
size_t WebSocketEndpoint::size() const {
  return hub_->size();
}
void WebSocketEndpoint::for_each(const std::function<void(WebSocket&)>& f) {
  hub_->for_each(f);
}

}  // namespace peregrine

// ---- The route's handler -----------------------------------------------------------------------

namespace peregrine {

namespace {

class CallbackHandler final : public WebSocketHandler {
 public:
  explicit CallbackHandler(WebSocketCallbacks callbacks) : callbacks_(std::move(callbacks)) {}
  void on_open(WebSocket ws) override {
    if (callbacks_.on_open) callbacks_.on_open(std::move(ws));
  }
  void on_message(WebSocket ws, std::string_view data, MessageType type) override {
    if (callbacks_.on_message) callbacks_.on_message(std::move(ws), data, type);
  }
  void on_close(WebSocket ws, uint16_t code, std::string_view reason) override {
    if (callbacks_.on_close) callbacks_.on_close(std::move(ws), code, reason);
  }

 private:
  WebSocketCallbacks callbacks_;
};

}  // namespace

std::shared_ptr<WebSocketHandler> websocket_handler(WebSocketCallbacks callbacks) {
  return std::make_shared<CallbackHandler>(std::move(callbacks));
}

}  // namespace peregrine

namespace peregrine::application {

WebSocketEndpoint::WebSocketEndpoint(std::string name, std::shared_ptr<WebSocketHandler> handler,
                                     WebSocketOptions options, const bool* draining)
    : hub_(std::make_shared<detail::WebSocketHub>(std::move(name), std::move(handler),
                                                  std::move(options), draining)) {
  hub_->make_current();
}

handlers::Exchange* WebSocketEndpoint::start(const Request& request,
                                             handlers::Downstream& downstream) {
  websocket::HandshakeAnswer answer = websocket::check_upgrade(request);
  Response head;
  if (answer.status == 101 && !hub_->on_own_worker()) {
    // Only a worker thread runs the route table that built this hub; anything else is a bug.
    LOG_ERROR("websocket %.*s: endpoint started off its worker thread",
              static_cast<int>(request.path.size()), request.path.data());
    downstream.fail(500);
    return nullptr;
  }
  if (answer.status != 101) {
    LOG_INFO("websocket %.*s: %d: %.*s", static_cast<int>(request.path.size()), request.path.data(),
             answer.status, static_cast<int>(answer.error.size()), answer.error.data());
    head.set_status(answer.status);
    for (const auto& [name, value] : answer.headers) head.add_header(name, value);
    downstream.respond(head);
    return nullptr;
  }
  std::string_view protocol = websocket::select_subprotocol(request, hub_->subprotocols());
  if (!protocol.empty()) websocket::set_subprotocol(answer, protocol);
  // No acceptable offer (or compression off): the 101 goes without the extension.
  std::string extensions;
  std::optional<websocket::PerMessageDeflate> deflate;
  if (hub_->deflate_policy().enabled)
    deflate = websocket::negotiate_permessage_deflate(request, hub_->deflate_policy(), &extensions);
  if (deflate) websocket::set_extensions(answer, extensions);
  head.set_status(101);
  for (const auto& [name, value] : answer.headers) head.add_header(name, value);
  Ref<detail::WebSocketConnection> connection(
      new detail::WebSocketConnection(request, downstream, hub_, std::string(protocol), deflate));
  if (!downstream.send_head(head, -1)) {
    connection->on_abort();  // gone before it opened: no callbacks
    return nullptr;
  }
  connection->open();
  return connection->linked() ? connection.get() : nullptr;
}

}  // namespace peregrine::application
