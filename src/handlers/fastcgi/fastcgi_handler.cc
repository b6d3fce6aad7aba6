#include "handlers/fastcgi/fastcgi_handler.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "config/upstream_address.h"
#include "core/address_text.h"
#include "core/log.h"
#include "core/spares.h"
#include "core/strings.h"
#include "event/deferred.h"
#include "handlers/fastcgi/protocol.h"
#include "http/header_names.h"
#include "http/status.h"
#include "upstream/exchange.h"

namespace peregrine::fastcgi {

namespace {

constexpr uint16_t kRequestId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kPipelineMax = 16 * 1024;  // larger requests are not sent ahead
// Marks FastcgiExchange waiters in a group's queue (upstream::Waiter::kind).
constexpr char kWaiterKind = 0;
constexpr size_t kPipelineScan = 8;  // queued requests looked at for one to send ahead
// A streamed body is sent in pieces of up to fastcgi_buffer; bytes that wait for more are sent
// at the latest this long after they arrived (a script that trickles its output).
constexpr int64_t kStreamFlushMs = 50;

// try_files entries: $uri and $args replaced in one pass, so that a request whose path or query
// itself contains "$uri" or "$args" is never expanded again (it would loop forever).
std::string expand(std::string_view pattern, std::string_view uri, std::string_view args) {
  std::string out;
  out.reserve(pattern.size() + uri.size() + args.size());
  while (!pattern.empty()) {
    if (pattern.starts_with("$uri")) {
      out.append(uri);
      pattern.remove_prefix(4);
    } else if (pattern.starts_with("$args")) {
      out.append(args);
      pattern.remove_prefix(5);
    } else {
      out.push_back(pattern.front());
      pattern.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace

struct ResponseBody;  // tag: recycled response-body buffers (up to fastcgi_buffer and more)

// ---------------------------------------------------------------------------------------------
// One request in flight to php-fpm: the FastCGI codec on the shared upstream exchange
// (upstream/exchange.h), plus what only FastCGI has: pipelining, the backlog wait, the chunked
// body collected for CONTENT_LENGTH, the staged stream and FCGI_ABORT_REQUEST.
//
// Pipelining: php-fpm reads the requests of a kept connection one after the other, so a
// GET/HEAD request that would wait in the group's queue is sent right behind the request in
// progress (its "carrier"), and the child finds it as soon as it finishes, without sleeping until
// we hear of it and write again. The follower holds no slot: when its carrier ends cleanly it
// inherits the carrier's connection and slot; when the carrier's connection is lost it goes back
// to the front of the queue (php-fpm never started it, so even a retry is safe).
class FastcgiExchange final : public upstream::UpstreamExchange,
                              public RecycledAllocation<FastcgiExchange> {
 public:
  FastcgiExchange(FastcgiHandler& handler, const Request& request, handlers::Downstream& downstream,
                  Target target)
      : UpstreamExchange("fastcgi", handler.group_, request, downstream, handler.env_.timers,
                         handler.env_.clock),
        handler_(handler),
        target_(std::move(target)),
        reader_(kRequestId) {
    kind = &kWaiterKind;
    send_with_wait_ = true;  // see its comment: PHP gains, where a fast back end would not
    flush_timer_owner_.exchange = this;
    flush_timer_.owner = &flush_timer_owner_;
    // body buffers are taken when a body starts
  }

  ~FastcgiExchange() override {
    Spares<std::string, ResponseBody>::give(body_);
    Spares<std::string, ResponseBody>::give(stage_);
  }

  // Returns false when the exchange already ended (answered or failed).
  bool begin();

  // handlers::Exchange
  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;

  // Whether this queued request may be sent behind another on a connection to `server`.
  bool can_follow(size_t server) const;

 private:
  struct FlushTimerOwner final : event::TimerOwner {
    FastcgiExchange* exchange = nullptr;
    void on_timeout() override { exchange->on_flush_timeout(); }
  };

  // upstream::UpstreamExchange hooks.
  upstream::PickContext pick_context() override;
  void on_readable() override { read_upstream(); }
  void on_attempt() override;
  void on_request_written() override;
  void on_connection_closed() override;
  void on_client_abort() override;
  bool wait_on_full_backlog() const override { return true; }
  void on_queued() override { offer_to_carriers(); }
  void on_end() override;

  void take_follower();
  void list_as_carrier(bool open);
  void offer_to_carriers();
  void take_over(FastcgiExchange& carrier, bool response_started);
  void requeue();
  void encode_request_head();
  void read_upstream(std::string_view first = {}, bool drained = false);
  bool process_input(std::string_view& input);
  bool decode_input(std::string_view& input);
  bool flush_stage();
  handlers::Downstream::Sent send_stage();
  void start_head();
  bool handle_body(std::string_view data);
  void complete(bool clean, std::string_view rest);
  void on_flush_timeout();

  FastcgiHandler& handler_;
  Target target_;
  std::string client_ip_;         // ip_hash only: the balancer's key
  event::TimerNode flush_timer_;  // streaming: staged bytes wait no longer than kStreamFlushMs
  FlushTimerOwner flush_timer_owner_;

  // Request side.
  std::string chunked_body_;             // chunked requests: the whole body, to know CONTENT_LENGTH
  bool keep_conn_ = false;               // FCGI_KEEP_CONN was asked for
  FastcgiExchange* follower_ = nullptr;  // the request sent behind this one on conn_
  FastcgiExchange* carrier_ = nullptr;   // kFollowing: the request this one is sent behind
  // Links in handler_.carriers_ while this request could carry a follower but has none.
  FastcgiExchange* carriers_prev_ = nullptr;
  FastcgiExchange* carriers_next_ = nullptr;
  bool listed_as_carrier_ = false;
  bool reuse_conn_ = true;  // false once conn_ carries bytes no one will read (a follower left)
  bool socket_drained_ = false;  // the last read from conn_ emptied it (see read_upstream)

  // Response side.
  // Bytes read but not yet decoded because the client was full. Reads go to the handler's
  // shared buffer; only a paused remainder is copied here.
  std::string leftover_;
  ResponseReader reader_;
  bool streaming_ = false;
  bool unbuffered_ = false;   // X-Accel-Buffering: no (server-sent events): every read goes out
  bool head_sent_ = false;    // streaming: the head went out (with the first staged bytes)
  bool client_full_ = false;  // send_body() said kFull: stop reading php-fpm
  // The back end's own Content-Length, kept for a HEAD answer only (-1: none or not HEAD).
  int64_t head_length_ = -1;
  std::string body_;   // buffered response body (up to buffer_bytes)
  std::string stage_;  // streamed body bytes not sent yet (up to fastcgi_buffer)
};

bool FastcgiExchange::begin() {
  if (group_config().balance == config::Balance::kIpHash)
    client_ip_ = AddressText(request_.peer).ip_view();
  if (request_.chunked) {  // PHP needs CONTENT_LENGTH: read the whole body first (bounded)
    started_ms_ = now_ms();
    return true;
  }
  encode_request_head();
  return start();
}

upstream::PickContext FastcgiExchange::pick_context() {
  return upstream::PickContext{now_ms(), client_ip_, request_.path};
}

void FastcgiExchange::on_attempt() {
  // A retry reads a new response from its start (the client saw nothing of the last one).
  if (got_byte_ || reader_.head_done()) {
    reader_.reset();
    response_.clear();
    body_.clear();
    stage_.clear();
    leftover_.clear();
    streaming_ = unbuffered_ = head_sent_ = client_full_ = false;
    head_length_ = -1;
    event::TimerList::disarm(flush_timer_);
  }
  reuse_conn_ = true;
}

void FastcgiExchange::encode_request_head() {
  const Request& r = request_;
  const std::string& root = handler_.root_;
  std::string& out = out_;
  out.reserve(4096);
  // Keep the connection only under a cap (see UpstreamServer::max_conns): otherwise idle
  // connections could hold every php-fpm child while requests of another worker wait for one.
  keep_conn_ = true;
  for (size_t i = 0; i < group_config().servers.size(); ++i)
    if (group_.cap(i) == 0) keep_conn_ = false;
  append_begin_request(out, kRequestId, keep_conn_);
  ParamsBuilder& params = handler_.params_;
  params.clear();
  params.add("SCRIPT_FILENAME", root, target_.script_name);
  params.add("SCRIPT_NAME", target_.script_name);
  if (!target_.path_info.empty()) {
    params.add("PATH_INFO", target_.path_info);
    params.add("PATH_TRANSLATED", root, target_.path_info);
  }
  params.add("QUERY_STRING", target_.query);
  params.add("REQUEST_METHOD", r.method_text);
  if (!r.remote_user.empty()) {  // the route's basic auth accepted this user
    params.add("REMOTE_USER", r.remote_user);
    params.add("AUTH_TYPE", "Basic");
  }
  // As nginx's $request_uri: origin-form even when the client sent an absolute-form target,
  // whose scheme and authority are the routing's business (the authority is HTTP_HOST).
  if (r.authority.empty()) {
    params.add("REQUEST_URI", r.target);
  } else {
    std::string uri(r.raw_path);
    if (!r.query.empty()) uri.append("?").append(r.query);
    params.add("REQUEST_URI", uri);
  }
  params.add("DOCUMENT_URI", target_.script_name, target_.path_info);
  params.add_encoded(handler_.fixed_params_);  // DOCUMENT_ROOT, GATEWAY_INTERFACE, ...
  if (auto type = r.header("Content-Type")) params.add("CONTENT_TYPE", *type);
  char length[24];
  char* length_end = length;
  if (r.chunked || r.content_length >= 0) {
    auto [end, ec] =
        std::to_chars(length, length + sizeof length,
                      r.chunked ? static_cast<int64_t>(chunked_body_.size()) : r.content_length);
    length_end = end;
  }
  params.add("CONTENT_LENGTH", std::string_view(length, length_end - length));
  std::string_view host = r.host;
  if (!host.empty() && host.front() != '[') {
    size_t colon = host.rfind(':');
    if (colon != std::string_view::npos) host = host.substr(0, colon);
  } else if (!host.empty()) {
    size_t close = host.find(']');
    if (close != std::string_view::npos) host = host.substr(0, close + 1);
  }
  if (host.empty() && !handler_.site_.hosts.empty()) host = handler_.site_.hosts.front();
  params.add("SERVER_NAME", host);
  AddressText local(r.local);
  params.add("SERVER_ADDR", local.ip_view());
  params.add("SERVER_PORT", local.port_view());
  AddressText peer(r.peer);
  params.add("REMOTE_ADDR", peer.ip_view());
  params.add("REMOTE_PORT", peer.port_view());
  params.add("SERVER_PROTOCOL", r.version_major == 2   ? "HTTP/2.0"
                                : r.version_minor == 0 ? "HTTP/1.0"
                                                       : "HTTP/1.1");
  // CGI's way to say TLS: PHP's $_SERVER['HTTPS'] (WordPress's is_ssl()) and REQUEST_SCHEME.
  params.add("REQUEST_SCHEME", r.secure ? "https" : "http");
  if (r.secure) params.add("HTTPS", "on");
  if (r.tls != nullptr) {  // mod_ssl's names (PHP's $_SERVER['SSL_CLIENT_VERIFY'] ...)
    params.add("SSL_CLIENT_VERIFY", r.tls->client_verify());
    const std::string certificate = r.tls->client_certificate_pem();
    if (!certificate.empty()) {
      params.add("SSL_CLIENT_S_DN", r.tls->client_subject_dn());
      params.add("SSL_CLIENT_I_DN", r.tls->client_issuer_dn());
      params.add("SSL_CLIENT_M_SERIAL", r.tls->client_serial());
      params.add("SSL_CLIENT_CERT", certificate);
    }
  }
  for (const Header& h : r.header_list()) {
    // CONTENT_TYPE/LENGTH are passed above; "Proxy" would become HTTP_PROXY, which CGI
    // programs take for their outgoing proxy (httpoxy).
    // A FastCGI request never switches protocols, so Upgrade and HTTP2-Settings mean nothing
    // here, and h2c is never offered past us to anything behind the application.
    if (ascii_iequals(h.name, "Content-Type") || ascii_iequals(h.name, "Content-Length") ||
        ascii_iequals(h.name, "Proxy") || ascii_iequals(h.name, "Upgrade") ||
        ascii_iequals(h.name, "HTTP2-Settings"))
      continue;
    params.add_header(h.name, h.value);
  }
  params.add_encoded(handler_.extra_params_);  // last: a configured value overrides ours
  params.write(out, kRequestId);
  append_params_end(out, kRequestId);
  if (!r.has_body()) {
    append_stdin_end(out, kRequestId);
    request_done_ = true;
  } else if (r.chunked) {
    append_stdin(out, kRequestId, chunked_body_);
    append_stdin_end(out, kRequestId);
    request_done_ = true;
    std::string().swap(chunked_body_);
  }
}

bool FastcgiExchange::on_body(std::string_view bytes, bool last) {
  if (phase_ == Phase::kDone) return false;
  if (phase_ == Phase::kStarting) {  // chunked request body: collect, then go
    chunked_body_.append(bytes);
    if (!last) return true;
    encode_request_head();
    start();
    return true;
  }
  if (!bytes.empty()) append_stdin(out_, kRequestId, bytes);
  if (last) {
    append_stdin_end(out_, kRequestId);
    request_done_ = true;
  }
  return request_bytes_added();
}

void FastcgiExchange::on_request_written() {
  if (request_done_) take_follower();
}

// `first`: bytes read for us before we could read (our carrier's last read): decoded first.
// `drained`: that read emptied the socket.
void FastcgiExchange::read_upstream(std::string_view first, bool drained) {
  char* buffer = handler_.read_buffer_.get();
  socket_drained_ = drained;
  while (phase_ == Phase::kActive && !client_full_) {
    std::string_view input;
    std::string paused;
    if (!first.empty()) {
      input = first;
      first = {};
    } else if (!leftover_.empty()) {  // bytes left from a pause: finish them first
      paused.swap(leftover_);
      input = paused;
      socket_drained_ = false;  // bytes may have come meanwhile, their events spent
    } else {
      if (socket_drained_) return;  // see drained_by()
      ssize_t n = receive(buffer, kReadChunk);
      if (n == 0) return;
      if (n < 0) {  // EOF or an error before END_REQUEST
        const char* detail = errno != 0 ? std::strerror(errno) : "";
        fail(upstream::Failure::kReset,
             reader_.head_done() ? "connection closed mid-response"
                                 : "connection closed before a response",
             detail);
        return;
      }
      socket_drained_ = drained_by(n, kReadChunk);
      arm_io(group_config().read_timeout.count());
      input = std::string_view(buffer, static_cast<size_t>(n));
    }
    if (!process_input(input)) {
      if (phase_ != Phase::kDone && !input.empty()) leftover_.assign(input);
      return;
    }
  }
}

// Decodes the records in `input`, consuming it. A streamed body is gathered up to fastcgi_buffer
// and sent in one piece (php-fpm writes 8 KB at a time: each send we save is also a wake-up of
// the client we do not cause); the end of the response or the flush timer sends the rest.
// Returns false when it cannot go on now (the client is full, or the exchange ended).
bool FastcgiExchange::process_input(std::string_view& input) {
  const bool go_on = decode_input(input);
  if (phase_ == Phase::kDone) return false;
  if (head_sent_ && !unbuffered_ && stage_.size() < handler_.options_.buffer_bytes) {
    if (!stage_.empty() && !flush_timer_.armed())
      timers_.arm(flush_timer_, kStreamFlushMs, now_ms());
    return go_on;
  }
  return flush_stage() && go_on;
}

void FastcgiExchange::on_flush_timeout() {
  if (phase_ == Phase::kActive && !client_full_) flush_stage();
}

handlers::Downstream::Sent FastcgiExchange::send_stage() {
  handlers::Downstream::Sent sent = handlers::Downstream::Sent::kMore;
  if (!head_sent_) {
    head_sent_ = true;
    response_.append_borrowed_body(stage_);  // send_head() copies it right after the head
    if (!downstream_.send_head(response_, -1)) sent = handlers::Downstream::Sent::kGone;
  } else if (!stage_.empty()) {
    sent = downstream_.send_body(stage_);
  }
  stage_.clear();
  event::TimerList::disarm(flush_timer_);
  return sent;
}

bool FastcgiExchange::flush_stage() {
  if (stage_.empty() && (head_sent_ || !streaming_)) return true;
  switch (send_stage()) {
    case handlers::Downstream::Sent::kMore:
      return true;
    case handlers::Downstream::Sent::kFull:
      client_full_ = true;
      return false;
    case handlers::Downstream::Sent::kGone:
      end();  // closes the connection (mid-response: never pooled) and frees the slot
      return false;
  }
  return true;
}

bool FastcgiExchange::decode_input(std::string_view& input) {
  for (;;) {
    std::string_view data;
    switch (reader_.next(input, data)) {
      case ResponseReader::Event::kNeedMore:
        return true;
      case ResponseReader::Event::kHead:
        start_head();
        break;
      case ResponseReader::Event::kBody:
        if (!handle_body(data)) return false;
        break;
      case ResponseReader::Event::kStderr:
        while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.remove_suffix(1);
        if (!data.empty())
          LOG_WARN("fastcgi %s stderr for \"%.*s %.*s\": %.*s", server().address.c_str(),
                   static_cast<int>(request_.method_text.size()), request_.method_text.data(),
                   static_cast<int>(request_.target.size()), request_.target.data(),
                   static_cast<int>(data.size()), data.data());
        break;
      case ResponseReader::Event::kEnd:
        if (reader_.end_status() != ProtocolStatus::kRequestComplete) {
          fail(upstream::Failure::kReset, reader_.end_status() == ProtocolStatus::kOverloaded
                                              ? "overloaded"
                                              : "refused the request");
          return false;
        }
        complete(
            keep_conn_ && reader_.at_record_boundary() && request_done_ && out_sent_ == out_.size(),
            input);
        return false;
      case ResponseReader::Event::kError:
        fail(upstream::Failure::kMalformed,
             reader_.head_done() ? "malformed record" : "bad response head", reader_.error());
        return false;
    }
    if (phase_ == Phase::kDone || client_full_) return false;
  }
}

void FastcgiExchange::start_head() {
  head_received_ = true;
  // Recycled buffers, unless a retry's earlier head took them already. An empty std::string
  // has its inline capacity, never 0: testing for 0 never took a spare, so every response
  // allocated a fresh 128 KB body and the spares only filled up (php_info: 1.25x the CPU).
  static const size_t kInline = std::string().capacity();  // not constexpr for clang 14
  if (body_.capacity() <= kInline) Spares<std::string, ResponseBody>::take(body_);
  if (stage_.capacity() <= kInline) Spares<std::string, ResponseBody>::take(stage_);
  const CgiHead& head = reader_.head();
  response_.set_status(head.status);
  note_upstream(head.status);
  if (head.has_content_type) response_.add_header("Content-Type", head.content_type);
  if (!head.location.empty()) response_.add_header("Location", head.location);
  for (const CgiHeader& h : head.headers) {
    if (request_.is_head() && ascii_iequals(h.name, "Content-Length")) {
      // Describes the body a GET would get: the one length a HEAD answer can truthfully carry.
      int64_t n = -1;
      auto [end, ec] = std::from_chars(h.value.data(), h.value.data() + h.value.size(), n);
      if (ec == std::errc() && end == h.value.data() + h.value.size() && n >= 0) head_length_ = n;
      continue;
    }
    if (http::is_hop_by_hop(h.name) || http::is_framing(h.name)) continue;
    if (ascii_iequals(h.name,
                      "X-Accel-Buffering")) {  // for us (nginx's convention), not the client
      unbuffered_ = ascii_iequals(h.value, "no");
      continue;
    }
    if (!response_.add_header(h.name, h.value))
      LOG_WARN("fastcgi %s: dropped an invalid response header %.*s", server().address.c_str(),
               static_cast<int>(h.name.size()), h.name.data());
  }
  // The head goes out now, without waiting for a body. From now on the body streams (no
  // length); body_ keeps the stage's buffer: both go back to the spares.
  if (unbuffered_) {
    streaming_ = true;
    stage_.swap(body_);
  }
}

bool FastcgiExchange::handle_body(std::string_view data) {
  if (!streaming_) {
    const size_t size = body_.size() + data.size();
    if (size <= handler_.options_.buffer_bytes) {
      // A body past 8 KB (php-fpm's record size) is likely large: make room for the whole buffer
      // (up to 256 KB; a larger fastcgi_buffer grows as needed) and the read that may end it, at
      // once, rather than copy it at each doubling.
      if (size > body_.capacity() && size > 8192)
        body_.reserve(std::min<size_t>(handler_.options_.buffer_bytes, 256 * 1024) + kReadChunk);
      body_.append(data);
      return true;
    }
    // The body outgrew the buffer: from now on it streams (no length). The head goes out with
    // the first staged bytes, in the same send.
    streaming_ = true;
    stage_.swap(body_);
  }
  stage_.append(data);
  return true;
}

void FastcgiExchange::on_writable() {
  if (phase_ != Phase::kActive || !client_full_) return;
  client_full_ = false;
  if (!stage_.empty() && !flush_timer_.armed())  // the flush timer fired while the client was full
    timers_.arm(flush_timer_, kStreamFlushMs, now_ms());
  read_upstream();
}

// `clean`: the connection is at a request boundary and may carry another request; `rest`: the
// bytes read after END_REQUEST (the follower's response, or junk when there is none).
void FastcgiExchange::complete(bool clean, std::string_view rest) {
  phase_ = Phase::kDone;  // nothing reads the connection for us any more
  disarm_io();
  if (!reader_.head_done()) {
    log_failure("the script ended without a response head");
    abandon(502);
    return;
  }
  if (clean && reuse_conn_ && follower_) {
    // The connection and the slot go on to the follower. It decodes `rest` at once, before
    // anything else may read into the buffer `rest` lies in.
    group_.report_success(server_);
    FastcgiExchange* next = std::exchange(follower_, nullptr);
    next->take_over(*this, !rest.empty());
    conn_ = nullptr;
    has_slot_ = false;
    next->read_upstream(rest, socket_drained_);
  } else {
    complete_upstream(clean && reuse_conn_ && rest.empty());
  }
  if (streaming_) {
    if (send_stage() != handlers::Downstream::Sent::kGone) downstream_.finish();
  } else if (request_.is_head() && body_.empty()) {
    // php-fpm sends no body for HEAD, so the length of the body a GET would get is unknown
    // here, and respond() would announce `Content-Length: 0`. A HEAD's fields must be a GET's
    // (RFC 9110 9.3.2): no length unless the script gave one, as nginx does.
    if (downstream_.send_head(response_, head_length_)) downstream_.finish();
  } else {
    response_.append_borrowed_body(body_);  // respond() copies it out before we end
    downstream_.respond(response_);
  }
  end();
}

bool FastcgiExchange::can_follow(size_t server) const {
  return phase_ == Phase::kQueued && keep_conn_ && request_done_ && out_.size() <= kPipelineMax &&
         (request_.method == Method::kGet || request_.method == Method::kHead) &&
         handler_.options_.pipelining && !tried_.contains(server);
}

// Our request is all sent: if requests wait for a slot, send the first that may follow right
// behind it. Sent in one piece or not at all (a partial send leaves the connection unusable
// after us, and the follower goes back to the queue when we end).
void FastcgiExchange::take_follower() {
  if (follower_ || !keep_conn_ || !reuse_conn_ || !conn_ || phase_ != Phase::kActive ||
      !handler_.options_.pipelining || conn_->uses() + 2 > group_config().keepalive_requests) {
    list_as_carrier(false);
    return;
  }
  const size_t server = server_;
  upstream::Waiter* waiter = group_.queued() == 0
                                 ? nullptr
                                 : group_.find_waiter(
                                       [server](upstream::Waiter& w) {
                                         return w.kind == &kWaiterKind &&
                                                static_cast<FastcgiExchange&>(w).can_follow(server);
                                       },
                                       kPipelineScan);
  if (!waiter) {  // a request that queues later may still follow us
    list_as_carrier(true);
    return;
  }
  auto& next = static_cast<FastcgiExchange&>(*waiter);
  ssize_t n = ::send(conn_->fd(), next.out_.data(), next.out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n <= 0) return;  // the socket is full (or broken: our own read will tell)
  list_as_carrier(false);
  if (static_cast<size_t>(n) < next.out_.size()) reuse_conn_ = false;
  group_.cancel(next, /*keep_deadline=*/true);  // it waits no longer than it would have queued
  next.phase_ = Phase::kFollowing;
  next.carrier_ = this;
  next.sent_any_ = true;
  follower_ = &next;
}

void FastcgiExchange::list_as_carrier(bool open) {
  if (open == listed_as_carrier_) return;
  listed_as_carrier_ = open;
  FastcgiExchange*& head = handler_.carriers_;
  if (open) {
    carriers_prev_ = nullptr;
    carriers_next_ = head;
    if (head) head->carriers_prev_ = this;
    head = this;
    return;
  }
  if (carriers_prev_)
    carriers_prev_->carriers_next_ = carriers_next_;
  else
    head = carriers_next_;
  if (carriers_next_) carriers_next_->carriers_prev_ = carriers_prev_;
  carriers_prev_ = carriers_next_ = nullptr;
}

// We just queued: a request in progress with nothing behind it may take the first in line (us,
// or one that waited longer).
void FastcgiExchange::offer_to_carriers() {
  FastcgiExchange* carrier = handler_.carriers_;
  while (carrier && phase_ == Phase::kQueued) {
    FastcgiExchange* next = carrier->carriers_next_;
    if (&carrier->group_ == &group_ && can_follow(carrier->server_)) carrier->take_follower();
    carrier = next;
  }
}

// The carrier ended cleanly: its connection (with our request already sent on it) and its slot
// are ours. `response_started`: it read the start of our response past its END_REQUEST.
void FastcgiExchange::take_over(FastcgiExchange& carrier, bool response_started) {
  carrier_ = nullptr;
  event::TimerList::disarm(queue_timer);
  conn_ = carrier.conn_;
  hung_up_ = carrier.hung_up_;
  server_ = carrier.server_;
  has_slot_ = true;
  tried_.insert(server_);
  ++tries_;
  out_sent_ = out_.size();
  sent_any_ = true;
  got_byte_ = response_started;
  phase_ = Phase::kActive;
  group_.hand_over(conn_, *this);
  arm_io(group_config().read_timeout.count());
  take_follower();
}

// The carrier's connection is gone before our turn: php-fpm never started this request, so it
// waits again, first in line.
void FastcgiExchange::requeue() {
  carrier_ = nullptr;
  sent_any_ = false;
  out_sent_ = 0;
  phase_ = Phase::kQueued;
  acquire(/*first_in_line=*/true);
}

void FastcgiExchange::on_connection_closed() {
  reuse_conn_ = true;
  list_as_carrier(false);
  if (FastcgiExchange* next = std::exchange(follower_, nullptr)) next->requeue();
}

void FastcgiExchange::on_client_abort() {
  // The client went away: tell php-fpm (FCGI_ABORT_REQUEST, best effort); the base then drops
  // the connection rather than wait for the script to notice. A follower goes back to the front
  // of the queue: php-fpm's child fails to write our answer and drops the connection without
  // reading the request behind it, so that one never runs twice.
  if (conn_->sending()) return;  // the request itself is not out yet: an abort would go first
  std::string abort;
  append_abort_request(abort, kRequestId);
  ssize_t ignored = ::send(conn_->fd(), abort.data(), abort.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

void FastcgiExchange::on_end() {
  list_as_carrier(false);
  event::TimerList::disarm(flush_timer_);
  if (carrier_) {  // our request will still reach php-fpm: nobody may read the connection after
    carrier_->follower_ = nullptr;
    carrier_->reuse_conn_ = false;
    carrier_ = nullptr;
  }
}

// ---------------------------------------------------------------------------------------------

FastcgiHandler::FastcgiHandler(const config::Route& route, const config::Site& site,
                               upstream::GroupRuntime& group, const static_files::MimeTable& mime,
                               const handlers::WorkerEnv& env)
    : route_(route),
      options_(*route.options_as<FastcgiOptions>()),
      site_(site),
      group_(group),
      env_(env) {
  root_ = options_.root.empty() ? site.static_files.root : options_.root;
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  root_fd_ = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  read_buffer_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
  default_split_ =
      options_.split_path && options_.split_path->pattern() == config::kDefaultSplitPath;
  // Parameters that never change, encoded once (PARAMS is a byte stream of pairs).
  append_name_value(fixed_params_, "DOCUMENT_ROOT", root_);
  append_name_value(fixed_params_, "SERVER_SOFTWARE", "peregrine");
  append_name_value(fixed_params_, "GATEWAY_INTERFACE", "CGI/1.1");
  append_name_value(fixed_params_, "REDIRECT_STATUS", "200");
  for (const auto& [key, value] : options_.params) append_name_value(extra_params_, key, value);
  config::StaticOptions files = route.static_files;
  files.root = root_;
  files.index.clear();
  for (const std::string& name : options_.index)
    if (!is_script("/" + name)) files.index.push_back(name);
  files_ = std::make_unique<static_files::StaticHandler>(files, std::string(), mime, env.clock,
                                                         route.compress);
}

FastcgiHandler::~FastcgiHandler() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

FastcgiHandler::Kind FastcgiHandler::stat_path(std::string_view rel_path) {
  const int64_t now = env_.clock.monotonic_ms;
  scratch_.assign(rel_path);
  auto it = stats_.find(scratch_);
  if (it != stats_.end() && now - it->second.checked_at_ms < 1000) return it->second.kind;
  std::string relative = scratch_.size() > 1 ? scratch_.substr(1) : std::string(".");
  struct stat st;
  Kind kind = Kind::kMissing;
  if (::fstatat(root_fd_, relative.c_str(), &st, 0) == 0)
    kind = S_ISDIR(st.st_mode)   ? Kind::kDirectory
           : S_ISREG(st.st_mode) ? Kind::kFile
                                 : Kind::kMissing;
  if (stats_.size() > 4096) stats_.clear();
  stats_[scratch_] = {kind, now};
  return kind;
}

bool split_default(std::string_view uri, std::string_view& script_name,
                   std::string_view& path_info) {
  // ^(.+?\.php)(/.*)?$ : the first ".php" after at least one character that ends the path or a
  // segment.
  for (size_t at = 1; (at = uri.find(".php", at)) != std::string_view::npos; at += 4) {
    const size_t end = at + 4;
    if (end == uri.size() || uri[end] == '/') {
      script_name = uri.substr(0, end);
      path_info = uri.substr(end);
      return true;
    }
  }
  return false;
}

bool FastcgiHandler::split(std::string_view uri, Target& target) const {
  // The default pattern is matched by hand (pcre2 costs several times more per request), except
  // for a path with a line break, which PCRE's '.' and '$' treat specially.
  if (!options_.split_path || (default_split_ && uri.find('\n') == std::string_view::npos)) {
    std::string_view script_name, path_info;
    if (!split_default(uri, script_name, path_info)) return false;
    target.script_name = script_name;
    target.path_info = path_info;
    return true;
  }
  Regex::Captures captures;
  if (!options_.split_path->match(uri, &captures)) return false;
  target.script_name = captures.group[1];
  target.path_info = captures.group[2];
  return !target.script_name.empty();
}

bool FastcgiHandler::is_script(std::string_view uri) const {
  Target t;
  return split(uri, t) && t.path_info.empty();
}

bool FastcgiHandler::try_index(std::string_view dir_uri, Target& target) {
  std::string base(dir_uri);
  if (base.empty() || base.back() != '/') base.push_back('/');
  for (const std::string& name : options_.index) {
    std::string candidate = base + name;
    if (stat_path(candidate) != Kind::kFile) continue;
    if (split(candidate, target) && target.path_info.empty()) {
      target.kind = Target::Kind::kScript;
    } else {
      target.kind = Target::Kind::kStatic;
      target.static_path = base;
    }
    return true;
  }
  return false;
}

Target FastcgiHandler::resolve(const Request& request) {
  Target target;
  const std::string_view uri = request.path;
  target.query = request.query;
  if (options_.try_files.empty()) {
    const bool has_script = split(uri, target);
    if (!has_script && uri.back() == '/') {
      if (!try_index(uri, target)) target.kind = Target::Kind::kNotFound;
      return target;
    }
    if (!has_script) {  // no script in the path: the whole path is the script
      target.script_name = uri;
      target.path_info.clear();
    }
    target.kind = !options_.check_script || stat_path(target.script_name) == Kind::kFile
                      ? Target::Kind::kScript
                      : Target::Kind::kNotFound;
    return target;
  }
  // A path naming a script runs it (with its PATH_INFO) or is a 404: a missing /x.php never
  // reaches the front controller (as with nginx's `location ~ \.php$ { try_files $uri =404; }`).
  if (split(uri, target)) {
    if (stat_path(target.script_name) == Kind::kFile || !options_.check_script) {
      target.kind = Target::Kind::kScript;
      return target;
    }
    target.kind = Target::Kind::kNotFound;
    return target;
  }
  const size_t last = options_.try_files.size() - 1;
  for (size_t i = 0; i < last; ++i) {
    std::string candidate = expand(options_.try_files[i], uri, request.query);
    if (candidate.empty()) continue;
    if (candidate.back() == '/') {
      if (candidate.size() > 1) candidate.pop_back();
      if (stat_path(candidate) == Kind::kDirectory && try_index(candidate, target)) return target;
      continue;
    }
    if (stat_path(candidate) != Kind::kFile) continue;
    if (split(candidate, target) && target.path_info.empty()) {
      target.kind = Target::Kind::kScript;
    } else {
      target.kind = Target::Kind::kStatic;
      target.static_path = candidate;
    }
    return target;
  }
  // The fallback: "=STATUS" or a URI ("/index.php?$args"), mapped without another round trip.
  const std::string& fallback = options_.try_files[last];
  if (fallback.size() == 4 && fallback[0] == '=') {
    target.kind = Target::Kind::kNotFound;
    target.status = (fallback[1] - '0') * 100 + (fallback[2] - '0') * 10 + (fallback[3] - '0');
    return target;
  }
  // Split the pattern first: a '?' that comes from the (decoded) path is not the query's start.
  std::string_view pattern = fallback;
  size_t question = pattern.find('?');
  std::string path_storage = expand(pattern.substr(0, question), uri, request.query);
  std::string_view path = path_storage;
  target.query = question == std::string_view::npos
                     ? std::string(request.query)
                     : expand(pattern.substr(question + 1), uri, request.query);
  if (split(path, target)) {
    target.kind = !options_.check_script || stat_path(target.script_name) == Kind::kFile
                      ? Target::Kind::kScript
                      : Target::Kind::kNotFound;
  } else {
    target.kind = Target::Kind::kStatic;
    target.static_path = path;
  }
  return target;
}

handlers::Exchange* FastcgiHandler::start(const Request& request,
                                          handlers::Downstream& downstream) {
  Target target = resolve(request);
  if (target.kind == Target::Kind::kNotFound) {
    static_response_.clear();
    static_response_.set_status(target.status);
    downstream.respond(static_response_);
    return nullptr;
  }
  if (target.kind == Target::Kind::kStatic) {
    static_response_.clear();
    if (target.static_path == request.path) {
      files_->handle(request, static_response_);
    } else {
      Request copy = request;
      copy.path_storage = target.static_path;
      copy.path = copy.path_storage;
      files_->handle(copy, static_response_);
    }
    downstream.respond(static_response_);
    return nullptr;
  }
  auto* exchange = new FastcgiExchange(*this, request, downstream, std::move(target));
  if (!exchange->begin()) return nullptr;  // ended at once; it disposes of itself
  return exchange;
}

}  // namespace peregrine::fastcgi
