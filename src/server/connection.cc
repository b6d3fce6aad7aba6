#include "server/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "compress/compress.h"
#include "core/address_text.h"
#include "core/log.h"
#include "core/spares.h"
#include "core/strings.h"
#include "event/deferred.h"
#include "http/client_address.h"
#include "http/proxy_protocol.h"
#include "http/request_id.h"
#include "http/status.h"
#include "server/request_body.h"
#include "server/route_table.h"
#include "server/worker.h"

namespace peregrine::server {

using handlers::Downstream;
using handlers::Exchange;

struct Connection::Extras {
  PeerAddress socket_peer{};  // the socket's own peer once a PROXY header replaced peer_
  socklen_t socket_peer_len = 0;
  // Our end of the connection, looked up once for CGI parameters. A unix listener's address is
  // cut to its family, which is all SERVER_ADDR needs ("unix:").
  PeerAddress local{};
  socklen_t local_len = 0;
  // Keeps the TLS contexts' callbacks' data (in the route table) alive during the handshake.
  Ref<RouteTable> handshake_routes;
  // Bytes the poller handed over while reading was blocked (receiving_), read before any newer.
  std::string unread;
};

struct Connection::RequestScope : RecycledAllocation<RequestScope> {
  PeerAddress forwarded{};  // this request's client, named by a trusted proxy's header
  char request_id[32];      // [request_id]: the one made for the request in progress
  // For custom access-log formats ($request_time, $request_length, $bytes_sent).
  int64_t started_ms = 0;
  uint32_t head_bytes = 0;
  uint32_t response_head_bytes = 0;
  // Metrics: the figures the request counts in (its route's, or its site's for the route
  // table's own answers) and when it was routed; reset once counted.
  metrics::RouteCounters* counting = nullptr;
  int64_t started_us = 0;
  // While an exchange without an InFlight runs its start() (see start_exchange): its selection.
  const Selection* starting = nullptr;
};

Connection::Extras& Connection::extras() {
  if (!extras_) extras_ = std::make_unique<Extras>();
  return *extras_;
}

Connection::RequestScope& Connection::scope() {
  if (!scope_) scope_.reset(new RequestScope);
  return *scope_;
}

void Connection::set_socket_peer(Request& request) const {
  const bool behind_proxy = extras_ && extras_->socket_peer_len;
  request.socket_peer = behind_proxy ? &extras_->socket_peer.sa : &peer_.sa;
  request.socket_peer_len = behind_proxy ? extras_->socket_peer_len : peer_len_;
}

// A request that outlives the event that parsed its head: its body is still arriving (kBody:
// kept for a handler that wants it, else dropped), or an asynchronous handler answers it
// (kExchange: the body streams to the exchange). The head stays in the read buffer before
// `origin`, so the Request's views stay valid; body bytes are decoded from there on.
// One per such request: recycled per thread rather than allocated each time (see core/spares.h).
struct InFlight final : event::Disposable, RecycledAllocation<InFlight> {
  HeldRequest request;
  Ref<RouteTable> routes;  // keeps the site, the route and its handler alive across a reload
  Selection selection;
  RequestBody body;
  uint32_t origin = 0;  // where the body's bytes start in the read buffer (after the head)
  // kBody
  bool keep_body = false;  // the handler wants the body; otherwise it is dropped
  std::string buffered;
  // kExchange
  Exchange* exchange = nullptr;  // null once the exchange has ended or been aborted
  uint64_t body_bytes_sent = 0;
  int status = 0;
  bool body_paused = false;  // on_body() returned false; waiting for resume_body()
  bool head_sent = false;
  bool chunked_out = false;      // the response body goes out chunked
  bool body_allowed = true;      // false for HEAD, 1xx, 204, 304: body bytes are dropped
  bool tunnel = false;           // after a 101: raw bytes both ways
  bool notify_writable = false;  // send_body() said kFull
  // The exchange's Downstream when the route compresses (compress/compress.h).
  compress::StreamSlot compress;
};

namespace {

constexpr size_t kExchangeHighWater = 64 * 1024;
// Answers up to this size go out through the poller where it sends (io_uring): it copies them.
constexpr size_t kPollerSendLimit = 4 * 1024;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kTimeoutResponse =
    "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

// "HTTP/1.1 200 OK\r\n" for every status, built once: one append per response instead of four.
std::string_view status_line(int status) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> all(600);
    for (int code = 100; code < 600; ++code)
      all[static_cast<size_t>(code)] = "HTTP/1.1 " + std::to_string(code) + " " +
                                       std::string(http::reason_phrase(code)) + "\r\n";
    return all;
  }();
  if (status < 100 || status > 599) status = 500;
  return lines[static_cast<size_t>(status)];
}

// "1a2b\r\n": a chunk's size line (RFC 9112 7.1).
void append_chunk_size(std::string& out, size_t size) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[size & 15];
    size >>= 4;
  } while (size);
  while (n) out.push_back(digits[--n]);
  out.append("\r\n");
}

}  // namespace

// An idle connection's memory is this object: 10,000 idle connections must fit in 3 MB with the
// poller's share (issue 15; bench/run.py --scenarios idle10k). Grow it only with a reason.
static_assert(sizeof(Connection) <= 256);

Connection::Connection(Worker& worker, int fd, const sockaddr* peer, socklen_t peer_len,
                       const ListenerOptions& listener)
    : worker_(worker),
      listener_(listener),
      fd_(fd),
      parser_(http1::ParserLimits{
          .max_head_bytes = worker.limits().max_header_bytes,
          .max_target_bytes = std::min<uint32_t>(8192, worker.limits().max_header_bytes)}) {
  timer.owner = this;
  peer_len_ = std::min<socklen_t>(peer_len, sizeof peer_);
  std::memcpy(&peer_, peer, peer_len_);
  thread_local uint64_t connections_made = 0;  // one worker per thread: a worker's serial
  serial_ = ++connections_made;
}

Connection::~Connection() = default;

void Connection::start() {
  if (listener_.proxy_protocol) {
    const auto& senders = worker_.routes().config().client_address.proxy_protocol_from;
    if (!senders.empty() && !http::in_any(senders, &peer_.sa)) {
      AddressText text(&peer_.sa);
      LOG_INFO("PROXY protocol: %.*s is not in client_address.proxy_protocol_from: closed",
               static_cast<int>(text.ip_length), text.ip);
      close_now();
      return;
    }
    awaiting_proxy_header_ = true;
    read_proxy_header();
    return;
  }
  if (listener_.tls && !start_tls()) return;
  on_readable();
}

// ---- PROXY protocol ---------------------------------------------------------------------------

