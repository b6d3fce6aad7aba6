#include "client/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/url.h"
#include "config/config.h"
#include "config/upstream_address.h"
#include "core/log.h"
#include "core/strings.h"
#include "event/deferred.h"
#include "handlers/proxy/proxy_handler.h"
#include "peregrine/http_client.h"
#include "upstream/group_runtime.h"

namespace peregrine::client {
namespace {

// The request body goes to the exchange in pieces of this size: the proxy pauses the body at
// its send high-water mark (64 KiB) and asks again with resume_body().
constexpr size_t kBodyPiece = 16 * 1024;
// A streamed response's bytes waiting for read() before the exchange is told to stop reading
// (kFull); the proxy's own spool holds at most as much again.
constexpr size_t kStreamHighWater = 64 * 1024;

// One origin's pool on one worker: an upstream group of one server and the proxy handler that
// runs exchanges against it.
struct Origin {
  proxy::ProxyOptions proxy;
  config::UpstreamGroup group;
  std::unique_ptr<upstream::GroupRuntime> runtime;
  std::unique_ptr<proxy::ProxyHandler> handler;  // after runtime: destroyed first
};

}  // namespace

// The worker's client state, alive while its WorkerScope is.
struct WorkerState {
  explicit WorkerState(const handlers::WorkerEnv& e) : env(e) {}
  handlers::WorkerEnv env;
  std::unordered_map<std::string, std::unique_ptr<Origin>> origins;
  std::vector<detail::ClientCall*> calls;  // begun and not yet delivered
  bool stopping = false;
};

namespace {
thread_local WorkerState* current = nullptr;

// The pool key: the origin and every option that shapes its connections.
std::string origin_key(const Url& url, const HttpClientOptions& o) {
  std::string key = url.tls ? "https://" : "http://";
  key += url.address();
  for (long long v :
       {static_cast<long long>(o.connect_timeout.count()),
        static_cast<long long>(o.read_timeout.count()), static_cast<long long>(o.keepalive),
        static_cast<long long>(o.keepalive_timeout.count()),
        static_cast<long long>(o.max_connections)}) {
    key += '|';
    key += std::to_string(v);
  }
  if (url.tls) {
    key += o.tls_verify ? "|verify|" : "|noverify|";
    key += o.ca_file;
  }
  return key;
}

// The server's socket address: an IP literal or "localhost" as the config reads them, else
// getaddrinfo (blocking, once per worker and origin).
bool resolve(const Url& url, config::UpstreamServer* server, std::string* error) {
  std::string hint;
  if (config::parse_upstream_address(url.address(), server, error, &hint)) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &found);
  if (rc != 0 || !found) {
    *error = "cannot resolve \"" + url.host + "\": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&server->addr, found->ai_addr, found->ai_addrlen);
  server->addr_len = found->ai_addrlen;
  server->address = url.address();
  freeaddrinfo(found);
  return true;
}

Origin* origin_for(WorkerState& state, const Url& url, const HttpClientOptions& o,
                   std::string* error) {
  std::string key = origin_key(url, o);
  auto it = state.origins.find(key);
  if (it != state.origins.end()) return it->second.get();

  auto origin = std::make_unique<Origin>();
  config::UpstreamServer server;
  if (!resolve(url, &server, error)) return nullptr;
  server.max_conns = o.max_connections;
  config::UpstreamGroup& g = origin->group;
  g.name = std::string(url.tls ? "client:https://" : "client:http://") + url.authority;
  g.servers.push_back(std::move(server));
  g.max_fails = 0;  // a client call's failure is its own: never mark the origin down
  g.tries = 1;      // one server; the stale pooled connection retry still applies
  g.keepalive = o.keepalive;
  g.keepalive_timeout = o.keepalive_timeout;
  g.connect_timeout = o.connect_timeout;
  g.send_timeout = o.read_timeout;
  g.read_timeout = o.read_timeout;
  if (url.tls) {
    g.tls.enabled = true;
    g.tls.verify = o.tls_verify;
    g.tls.ca_file = o.ca_file;
    g.tls.server_name = url.host;
  }
  proxy::ProxyOptions& p = origin->proxy;
  p.upstream = g.name;
  p.scheme = url.tls ? "https" : "http";
  p.host_mode = proxy::ProxyHostMode::kFixed;
  p.fixed_host = url.authority;
  p.x_forwarded_for = p.x_forwarded_proto = p.x_forwarded_host = p.x_real_ip = false;
  p.forwarded = false;
  p.rewrite_location = false;
  p.intercept_errors = false;
  p.max_temp_file_bytes = 0;  // the collector never pushes back: no spool
  p.websocket = false;
  origin->runtime = std::make_unique<upstream::GroupRuntime>(g, state.env.poller, state.env.timers,
                                                             state.env.clock, 1);
  origin->handler = std::make_unique<proxy::ProxyHandler>(
      origin->proxy, *origin->runtime, state.env.poller, state.env.timers, state.env.clock);
  Origin* raw = origin.get();
  state.origins.emplace(std::move(key), std::move(origin));
  return raw;
}

Method method_of(std::string_view text) {
  for (int m = 0; m < static_cast<int>(Method::kUnknown); ++m)
    if (method_name(static_cast<Method>(m)) == text) return static_cast<Method>(m);
  return Method::kUnknown;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

bool is_field_value(std::string_view s) {
  for (char c : s)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

// "Name: value\r\n" lines (a Response's prebuilt or extra headers) into pairs.
void split_header_lines(std::string_view lines,
                        std::vector<std::pair<std::string, std::string>>& out) {
  while (!lines.empty()) {
    size_t end = lines.find("\r\n");
    std::string_view line = lines.substr(0, end);
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    out.emplace_back(std::string(line.substr(0, colon)),
                     std::string(trim_ows(line.substr(colon + 1))));
  }
}

const sockaddr_in kLoopback = [] {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}();

}  // namespace
}  // namespace peregrine::client

namespace peregrine::detail {

// One call: the Request the proxy exchange reads, and the Downstream it answers to. Owned by
// its HttpAwaitable or HttpStream, or by itself until its callback ran. Every wake-up of the
// owner goes through notify(), from the worker's loop.
class ClientCall final : public handlers::Downstream {
 public:
  ClientCall(client::WorkerState* state, const HttpClientOptions& options, HttpRequest request)
      : state_(state), options_(options), spec_(std::move(request)) {}