// The header is peeked, then exactly its bytes are taken: what follows (a TLS ClientHello, an
// HTTP/2 preface) stays in the socket for whichever reader comes next. A header that is not
// complete within the header timeout, malformed, too long or cut by the client's close ends the
// connection before a byte is answered.
void Connection::read_proxy_header() {
  char bytes[http::kProxyMaxLength];
  ssize_t n;
  do {
    n = ::recv(fd_, bytes, sizeof bytes, MSG_PEEK);
  } while (n < 0 && errno == EINTR);
  AddressText from(&peer_.sa);
  if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
    LOG_DEBUG("PROXY protocol: %.*s closed before its header", static_cast<int>(from.ip_length),
              from.ip);
    close_now();
    return;
  }
  const http::ProxyHeader header =
      http::parse_proxy_header(std::string_view(bytes, n > 0 ? static_cast<size_t>(n) : 0));
  if (header.status == http::ProxyStatus::kError) {
    LOG_INFO("PROXY protocol: bad header from %.*s: %s: closed", static_cast<int>(from.ip_length),
             from.ip, header.error);
    close_now();
    return;
  }
  if (header.status == http::ProxyStatus::kNeedMore) {
    if (hangup_seen_) {
      LOG_DEBUG("PROXY protocol: %.*s closed within its header", static_cast<int>(from.ip_length),
                from.ip);
      close_now();
      return;
    }
    if (timer.list != &worker_.header_timers) set_timer(worker_.header_timers);
    if (!ensure_registered()) close_now();
    return;
  }
  ssize_t taken;
  do {
    taken = ::recv(fd_, bytes, header.length, 0);
  } while (taken < 0 && errno == EINTR);
  if (taken != static_cast<ssize_t>(header.length)) {
    close_now();
    return;
  }
  awaiting_proxy_header_ = false;
  event::TimerList::disarm(timer);
  if (header.has_address) {
    Extras& x = extras();
    x.socket_peer_len = peer_len_;
    std::memcpy(&x.socket_peer, &peer_, peer_len_);
    peer_len_ = std::min<socklen_t>(header.source_len, sizeof peer_);
    std::memcpy(&peer_, &header.source, peer_len_);
  }
  if (listener_.tls && !start_tls()) return;
  on_readable();
}

// ---- TLS --------------------------------------------------------------------------------------

// Returns true when the handshake is done and requests can be read; false when it waits for the
// client (the connection is then registered) or failed (closed).
bool Connection::start_tls() {
  const tls::ServerContexts* contexts = worker_.routes().tls();
  if (contexts) tls_ = contexts->accept(fd_, /*offer_h2=*/listener_.http2);
  if (!tls_) {
    // No context: a reload removed TLS from this listener's configuration (the listener keeps
    // its options until a restart, and the reload said so); or out of memory.
    LOG_DEBUG("cannot start TLS on a connection: %s",
              contexts ? "out of memory" : "the configuration has no TLS listener any more");
    close_now();
    return false;
  }
  extras().handshake_routes = worker_.routes_ref();
  return continue_handshake();
}

bool Connection::continue_handshake() {
  switch (tls_->handshake()) {
    case tls::Stream::Progress::kDone:
      extras_->handshake_routes = Ref<RouteTable>();
      (tls_->resumed() ? metrics::local().tls_handshakes_resumed
                       : metrics::local().tls_handshakes_full)
          .add();
      if (tls_->alpn() == "h2") {  // offered only on listeners with http2
        hand_over_http2();
        return false;
      }
      return true;
    case tls::Stream::Progress::kWantIo:
      // A client that never finishes its handshake gets the header timeout, like a slow head.
      if (timer.list != &worker_.header_timers) set_timer(worker_.header_timers);
      if (!ensure_registered()) close_now();
      return false;
    case tls::Stream::Progress::kFailed:
      // Scanners and plain HTTP on a TLS port: not the error log's business.
      LOG_DEBUG("TLS handshake failed: %s", tls_->error().c_str());
      metrics::local().tls_handshakes_failed.add();
      close_now();
      return false;
  }
  return false;
}

void Connection::on_ready(uint32_t readiness) {
  if (state_ == State::kClosed) return;
  // Edge-triggered: the client's FIN is reported once, possibly with its last bytes. Remember
  // it, or a short read would end the reading before the 0 that tells us.
  if (readiness & event::kHangup) hangup_seen_ = true;
  if (awaiting_proxy_header_) {
    read_proxy_header();
    return;
  }
  if (tls_ && !tls_->handshake_done()) {
    if (continue_handshake()) on_readable();
    return;
  }
  if (state_ == State::kExchange) {
    on_exchange_ready(readiness);
    return;
  }
  if ((readiness & event::kOut) && pending_) {
    flush();
    if (state_ == State::kClosed || pending_) return;
    // Output drained: answer requests that arrived meanwhile, then read what is waiting.
    if (state_ != State::kLinger) process();
    if (state_ == State::kClosed || pending_) return;
    if (read_blocked_ || (readiness & (event::kIn | event::kHangup))) {
      read_blocked_ = false;
      on_readable();
    } else {
      become_idle_or_wait();
    }
    return;
  }
  if (readiness & (event::kIn | event::kHangup)) on_readable();
}

// Receiving through the poller (io_uring): the bytes come with the event. Those the connection
// cannot take now (reading is blocked) are kept, and the poller stops receiving until they are
// read, which bounds what a client that does not read its answers can make us hold.
void Connection::on_received(const char* bytes, size_t length) {
  if (state_ == State::kClosed) return;
  if (length == 0) {
    receive_ended_ = true;
    on_ready(event::kIn | event::kHangup);
    return;
  }
  std::string_view inbox(bytes, length);
  inbox_ = &inbox;
  on_ready(event::kIn);
  if (!inbox.empty() && state_ != State::kClosed) {
    extras().unread.append(inbox);
    if (!receive_paused_) {
      receive_paused_ = true;
      worker_.poller().pause_receiving(fd_);
    }
  }
  inbox_ = nullptr;
}

void Connection::on_sent(bool ok) {
  sending_ = false;
  if (state_ == State::kClosed) return;
  if (!ok) {  // the client reset the connection, or it broke
    close_now();
    return;
  }
  on_ready(event::kOut);  // as when a full socket takes bytes again: flush what follows, go on
}

ssize_t Connection::take_received(char* buffer, size_t length) {
  // Kept bytes first, then the delivery in hand, in one read: a short read ends the reading.
  size_t n = 0;
  std::string* kept = extras_ ? &extras_->unread : nullptr;
  if (kept && !kept->empty()) {
    n = std::min(length, kept->size());
    std::memcpy(buffer, kept->data(), n);
    kept->erase(0, n);
    if (kept->empty()) resume_receiving();  // all read: what comes next comes with an event
  }
  if (inbox_ && n < length && !inbox_->empty()) {
    const size_t more = std::min(length - n, inbox_->size());
    std::memcpy(buffer + n, inbox_->data(), more);
    inbox_->remove_prefix(more);
    n += more;
  }
  if (n > 0) return static_cast<ssize_t>(n);
  if (receive_ended_) return 0;
  resume_receiving();
  errno = EAGAIN;
  return -1;
}

void Connection::resume_receiving() {
  if (!receive_paused_) return;
  receive_paused_ = false;
  worker_.poller().resume_receiving(fd_);
}

void Connection::on_readable() {
  const size_t capacity = worker_.buffers().buffer_size();
  for (;;) {
    if (state_ == State::kClosed) return;
    if (pending_ && !(flight_ && flight_->tunnel)) {
      read_blocked_ = true;  // back-pressure: read no more until the client takes what we wrote
      return;
    }
    if (state_ == State::kDelayed ||
        (state_ == State::kExchange &&
         (flight_->body_paused || (flight_->body.done() && !flight_->tunnel)))) {
      read_blocked_ = true;  // read the next request once this one is answered
      return;
    }
    if (state_ == State::kLinger) {
      char sink[4096];
      ssize_t n;
      while ((n = receiving_ ? take_received(sink, sizeof sink)
                             : ::recv(fd_, sink, sizeof sink, 0)) > 0) {
      }
      if (n == 0 || errno != EAGAIN) close_now();
      return;
    }
    if (!buffer_) buffer_ = worker_.buffers().acquire();
    if (end_ == capacity && state_ == State::kHead && start_ > 0) {
      std::memmove(buffer_, buffer_ + start_, end_ - start_);
      end_ -= start_;
      start_ = 0;
    }
    size_t space = capacity - end_;
    if (space == 0) {  // a head larger than the buffer: the parser's limit is smaller, so 431
      respond_error(431, nullptr, nullptr);
      return;
    }
    // recv, not read: the same for a socket, without the file layer's checks (the client's
    // read fell from ~5 % to ~2.5 % of the worker's CPU in a php_hello profile).
    ssize_t n = receive(buffer_ + end_, space);
    if (n > 0) {
      end_ += static_cast<uint32_t>(n);
      process();
      // A short read drains a plain socket (edge-triggered). Not a TLS one: a read returns one
      // record, and records decrypted inside OpenSSL raise no edge; the stream knows when
      // neither the kernel nor OpenSSL holds more (else read on until EAGAIN).
      if (!hangup_seen_ && (tls_ ? tls_->drained() : static_cast<size_t>(n) < space)) break;
      continue;
    }
    if (n == 0) {
      peer_closed_ = true;
      if (state_ == State::kExchange) {
        if (flight_->tunnel && flight_->exchange) {  // half-close: pass it on
          Exchange* exchange = flight_->exchange;
          exchange->on_body({}, true);
          return;
        }
        close_now();  // the client left before its answer: abort the exchange
        return;
      }
      if (pending_) {
        keep_alive_ = false;  // finish writing, then close
        return;
      }
      close_now();
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    close_now();
    return;
  }
  become_idle_or_wait();
}

void Connection::process() {
  for (;;) {
    if (state_ == State::kExchange) {
      feed_exchange();
      if (state_ != State::kHead) break;  // still in flight (or closed)
    }
    in_process_ = true;
    while ((state_ == State::kHead || state_ == State::kBody) && !pending_) {
      bool progressed = state_ == State::kHead ? process_head() : read_body();
      if (!progressed || !keep_alive_ || state_ == State::kExchange) break;
      // Many pipelined responses: send what we have so the scratch buffer stays small.
      if (worker_.scratch_output().bytes().size() > 64 * 1024) flush();
    }
    in_process_ = false;
    if (state_ != State::kExchange || pending_) break;
    // An exchange started: hand it the body bytes already here.
  }
  if (state_ == State::kClosed) return;
  // The scratch queue is shared by the worker's connections: never leave bytes in it.
  if (!worker_.scratch_output().empty()) queue_scratch_output();
  if (state_ == State::kClosed || pending_ || state_ == State::kExchange) return;
  if (!keep_alive_ && state_ != State::kLinger && state_ != State::kBody &&
      state_ != State::kDelayed)
    finish_closing();
}

bool Connection::process_head() {
  if (start_ == end_) return false;
  if (requests_ == 0 && listener_.http2 && !listener_.tls && start_ == 0) {
    // h2c with prior knowledge (RFC 9113 3.3): the client preface instead of a request. (Over
    // TLS, ALPN decides: see continue_handshake.)
    constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const size_t have = std::min<size_t>(end_, kPreface.size());
    if (std::memcmp(buffer_, kPreface.data(), have) == 0) {
      if (have < kPreface.size()) {
        if (timer.list != &worker_.header_timers) set_timer(worker_.header_timers);
        return false;
      }
      hand_over_http2();
      return false;
    }
  }
  Request& request = worker_.scratch_request();
  request.clear();
  http1::ParseResult result =
      parser_.parse(std::string_view(buffer_ + start_, end_ - start_), request);
  switch (result.status) {
    case http1::ParseStatus::kNeedMore:
      if (timer.list != &worker_.header_timers) set_timer(worker_.header_timers);
      return false;
    case http1::ParseStatus::kError: {
      if (log::enabled(LogLevel::kInfo)) {
        AddressText from(&peer_.sa);
        LOG_INFO("client sent a bad request (%d): %s, client: %.*s", result.error_status,
                 result.error_reason, static_cast<int>(from.ip_length), from.ip);
      }
      start_ = end_;  // nothing after a bad head can be trusted
      respond_error(result.error_status, nullptr, nullptr);
      return false;
    }
    case http1::ParseStatus::kDone:
      handle_request(result.head_length);
      return true;
  }
  return false;
}

void Connection::handle_request(size_t head_length) {
  Request& request = worker_.scratch_request();
  parser_.reset();
  start_ += static_cast<uint32_t>(head_length);
  ++requests_;
  RequestScope& scope = this->scope();
  scope.started_ms = worker_.clock().monotonic_ms;
  scope.head_bytes = static_cast<uint32_t>(head_length);
  request.peer = &peer_.sa;
  request.peer_len = peer_len_;
  set_socket_peer(request);
  request.secure = tls_ != nullptr;
  request.tls = tls_.get();
  const config::Config& config = worker_.routes().config();
  // Before select(): allow/deny and limits run inside it and must see the real client.
  if (!config.client_address.trusted_proxies.empty())
    use_forwarded_client(request, config.client_address, &scope.forwarded);
  if (config.request_id.enabled)
    http::assign_request_id(request, config.request_id.header, config.request_id.trust_incoming,
                            scope.request_id);

  const Selection selection =
      listener_.admin ? worker_.routes().select_admin(request) : worker_.routes().select(request);
  scope.counting = selection.route ? selection.route->counters : selection.site->counters;
  scope.started_us = worker_.clock().monotonic_us;
  if (selection.access && requests_ == 1 && refuse_connection(request, selection)) return;
  if (!selection.route && selection.refused()) {
    respond_error(selection.status, &request, selection.site);
    return;
  }
  if (selection.delay_ms > 0) {
    delay_request(request, selection);
    return;
  }
  dispatch(request, selection);
}

void Connection::dispatch(Request& request, const Selection& selection) {
  if (selection.route && selection.route->stream) {
    start_exchange(request, selection);
    return;
  }
  if (!request.has_body()) {
    answer(request, selection);
    return;
  }
  const bool keep_body = selection.route && selection.route->handler->wants_body();
  if (request.expect_continue && start_ == end_ && !keep_body) {
    // RFC 9110 10.1.1: answer at once instead of inviting a body nobody will read, and close,
    // since the client may send it anyway.
    keep_alive_ = false;
    linger_on_close_ = true;
    answer(request, selection);
    return;
  }
  // The whole body is read before the handler runs, kept for a handler that wants it and
  // dropped otherwise: framing errors and oversized bodies get their 400/413, and the response
  // never races a client that is still sending.
  InFlight& f = hold_request(request, selection);
  f.keep_body = keep_body;
  invite_body(request);
  state_ = State::kBody;
}

// A request whose body (if any) has been read: its route's handler answers, or the route table's
// own answer goes out (204, 404, 405).
void Connection::answer(Request& request, const Selection& selection) {
  Response& response = worker_.scratch_response();
  response.clear();
  if (selection.route) {
    selection.route->handler->handle(request, response);
    compress::maybe_compress(request, response, selection.route->config->compress);
  } else {
    response.set_status(selection.status);
    if (!selection.allow.empty()) response.add_header("Allow", selection.allow);
    access::add_retry_after(response, selection.retry_after);
    if (!selection.challenge.empty()) response.add_header("WWW-Authenticate", selection.challenge);
  }
  send_response(request, response, selection.site, selection.headers);
}

// A rate limit's delay mode: the request waits, held like one whose body is coming, while the
// connection reads nothing more; then it goes on as if it had just arrived.
void Connection::delay_request(const Request& request, const Selection& selection) {
  hold_request(request, selection).selection.delay_ms = 0;
  state_ = State::kDelayed;
  worker_.upstream_timers.arm(timer, access::timer_duration_ms(selection.delay_ms),
                              worker_.clock().monotonic_ms);
}

void Connection::resume_delayed() {
  std::unique_ptr<InFlight> held = std::move(flight_);
  state_ = State::kHead;
  dispatch(*held->request, held->selection);
  event::dispose_later(held.release());  // the request's route table outlives this event
  process();  // the answer goes out; a body or pipelined requests already read are taken
  if (state_ == State::kClosed || pending_) return;
  if (read_blocked_) {
    read_blocked_ = false;
    on_readable();
    return;
  }
  if (state_ == State::kHead) become_idle_or_wait();
}

// Over a per-address connection limit (access/check.h): the limit's status, and the close.
bool Connection::refuse_connection(Request& request, const Selection& selection) {
  const int status = access::count_connection(
      *selection.access, request, worker_.clock().monotonic_ms * int64_t{1000}, &counted_);
  if (status == 0) return false;
  Response& response = worker_.scratch_response();
  response.clear();
  response.set_status(status);
  response.close_connection();
  linger_on_close_ = true;  // a body may be on its way
  send_response(request, response, selection.site, selection.headers);
  return true;
}

// ---- The request body ------------------------------------------------------------------------

// The request goes on past this batch of events (a body to read, or an exchange): it takes the
// worker's scratch request with it (the next connection gets a spare), or a copy of a request
// that was already held (a delayed one).
InFlight& Connection::hold_request(const Request& request, const Selection& selection) {
  flight_ = std::make_unique<InFlight>();
  InFlight& f = *flight_;
  if (&request == &worker_.scratch_request()) {
    f.request = worker_.take_scratch_request();
  } else {
    f.request = spare_request();
    f.request->assign(request);
  }
  f.routes = worker_.routes_ref();
  f.selection = selection;
  f.origin = start_;
  f.body.start(request, worker_.limits().max_body_bytes);
  return f;
}

// RFC 9110 10.1.1: a client waiting for 100 (Continue) gets it once we are about to read its
// body, unless the body is already on its way. Returns true when the 100 was queued.
bool Connection::invite_body(const Request& request) {
  if (!request.expect_continue || !request.has_body() || start_ != end_) return false;
  worker_.scratch_output().append(kContinue);
  return true;
}

// The one reader of request bodies, for kBody and kExchange alike: decodes what the read buffer
// holds and hands it on (to the buffer of a handler that wants it, nowhere, or the exchange).
// Returns true when a kBody request was answered (its body complete). False when nothing more can
// be done now: more bytes are needed, the exchange paused or ended, or the body was refused.
bool Connection::read_body() {
  InFlight* f = flight_.get();
  const bool streamed = state_ == State::kExchange;
  while (start_ < end_ && !f->body.done() && !(streamed && (!f->exchange || f->body_paused))) {
    RequestBody::Piece piece = f->body.next(std::string_view(buffer_ + start_, end_ - start_));
    start_ += static_cast<uint32_t>(piece.consumed);
    if (piece.error) {
      reject_body(piece.error);
      return false;
    }
    if (piece.consumed == 0) break;  // a partial chunk-size line: wait for the rest
    if (!streamed) {
      if (f->keep_body) f->buffered.append(piece.data);
    } else if ((!piece.data.empty() || piece.last) && !deliver(f, piece.data, piece.last)) {
      return false;  // the exchange ended meanwhile
    }
  }
  if (f->body.done()) {
    if (timer.list == &worker_.body_timers) event::TimerList::disarm(timer);
    if (streamed) return false;
    std::unique_ptr<InFlight> done = std::move(flight_);
    state_ = State::kHead;
    done->request->body = done->buffered;
    answer(*done->request, done->selection);
    return true;
  }
  // The head must stay where it is (the request points into it): move what the decoder has not
  // taken yet (a partial chunk-size line) to just after it.
  uint32_t left = end_ - start_;
  if (start_ != f->origin) std::memmove(buffer_ + f->origin, buffer_ + start_, left);
  start_ = f->origin;
  end_ = f->origin + left;
  if (!f->body_paused) set_timer(worker_.body_timers);
  return false;
}

// After a 101: what the client sends goes to the exchange as it is.
void Connection::read_tunnel() {
  InFlight* f = flight_.get();
  while (start_ < end_ && f->exchange && !f->body_paused) {
    std::string_view bytes(buffer_ + start_, end_ - start_);
    start_ = end_;
    if (!deliver(f, bytes, false)) return;
  }
  uint32_t left = end_ - start_;
  if (start_ != f->origin) std::memmove(buffer_ + f->origin, buffer_ + start_, left);
  start_ = f->origin;
  end_ = f->origin + left;
}

// Hands bytes to the exchange. Returns false when the exchange ended meanwhile (it answered, or
// gave up): `f` is then gone.
bool Connection::deliver(InFlight* f, std::string_view bytes, bool last) {
  Exchange* exchange = f->exchange;
  bool was_processing = in_process_;
  in_process_ = true;  // if the exchange ends in on_body(), our caller carries on
  bool more = exchange->on_body(bytes, last);
  in_process_ = was_processing;
  if (state_ != State::kExchange || flight_.get() != f) return false;
  if (!more) f->body_paused = true;
  return true;
}

// The request body turned out bad (malformed chunks, more than max_body_bytes): the request is
// answered with `status` and the connection closes, since the rest of the stream cannot be
// trusted. Once part of an exchange's answer is out, only the close is left.
void Connection::reject_body(int status) {
  if (status == 400 && log::enabled(LogLevel::kInfo)) {
    AddressText from(&peer_.sa);
    LOG_INFO("client sent a malformed chunked body, client: %.*s", static_cast<int>(from.ip_length),
             from.ip);
  }
  InFlight* f = flight_.get();
  const bool head_sent = f->head_sent;
  abort_exchange();
  if (head_sent) {
    close_now();
    return;
  }
  drop_flight();  // freed after this batch of events: the request stays valid for the answer
  state_ = State::kHead;
  start_ = end_;
  respond_error(status, f->request.get(), f->selection.site);
}

// ---- The response ----------------------------------------------------------------------------

void Connection::respond_error(int status, const Request* request, SiteRuntime* site) {
  Response& response = worker_.scratch_response();
  response.clear();
  response.set_status(status);
  // Framing errors leave the stream unsynchronized, and a body we refuse is still on its way.
  if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431 ||
      status == 505 || status == 417 || (status == 501 && (!request || request->has_body()))) {
    response.close_connection();
    linger_on_close_ = true;
  }
  const http::HeaderEdits* headers = site ? site->config->headers.edits.get() : nullptr;
  if (request) {
    send_response(*request, response, site, headers);
    return;
  }
  Request& blank = worker_.scratch_request();
  blank.clear();
  blank.peer = &peer_.sa;
  blank.peer_len = peer_len_;
  set_socket_peer(blank);
  blank.secure = tls_ != nullptr;
  blank.method_text = "-";
  blank.target = "-";
  SiteRuntime& fallback = worker_.routes().default_site();
  send_response(blank, response, &fallback, fallback.config->headers.edits.get());
}