  void begin(const AsyncResponse* for_client);

  // ---- The awaitable / callback side ----
  bool finished() const { return finished_; }
  void wait(std::coroutine_handle<> waiter) { waiter_ = waiter; }
  HttpResponse take() { return std::move(result_); }
  void set_callback(std::function<void(HttpResponse&)> done) { callback_ = std::move(done); }
  // The owner is gone: abort a call still running, then free (now or after notify()).
  void release();

  // ---- HttpStream's side ----
  void set_streaming() { streaming_ = true; }
  bool head_ready() const { return head_ready_ || finished_; }
  void wait_head(std::coroutine_handle<> waiter) {
    waiting_head_ = true;
    waiter_ = waiter;
  }
  HttpResponse head() const;
  bool piece_ready() const { return !stream_buf_.empty() || finished_; }
  void wait_piece(std::coroutine_handle<> waiter) {
    waiting_head_ = false;
    waiter_ = waiter;
  }
  HttpBodyPiece take_piece();

  // Ends the call from outside the exchange (cancel, timeout, stop).
  void abort(HttpError error, std::string text);
  // The worker stops: notify now.
  void notify_now();

  // ---- handlers::Downstream ----
  void resume_body() override { feed_body(); }
  void respond(Response& response) override;
  bool send_head(Response& head, int64_t content_length) override;
  Sent send_body(std::string_view bytes) override;
  void finish() override { complete(HttpError::kNone, {}); }
  void fail(int status) override;
  bool head_sent() const override { return head_sent_; }

 private:
  bool build_request(const client::Url& url, std::string* error);
  void feed_body();
  void take_head(const Response& r);
  // The result is final: the exchange is done with us; the owner hears of it from the loop.
  void complete(HttpError error, std::string text);
  void schedule();  // notify() from the loop (once, however often asked)
  void notify();
  bool waiter_ready() const;
  void forget();  // leaves the worker's list

  client::WorkerState* state_;
  HttpClientOptions options_;
  HttpRequest spec_;
  HttpResponse result_;

  // What the exchange reads (views into spec_ and the strings below).
  Request request_;
  std::string path_, query_, authority_;

  handlers::Exchange* exchange_ = nullptr;  // while it may call us or be aborted
  size_t body_off_ = 0;
  bool feeding_ = false;
  bool resumed_ = false;
  bool head_sent_ = false;
  bool finished_ = false;
  bool delivered_ = false;  // the owner heard of the end
  bool owned_ = true;       // an awaitable, a stream or a callback waits for the result

  // Streaming (HttpStream): the body waits here for read().
  bool streaming_ = false;
  bool head_ready_ = false;
  bool waiting_head_ = false;  // what waiter_ waits for: the head, or a piece
  bool full_ = false;          // send_body() said kFull: on_writable() once read
  std::string stream_buf_;
  std::string reading_;  // the piece read() returned last