// A complete response: an empty 4xx/5xx body becomes the site's error page (or a small default
// page), then the head, the body and the access log line.
void Connection::send_response(const Request& request, Response& response, SiteRuntime* site,
                               const http::HeaderEdits* headers) {
  const int status = response.status();
  if (status >= 400 && response.body_length() == 0)
    (site ? *site : worker_.routes().default_site()).fill_error_body(request, response);
  write_response(request, response, static_cast<int64_t>(response.body_length()), site, headers);
  count_request(request, status, request.is_head() ? 0 : response.body_length());
  if (site && site->access_log)
    log_access(*site, request, status, request.is_head() ? 0 : response.body_length(), &response);
}

// The one writer of responses, complete and streamed: the head (status line, Date and Server,
// Connection, the handler's headers, how the body is delimited), then whatever body the Response
// carries: all of a complete one, the start of a streamed one. `content_length` < 0 means not
// known yet (a streamed body): chunked to HTTP/1.1 clients, close-delimited to HTTP/1.0 ones.
// Also decides whether the connection stays open after this response.
Connection::Framing Connection::write_response(const Request& request, const Response& response,
                                               int64_t content_length, const SiteRuntime* site,
                                               const http::HeaderEdits* headers) {
  const int status = response.status();
  bool keep = keep_alive_allowed(request, response);
  Framing framing = Framing::kNone;
  if (status == 101) {
    keep = false;  // the connection now belongs to the protocol switched to
  } else if (!http::status_has_body(status)) {
    // 1xx, 204, 304: no framing header at all
  } else if (content_length >= 0) {
    framing = Framing::kLength;
  } else if (request.is_head()) {
    // the length is unknown and there is no body: nothing to announce
  } else if (request.version_minor >= 1) {
    framing = Framing::kChunked;
  } else {
    framing = Framing::kClose;  // HTTP/1.0 and no length: the end of the body is the close
    keep = false;
  }
  if (!keep) keep_alive_ = false;

  std::string& out = worker_.scratch_output().bytes();
  const size_t head_start = out.size();
  out.append(status_line(status));
  // The configured header rules: null for most responses (one branch on the plain path).
  const http::HeaderEditList* edits = headers ? headers->for_status(status) : nullptr;
  if (edits)
    edits->append_kept(out, worker_.date_and_server_lines());
  else
    out.append(worker_.date_and_server_lines());
  if (status == 101) {
    // the handler's "Connection: upgrade" says it all
  } else if (!keep) {
    out.append("Connection: close\r\n");
  } else if (request.version_minor == 0) {
    out.append("Connection: keep-alive\r\n");
  }
  if (tls_ && site && !site->config->tls.hsts.empty()) {
    out.append("Strict-Transport-Security: ");  // RFC 6797: never over plain HTTP
    out.append(site->config->tls.hsts);
    out.append("\r\n");
  }
  if (edits) {
    edits->append_kept(out, response.prebuilt_headers());
    edits->append_kept(out, response.extra_headers());
    out.append(edits->lines);
  } else {
    out.append(response.prebuilt_headers());
    out.append(response.extra_headers());
  }
  if (!request.request_id.empty() && worker_.routes().config().request_id.response) {
    const std::string& name = worker_.routes().config().request_id.header;
    out.append(name).append(": ").append(request.request_id).append("\r\n");
  }
  if (framing == Framing::kLength) {
    out.append("Content-Length: ");
    append_decimal(out, static_cast<uint64_t>(content_length));
    out.append("\r\n");
  } else if (framing == Framing::kChunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  }
  out.append("\r\n");
  scope().response_head_bytes = static_cast<uint32_t>(out.size() - head_start);

  // No body for HEAD, nor when the status has none (kNone). An empty chunk would end a chunked
  // body. Bytes are copied; file regions are queued for sendfile.
  if (request.is_head() || framing == Framing::kNone || response.body_length() == 0) return framing;
  OutputQueue& queue = worker_.scratch_output();
  if (framing == Framing::kChunked) append_chunk_size(out, response.body_length());
  for (const Response::Segment& s : response.segments()) {
    switch (s.kind) {
      case Response::Segment::Kind::kOwned:
        out.append(response.owned_bytes(s));
        break;
      case Response::Segment::Kind::kBorrowed:
        out.append(std::string_view(s.data, s.length));
        break;
      case Response::Segment::Kind::kFile:
        queue.append_file(s.file, s.file_offset, s.length);
        break;
    }
  }
  if (framing == Framing::kChunked) out.append("\r\n");
  return framing;
}

bool Connection::keep_alive_allowed(const Request& request, const Response& response) const {
  return keep_alive_ && request.keep_alive && !response.closes_connection() &&
         requests_ < worker_.limits().max_requests_per_connection && !worker_.draining() &&
         !peer_closed_;
}

void Connection::flush() {
  if (sending_) return;  // the poller's send goes first; on_sent flushes what follows
  OutputQueue& queue = pending_ ? *pending_ : worker_.scratch_output();
  if (receiving_ && queue.only_bytes() && !queue.empty() &&
      queue.pending_bytes() <= kPollerSendLimit && worker_.poller().send(fd_, queue.unsent())) {
    // io_uring: the poller sends a copy with its next wait, in the system call that waits, so
    // an answer costs no send(2), an exchange's (proxy, FastCGI...) as well as the connection's
    // own. Until it is out the connection waits as if the socket were full (pending_, the send
    // timeout, an exchange's high-water mark); larger answers and files take the socket path.
    metrics::local().bytes_sent[0].add(queue.unsent().size());
    queue.clear();
    sending_ = true;
    if (!pending_) pending_ = std::make_unique<OutputQueue>();
    arm_send_timer();
    return;
  }
  switch (queue.flush(fd_, tls_.get())) {
    case OutputQueue::FlushResult::kDone:
      if (pending_) {
        pending_.reset();
        if (timer.list == &worker_.send_timers) event::TimerList::disarm(timer);
        if (!keep_alive_ && state_ != State::kExchange) finish_closing();
        // The connection has one timer, which the send timeout took while the answer waited
        // (and nothing was read meanwhile: back-pressure). A request body still to come gets
        // it back, its silence counted from now.
        if (state_ == State::kExchange && flight_ && !flight_->tunnel && !flight_->body.done() &&
            !flight_->body_paused)
          set_timer(worker_.body_timers);
      }
      return;
    case OutputQueue::FlushResult::kBlocked:
      if (!pending_) {
        pending_ = std::make_unique<OutputQueue>();
        pending_->take_remainder(queue);
      }
      arm_send_timer();
      if (!ensure_registered()) close_now();
      return;
    case OutputQueue::FlushResult::kError:
      queue.clear();
      close_now();
      return;
  }
}