  std::optional<AsyncResponse> for_client_;
  uint64_t listener_ = 0;
  Worker::TimerId timeout_timer_ = 0;
  Worker::TimerId notify_timer_ = 0;
  std::coroutine_handle<> waiter_;
  std::function<void(HttpResponse&)> callback_;
};

bool ClientCall::build_request(const client::Url& url, std::string* error) {
  if (!client::is_token(spec_.method)) {
    *error = "invalid method \"" + spec_.method + "\"";
    return false;
  }
  if (spec_.headers.size() > kMaxHeaders - 8) {
    *error = "too many headers";
    return false;
  }
  path_ = url.path;
  query_ = url.query;
  authority_ = url.authority;
  Request& r = request_;
  r.method = client::method_of(spec_.method);
  r.method_text = spec_.method;
  r.target = spec_.url;  // log lines name the whole URL
  r.raw_path = path_;
  r.path = path_;
  r.query = query_;
  r.host = authority_;
  for (const auto& [name, value] : spec_.headers) {
    if (!client::is_token(name) || !client::is_field_value(value)) {
      *error = "invalid header \"" + name + "\"";
      return false;
    }
    r.headers[r.header_count++] = {name, value};
  }
  const bool body_method =
      r.method == Method::kPost || r.method == Method::kPut || r.method == Method::kPatch;
  if (!spec_.body.empty() || body_method)
    r.content_length = static_cast<int64_t>(spec_.body.size());
  r.peer = reinterpret_cast<const sockaddr*>(&client::kLoopback);
  r.peer_len = sizeof client::kLoopback;
  return true;
}

void ClientCall::begin(const AsyncResponse* for_client) {
  state_->calls.push_back(this);
  std::string error;
  std::optional<client::Url> url = client::parse_url(spec_.url, &error);
  if (!url || !build_request(*url, &error)) {
    complete(HttpError::kInvalidRequest, std::move(error));
    return;
  }
  if (state_->stopping || (for_client && for_client->cancelled())) {
    complete(HttpError::kCancelled, "the client went away");
    return;
  }
  client::Origin* origin = client::origin_for(*state_, *url, options_, &error);
  if (!origin) {
    complete(HttpError::kFailed, std::move(error));
    return;
  }
  Worker& worker = *this_worker();
  if (options_.timeout.count() > 0)
    timeout_timer_ = worker.after(options_.timeout, [this] {
      timeout_timer_ = 0;
      abort(HttpError::kTimeout,
            "no answer within " + std::to_string(options_.timeout.count()) + " ms");
    });
  if (for_client) {
    for_client_.emplace(*for_client);
    listener_ = for_client_->on_cancel([this] {
      listener_ = 0;
      abort(HttpError::kCancelled, "the client went away");
    });
  }
  handlers::Exchange* exchange = origin->handler->start(request_, *this);
  if (!finished_) exchange_ = exchange;
  if (exchange_ && request_.has_body()) feed_body();
}

void ClientCall::feed_body() {
  if (feeding_) {  // asked again from inside on_body(): the loop below goes on
    resumed_ = true;
    return;
  }
  feeding_ = true;
  while (exchange_ && body_off_ < spec_.body.size()) {
    resumed_ = false;
    size_t n = std::min(client::kBodyPiece, spec_.body.size() - body_off_);
    std::string_view piece(spec_.body.data() + body_off_, n);
    body_off_ += n;
    const bool more = exchange_->on_body(piece, body_off_ == spec_.body.size());
    if (!more && !resumed_) break;  // resume_body() calls us again
  }
  feeding_ = false;
}

void ClientCall::take_head(const Response& r) {
  result_.status = r.status();
  result_.headers.clear();
  client::split_header_lines(r.prebuilt_headers(), result_.headers);
  client::split_header_lines(r.extra_headers(), result_.headers);
}

void ClientCall::respond(Response& response) {
  if (request_.upstream.status == 0) {  // no back end answered: the exchange's own 503
    fail(response.status());
    return;
  }
  take_head(response);
  std::string& body = streaming_ ? stream_buf_ : result_.body;
  body.clear();
  for (const Response::Segment& s : response.segments()) {
    if (s.kind == Response::Segment::Kind::kOwned)
      body.append(response.owned_bytes(s));
    else if (s.kind == Response::Segment::Kind::kBorrowed)
      body.append(s.data, s.length);
  }
  head_ready_ = true;
  if (!streaming_ && result_.body.size() > options_.max_body_bytes) {
    complete(HttpError::kTooLarge, "the response body is over max_body_bytes");
    return;
  }
  complete(HttpError::kNone, {});
}

bool ClientCall::send_head(Response& head, int64_t content_length) {
  if (request_.is_head() || streaming_) content_length = 0;  // no limit to check
  if (content_length > 0 && static_cast<uint64_t>(content_length) > options_.max_body_bytes) {
    complete(HttpError::kTooLarge, "the response's Content-Length is over max_body_bytes");
    return false;
  }
  take_head(head);
  head_sent_ = true;
  head_ready_ = true;
  if (streaming_) schedule();
  if (content_length > 0) result_.body.reserve(static_cast<size_t>(content_length));
  return true;
}

handlers::Downstream::Sent ClientCall::send_body(std::string_view bytes) {
  if (streaming_) {
    stream_buf_.append(bytes);
    schedule();
    if (stream_buf_.size() < client::kStreamHighWater) return Sent::kMore;
    full_ = true;  // the exchange stops reading the server until on_writable()
    return Sent::kFull;
  }
  if (result_.body.size() + bytes.size() > options_.max_body_bytes) {
    complete(HttpError::kTooLarge, "the response body is over max_body_bytes");
    return Sent::kGone;
  }
  result_.body.append(bytes);
  return Sent::kMore;
}

void ClientCall::fail(int status) {
  // The exchange logged the cause (its error line names the URL).
  switch (status) {
    case 504:
      complete(HttpError::kTimeout, "timed out (connect_timeout or read_timeout)");
      return;
    case 503:
      complete(HttpError::kBusy, "max_connections in use and the wait queue full or too long");
      return;
    default:
      complete(HttpError::kFailed, head_sent_ ? "the connection broke in the response body"
                                              : "connect failed or the response was bad");
      return;
  }
}

void ClientCall::abort(HttpError error, std::string text) {
  if (finished_) return;
  if (handlers::Exchange* exchange = std::exchange(exchange_, nullptr)) exchange->on_abort();
  complete(error, std::move(text));
}

void ClientCall::complete(HttpError error, std::string text) {
  if (finished_) return;
  finished_ = true;
  exchange_ = nullptr;
  result_.error = error;
  // A streamed head that arrived stays what head() says: the failure comes with read().
  if (error != HttpError::kNone && !(streaming_ && head_ready_)) {
    result_.status = 0;
    result_.headers.clear();
    result_.body.clear();
    result_.error_text = std::move(text);
  }
  Worker* worker = this_worker();
  if (timeout_timer_) worker->cancel(std::exchange(timeout_timer_, 0));
  if (listener_) for_client_->remove_cancel(std::exchange(listener_, 0));
  schedule();
}

// From the loop, never from inside the exchange (or the caller's own call).
void ClientCall::schedule() {
  if (notify_timer_) return;
  notify_timer_ = this_worker()->after(std::chrono::milliseconds(0), [this] {
    notify_timer_ = 0;
    notify();
  });
}

void ClientCall::notify_now() {
  if (notify_timer_) this_worker()->cancel(std::exchange(notify_timer_, 0));
  notify();
}

bool ClientCall::waiter_ready() const {
  if (!streaming_) return finished_;
  return waiting_head_ ? head_ready() : piece_ready();
}

void ClientCall::notify() {
  if (finished_ && !delivered_) {
    delivered_ = true;
    forget();
    for_client_.reset();  // our copy must not hold the client's exchange
    if (callback_) {
      std::function<void(HttpResponse&)> done = std::move(callback_);
      done(result_);
      delete this;
      return;
    }
  }
  if (!owned_) {
    if (delivered_) delete this;
    return;
  }
  if (waiter_ && waiter_ready()) std::exchange(waiter_, {}).resume();  // may free us
}

void ClientCall::forget() {
  std::erase(state_->calls, this);
}

void ClientCall::release() {
  owned_ = false;
  waiter_ = {};
  if (!finished_) abort(HttpError::kCancelled, "the call was dropped before its end");
  if (!notify_timer_) delete this;  // else notify() frees it (finished_: delivered_ by then)
}

HttpResponse ClientCall::head() const {
  HttpResponse r;
  r.error = head_ready_ ? HttpError::kNone : result_.error;
  r.status = result_.status;
  r.headers = result_.headers;
  if (!head_ready_) r.error_text = result_.error_text;
  return r;
}

HttpBodyPiece ClientCall::take_piece() {
  HttpBodyPiece piece;
  if (!stream_buf_.empty()) {
    reading_.swap(stream_buf_);
    stream_buf_.clear();
    piece.bytes = reading_;
    piece.last = finished_ && result_.error == HttpError::kNone;
    if (full_ && exchange_) {  // room again: the exchange reads on (and may call us back)
      full_ = false;
      exchange_->on_writable();
    }
    return piece;
  }
  piece.last = true;
  piece.error = finished_ ? result_.error : HttpError::kFailed;
  return piece;
}

}  // namespace peregrine::detail

namespace peregrine::client {

WorkerScope::WorkerScope(const handlers::WorkerEnv& env) {
  current = new WorkerState(env);
}

WorkerScope::~WorkerScope() {
  WorkerState* state = current;
  state->stopping = true;
  // Calls still running end now (resolving kCancelled); their owners hear of it at once.
  while (!state->calls.empty()) {
    detail::ClientCall* call = state->calls.front();
    call->abort(HttpError::kCancelled, "the worker stops");
    call->notify_now();  // leaves the list
  }
  event::dispose_pending();  // the aborted exchanges, before their groups go
  state->origins.clear();    // closes the pooled connections...
  event::dispose_pending();  // ...which are freed here, the loop being over
  current = nullptr;
  delete state;
}

}  // namespace peregrine::client

namespace peregrine {

std::string_view http_error_name(HttpError error) {
  switch (error) {
    case HttpError::kNone:
      return "none";
    case HttpError::kInvalidRequest:
      return "invalid request";
    case HttpError::kFailed:
      return "failed";
    case HttpError::kTimeout:
      return "timeout";
    case HttpError::kBusy:
      return "busy";
    case HttpError::kTooLarge:
      return "too large";
    case HttpError::kCancelled:
      return "cancelled";
    case HttpError::kNoWorker:
      return "no worker";
  }
  return "unknown";
}

std::optional<std::string_view> HttpResponse::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (ascii_iequals(n, name)) return std::string_view(v);
  return std::nullopt;
}

HttpAwaitable HttpClient::start(HttpRequest request, const AsyncResponse* for_client) {
  if (!client::current || !this_worker()) return HttpAwaitable(nullptr);
  auto* call = new detail::ClientCall(client::current, options_, std::move(request));
  call->begin(for_client);
  return HttpAwaitable(call);
}

HttpStream HttpClient::open_stream(HttpRequest request, const AsyncResponse* for_client) {
  if (!client::current || !this_worker()) return HttpStream(nullptr);
  auto* call = new detail::ClientCall(client::current, options_, std::move(request));
  call->set_streaming();
  call->begin(for_client);
  return HttpStream(call);
}

HttpStream::~HttpStream() {
  if (call_) call_->release();
}

bool HttpStream::HeadAwaitable::await_ready() const {
  return !call_ || call_->head_ready();
}

void HttpStream::HeadAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  call_->wait_head(waiter);
}

HttpResponse HttpStream::HeadAwaitable::await_resume() const {
  if (call_) return call_->head();
  HttpResponse r;
  r.error = HttpError::kNoWorker;
  r.error_text = "HttpClient used off a worker thread";
  return r;
}

bool HttpStream::ReadAwaitable::await_ready() const {
  return !call_ || call_->piece_ready();
}

void HttpStream::ReadAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  call_->wait_piece(waiter);
}