// The connection has one timer: a request held by a rate limit (kDelayed) keeps its delay's,
// which resumes it, rather than the send timeout of the answer before it.
void Connection::arm_send_timer() {
  if (state_ != State::kDelayed) set_timer(worker_.send_timers);
}

void Connection::become_idle_or_wait() {
  if (state_ == State::kClosed || state_ == State::kLinger) return;
  if (pending_) {
    // The poller's send (io_uring) has its own copy of the answer: with no further request
    // here, the buffer is spent. Held until the send completed, each connection of a batch kept
    // its own, and the pool grew to its 256 spares (5 MB) at 1,000 connections.
    if (sending_ && state_ == State::kHead && start_ == end_) release_buffer();
    return;
  }
  if (state_ == State::kExchange) {
    if (!ensure_registered()) close_now();
    return;
  }
  if (state_ == State::kHead && start_ == end_) {
    release_buffer();
    scope_.reset();
    if (!keep_alive_) {
      finish_closing();
      return;
    }
    if (worker_.draining()) {
      if (worker_.handing_over())
        close_when_idle();
      else
        close_now();
      return;
    }
    set_timer(requests_ == 0 ? worker_.header_timers : worker_.keepalive_timers);
  }
  if (!ensure_registered()) close_now();
}

void Connection::finish_closing() {
  if (state_ == State::kClosed || state_ == State::kLinger) return;
  // If the client may still be sending (an unread body, pipelined requests), closing now would
  // reset the connection and could destroy the response in flight: shut our side, then drain.
  bool unread = start_ < end_ || state_ == State::kBody || linger_on_close_;
  if (!unread || peer_closed_) {
    close_now();
    return;
  }
  if (tls_) tls_->shutdown();  // close_notify before the FIN
  ::shutdown(fd_, SHUT_WR);
  state_ = State::kLinger;
  abort_exchange();  // none here in practice: an exchange ends before its connection closes
  drop_flight();     // a body still unread, for a handler that will not run now
  release_buffer();
  set_timer(worker_.linger_timers);
  if (!ensure_registered()) close_now();
}

void Connection::on_timeout() {
  if (state_ == State::kClosed) return;
  if (state_ == State::kDelayed) {
    resume_delayed();
    return;
  }
  if (awaiting_proxy_header_) {
    AddressText from(&peer_.sa);
    LOG_INFO("PROXY protocol: no complete header from %.*s within the header timeout: closed",
             static_cast<int>(from.ip_length), from.ip);
    close_now();
    return;
  }
  bool mid_request =
      !pending_ && ((state_ == State::kHead && start_ < end_) || state_ == State::kBody ||
                    (state_ == State::kExchange && !flight_->head_sent && !flight_->body.done()));
  if (mid_request) {
    if (log::enabled(LogLevel::kInfo)) {
      AddressText from(&peer_.sa);
      LOG_INFO("closing a connection: the client was too slow to send its request, client: %.*s",
               static_cast<int>(from.ip_length), from.ip);
    }
    ssize_t ignored =
        !tls_ ? ::send(fd_, kTimeoutResponse.data(), kTimeoutResponse.size(), MSG_NOSIGNAL)
              : tls_->write(kTimeoutResponse.data(), kTimeoutResponse.size());
    (void)ignored;
  } else if (worker_.handing_over() && state_ == State::kHead && start_ == end_ && !pending_) {
    // A request that arrived after the last wait: its event comes next, and it is answered.
    char byte;
    if (::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
      set_timer(worker_.hand_over_timers);
      return;
    }
  }
  close_now();
}

void Connection::drain() {
  if (state_ == State::kClosed) return;  // an exchange in flight finishes, then the close
  const bool idle = state_ == State::kHead && start_ == end_ && !pending_;
  if (worker_.handing_over()) {
    // keep_alive_ stays: a head already sent without Connection: close promised the client
    // this connection, and closing it after that answer races the client's next request. The
    // next head says close (keep_alive_allowed: draining).
    if (idle) close_when_idle();
    return;
  }
  keep_alive_ = false;
  if (idle) close_now();
}

// Handing over, an idle connection closes once it has been idle for kHandOverIdleGrace. Its
// client may send at the very moment of the close, and loses that request (a reset, or an end
// of file read as an error): a connection silent for that long is one whose client is not
// sending, while a busy one gets its next request, and Connection: close, long before.
void Connection::close_when_idle() {
  if (state_ != State::kHead || start_ != end_ || pending_) return;
  if (timer.list == &worker_.hand_over_timers) return;  // already waiting
  const int64_t now = worker_.clock().monotonic_ms;
  int64_t idle_since = now;
  for (event::TimerList* list : {&worker_.keepalive_timers, &worker_.header_timers})
    if (timer.list == list) idle_since = timer.deadline_ms - list->duration();
  char byte;
  if (now - idle_since >= Worker::kHandOverIdleGrace &&
      ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) {
    close_now();
    return;
  }
  set_timer(worker_.hand_over_timers);
  if (!ensure_registered()) close_now();
}

// The socket, its TLS session (ALPN "h2") and what was read from it (h2c's preface) go to an
// Http2Connection; this object is freed.
void Connection::hand_over_http2() {
  const int fd = fd_;
  fd_ = -1;
  state_ = State::kClosed;
  event::TimerList::disarm(timer);
  if (registered_) worker_.poller().remove(fd);  // the new connection registers it again
  std::string_view bytes = buffer_ ? std::string_view(buffer_ + start_, end_ - start_) : "";
  start_ = end_;
  worker_.close_connection(this);
  const bool behind_proxy = extras_ && extras_->socket_peer_len;
  worker_.start_http2(fd, &peer_.sa, peer_len_, bytes, listener_, std::move(tls_),
                      behind_proxy ? &extras_->socket_peer.sa : nullptr,
                      behind_proxy ? extras_->socket_peer_len : 0);
  release_buffer();
}

void Connection::close_now() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  abort_exchange();
  // Only the connection being processed can have bytes in the worker's scratch queue (every
  // other one flushed it before returning): they are ours and must not reach the next client.
  worker_.scratch_output().clear();
  event::TimerList::disarm(timer);
  if (tls_) tls_->shutdown();   // close_notify, best effort
  worker_.poller().close(fd_);  // leaves the poller too (io_uring: its poll is cancelled)
  release_buffer();
  pending_.reset();
  drop_flight();
  worker_.close_connection(this);
}

bool Connection::ensure_registered() {
  if (registered_) return true;
  // Where the poller can receive for us (io_uring), a plain HTTP/1 connection lets it: no
  // recv(2) per request. Not TLS (OpenSSL reads the socket), nor while a PROXY header or an
  // h2c preface may still come: both are read from the socket itself, the preface by the
  // HTTP/2 connection it is handed to.
  const bool receive = worker_.poller().receives() && !tls_ && !awaiting_proxy_header_ &&
                       !(listener_.http2 && requests_ == 0);
  uint32_t interest = event::kReadable | event::kWritable | event::kEdgeTriggered;
  if (receive) interest |= event::kReceive;
  registered_ = worker_.poller().add(fd_, interest, this);
  receiving_ = registered_ && receive;
  return registered_;
}

void Connection::release_buffer() {
  if (!buffer_ || state_ == State::kBody || state_ == State::kExchange) return;
  worker_.buffers().release(buffer_);
  buffer_ = nullptr;
  start_ = end_ = 0;
}

void Connection::set_timer(event::TimerList& list) {
  list.arm(timer, worker_.clock().monotonic_ms);
}

// ---- Asynchronous handlers -------------------------------------------------------------------

void Connection::start_exchange(Request& request, const Selection& selection) {
  Extras& x = extras();
  if (x.local_len == 0) {
    x.local_len = sizeof x.local;
    if (::getsockname(fd_, &x.local.sa, &x.local_len) != 0) x.local_len = 0;
    x.local_len = std::min<socklen_t>(x.local_len, sizeof x.local);  // a unix path was cut short
  }
  request.local = x.local_len ? &x.local.sa : nullptr;
  request.local_len = x.local_len;
  state_ = State::kExchange;
  event::TimerList::disarm(timer);
  const config::Route& route = *selection.route->config;
  // Many exchanges answer inside start() (a library handler answering at once, an error): the
  // answer then goes out as a synchronous handler's does, and the request is held (an InFlight,
  // see flight()) only if the exchange goes on. That takes the scratch request itself, which
  // must therefore be the one the exchange got; a body to stream or a compressing Downstream
  // need the InFlight from the start.
  if (&request == &worker_.scratch_request() && !request.has_body() && !route.compress.enabled) {
    RequestScope& scope = this->scope();
    scope.starting = &selection;
    Exchange* exchange = selection.route->stream->start(request, *this);
    scope.starting = nullptr;
    if (state_ == State::kExchange) {
      if (!flight_) hold_request(request, selection);
      flight_->exchange = exchange;
    } else if (!flight_) {
      request.local = nullptr;  // the scratch request serves other connections next
      request.local_len = 0;
    }
    return;
  }
  InFlight& f = hold_request(request, selection);
  if (invite_body(request)) {
    queue_scratch_output();
    if (state_ == State::kClosed) return;
  }
  Exchange* exchange = selection.route->stream->start(
      *f.request, f.compress.wrap(*this, *f.request, route.compress));
  // start() may have answered at once (respond/fail), ending the exchange already.
  if (state_ == State::kExchange && flight_) flight_->exchange = exchange;
}

// The exchange's InFlight, made now for one that started without it and goes on past an answer
// given at once (it streams); null once the exchange ended.
InFlight* Connection::flight() {
  if (!flight_ && state_ == State::kExchange && scope_ && scope_->starting)
    hold_request(worker_.scratch_request(), *scope_->starting);
  return flight_.get();
}

// Hands what the client sent (body bytes, or tunnelled bytes) to the exchange.
void Connection::feed_exchange() {
  if (flight_->tunnel)
    read_tunnel();
  else
    read_body();
}

void Connection::on_exchange_ready(uint32_t readiness) {
  InFlight* f = flight_.get();
  if ((readiness & event::kOut) && pending_) {
    flush();
    if (state_ != State::kExchange || flight_.get() != f) return;
    if (!pending_ && f->notify_writable && f->exchange) {
      f->notify_writable = false;
      Exchange* exchange = f->exchange;
      exchange->on_writable();
      if (state_ != State::kExchange || flight_.get() != f) return;
    }
  }
  // Reading stopped while output was pending, which is now out: read on. (epoll reports the
  // bytes waiting with the writability; a poller that receives for us has handed them over
  // already, so nothing else would.)
  const bool unblocked = read_blocked_ && !pending_;
  if (!(readiness & (event::kIn | event::kHangup)) && !unblocked) return;
  if (!f->tunnel && (f->body.done() || f->body_paused)) {
    if ((readiness & event::kHangup) && f->body.done()) {
      // The client closed (or half-closed) while waiting for its answer: give up on it.
      close_now();
      return;
    }
    read_blocked_ = true;
    return;
  }
  read_blocked_ = false;
  on_readable();
}

void Connection::resume_body() {
  if (state_ != State::kExchange || !flight_) return;
  InFlight* f = flight_.get();
  if (!f->body_paused) return;
  f->body_paused = false;
  feed_exchange();
  if (state_ == State::kHead) {  // ended (or failed on the body) while we fed it
    continue_after_exchange();
    return;
  }
  if (state_ != State::kExchange || flight_.get() != f || f->body_paused) return;
  if (read_blocked_ || start_ == end_) {
    read_blocked_ = false;
    on_readable();
  }
}

// Moves what the worker's scratch queue holds behind anything this connection still has pending,
// then writes.
void Connection::queue_scratch_output() {
  OutputQueue& scratch = worker_.scratch_output();
  if (pending_ && !scratch.empty()) pending_->append_queue(scratch);
  flush();
}

// Writes on behalf of the exchange that is calling us. A failed write closes the connection; the
// exchange learns it from our return value, never from a re-entrant on_abort().
bool Connection::write_for_exchange() {
  Exchange* exchange = flight_->exchange;
  flight_->exchange = nullptr;
  queue_scratch_output();
  if (state_ != State::kExchange) return false;
  flight_->exchange = exchange;
  return true;
}

bool Connection::head_sent() const {
  return flight_ && flight_->head_sent;
}

void Connection::respond(Response& response) {
  if (state_ != State::kExchange) return;
  if (!flight_) {
    // Answered inside start(): the way a synchronous handler's answer goes (process() carries
    // on with the connection).
    if (!scope_ || !scope_->starting) return;
    const Selection& selection = *scope_->starting;
    state_ = State::kHead;
    send_response(worker_.scratch_request(), response, selection.site, selection.headers);
    return;
  }
  InFlight& f = *flight_;
  f.exchange = nullptr;
  if (!f.body.done()) {  // answered before the whole body arrived: the rest cannot be trusted
    keep_alive_ = false;
    linger_on_close_ = true;
  }
  send_response(*f.request, response, f.selection.site, f.selection.headers);
  queue_scratch_output();
  end_exchange();
}