HttpBodyPiece HttpStream::ReadAwaitable::await_resume() {
  if (call_) return call_->take_piece();
  HttpBodyPiece piece;
  piece.last = true;
  piece.error = HttpError::kNoWorker;
  return piece;
}

void HttpClient::request(HttpRequest request, std::function<void(HttpResponse&)> done,
                         const AsyncResponse* for_client) {
  if (!client::current || !this_worker()) {
    HttpResponse r;
    r.error = HttpError::kNoWorker;
    r.error_text = "HttpClient used off a worker thread";
    done(r);
    return;
  }
  auto* call = new detail::ClientCall(client::current, options_, std::move(request));
  call->set_callback(std::move(done));
  call->begin(for_client);
}

HttpAwaitable::~HttpAwaitable() {
  if (call_) call_->release();
}

bool HttpAwaitable::await_ready() const {
  return !call_ || call_->finished();
}

void HttpAwaitable::await_suspend(std::coroutine_handle<> waiter) {
  call_->wait(waiter);
}

HttpResponse HttpAwaitable::await_resume() {
  if (!call_) {
    HttpResponse r;
    r.error = HttpError::kNoWorker;
    r.error_text = "HttpClient used off a worker thread";
    return r;
  }
  return call_->take();
}

}  // namespace peregrine