bool Connection::send_head(Response& head, int64_t content_length) {
  if (state_ != State::kExchange || !flight()) return false;
  InFlight& f = *flight_;
  const int status = head.status();
  f.head_sent = true;
  f.status = status;
  if (status == 101) {  // from now on raw bytes both ways, until either side closes
    f.tunnel = true;
    event::TimerList::disarm(timer);
  }
  if (!f.body.done()) keep_alive_ = false;  // answered before the whole body arrived
  f.chunked_out = write_response(*f.request, head, content_length, f.selection.site,
                                 f.selection.headers) == Framing::kChunked;
  f.body_allowed = !f.request->is_head() && http::status_has_body(status);
  if (f.body_allowed) f.body_bytes_sent += head.body_length();  // sent with the head
  // In a tunnel, bytes the client sent with its handshake go out with its next bytes (clients
  // wait for the 101 before they send, RFC 6455 4.1).
  return write_for_exchange();
}

Downstream::Sent Connection::send_body(std::string_view bytes) {
  if (state_ != State::kExchange || !flight()) return Sent::kGone;
  InFlight& f = *flight_;
  if (bytes.empty()) return Sent::kMore;
  if (!f.body_allowed && !f.tunnel) return Sent::kMore;
  f.body_bytes_sent += bytes.size();
  OutputQueue& queue = pending_ ? *pending_ : worker_.scratch_output();
  std::string& out = queue.bytes();
  if (f.chunked_out) {
    append_chunk_size(out, bytes.size());
    out.append(bytes);
    out.append("\r\n");
  } else {
    out.append(bytes);
  }
  if (pending_) {
    if (pending_->pending_bytes() < kExchangeHighWater) return Sent::kMore;
    f.notify_writable = true;
    return Sent::kFull;
  }
  return write_for_exchange() ? Sent::kMore : Sent::kGone;
}

Downstream::Sent Connection::hold_if_queued() {
  if (state_ != State::kExchange || !flight()) return Sent::kGone;
  if (!pending_) return Sent::kMore;  // everything went to the socket
  flight_->notify_writable = true;    // on_exchange_ready() calls on_writable() once it is out
  return Sent::kFull;
}

void Connection::finish() {
  if (state_ != State::kExchange || !flight()) return;
  InFlight& f = *flight_;
  f.exchange = nullptr;
  if (f.chunked_out) (pending_ ? *pending_ : worker_.scratch_output()).append("0\r\n\r\n");
  log_streamed(f);
  if (f.tunnel) {  // the upstream side of the tunnel closed: so do we, once the rest is out
    keep_alive_ = false;
    drop_flight();
    state_ = State::kHead;
    start_ = end_;
    if (!worker_.scratch_output().empty()) queue_scratch_output();
    if (state_ != State::kClosed && !pending_) close_now();
    return;
  }
  queue_scratch_output();
  end_exchange();
}

void Connection::log_streamed(const InFlight& f) {
  count_request(*f.request, f.status, f.body_bytes_sent);
  SiteRuntime* site = f.selection.site;
  if (site && site->access_log) log_access(*site, *f.request, f.status, f.body_bytes_sent);
}

void Connection::log_access(SiteRuntime& site, const Request& request, int status,
                            uint64_t body_bytes, const Response* response) {
  if (site.access_log->custom()) {
    LogContext context;
    const RequestScope& scope = this->scope();
    context.bytes_sent = scope.response_head_bytes + body_bytes;
    context.request_length =
        scope.head_bytes + static_cast<uint64_t>(std::max<int64_t>(request.content_length, 0));
    context.request_time_ms = worker_.clock().monotonic_ms - scope.started_ms;
    if (tls_) {
      context.tls_version = tls_->version();
      context.tls_cipher = tls_->cipher();
    }
    context.connection = serial_;
    context.connection_requests = requests_;
    context.response = response;
    site.access_log->log_custom(request, status, body_bytes, worker_.clock().wall_seconds, context);
    return;
  }
  if (tls_ && worker_.routes().config().tls.log_tls) {
    site.access_log->log(request, status, body_bytes, worker_.clock().wall_seconds, tls_->version(),
                         tls_->cipher());
    return;
  }
  site.access_log->log(request, status, body_bytes, worker_.clock().wall_seconds);
}

void Connection::count_request(const Request& request, int status, uint64_t body_bytes) {
  RequestScope& scope = this->scope();
  metrics::RouteCounters* counters =
      scope.counting ? scope.counting : worker_.routes().default_site().counters;
  const int64_t now = worker_.clock().monotonic_us;
  const int64_t took = scope.started_us && now > scope.started_us ? now - scope.started_us : 0;
  metrics::local().count_request(counters,
                                 metrics::protocol_of(request.version_major, request.version_minor),
                                 tls_ != nullptr, status, body_bytes, static_cast<uint64_t>(took));
  scope.counting = nullptr;
  scope.started_us = 0;
}

void Connection::fail(int status) {
  if (state_ != State::kExchange) return;
  InFlight* f = flight_.get();
  if (!f && !(scope_ && scope_->starting)) return;
  if (f) f->exchange = nullptr;
  if (!f || !f->head_sent) {
    Response& response = worker_.scratch_response();
    response.clear();
    response.set_status(status);
    if (status == 503) response.add_header("Retry-After", "1");
    respond(response);
    return;
  }
  // Part of the response is out: the client can only learn of the failure from the close.
  log_streamed(*f);
  close_now();
}

void Connection::end_exchange() {
  if (state_ != State::kExchange) return;
  bool body_done = flight_->body.done();
  drop_flight();
  state_ = State::kHead;
  if (!body_done) {
    keep_alive_ = false;
    linger_on_close_ = true;
    start_ = end_;  // the rest of the body: never parsed as a request
  }
  if (!in_process_) continue_after_exchange();
}

// The exchange ended from an upstream event: carry on with this connection.
void Connection::continue_after_exchange() {
  if (state_ == State::kClosed) return;
  if (!worker_.scratch_output().empty()) queue_scratch_output();
  if (state_ == State::kClosed || pending_)
    return;  // on_ready() goes on once the client has taken the response
  if (!keep_alive_) {
    finish_closing();
    return;
  }
  process();
  if (state_ != State::kHead || pending_) return;
  if (read_blocked_) {
    read_blocked_ = false;
    on_readable();
    return;
  }
  become_idle_or_wait();
}

// The exchange may still be running (it called respond() or finish(), or a write failed inside
// its call), and the request and route table it uses (the handler, its upstream group) must
// outlive it: free them after this batch of events, like the exchange itself.
void Connection::drop_flight() {
  if (flight_) event::dispose_later(flight_.release());
}

void Connection::abort_exchange() {
  if (!flight_ || !flight_->exchange) return;
  Exchange* exchange = flight_->exchange;
  flight_->exchange = nullptr;
  exchange->on_abort();
}

}  // namespace peregrine::server
