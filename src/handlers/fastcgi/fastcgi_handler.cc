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

namespace peregrine::fastcgi {

namespace {

constexpr uint16_t kRequestId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kStdinHighWater = 128 * 1024;  // encoded body waiting for php-fpm: pause beyond
constexpr int64_t kBacklogRetryMs = 5;       // php-fpm's listen backlog full: try again this soon
constexpr size_t kReplayLimit = 256 * 1024;  // request bytes kept for a retry
constexpr size_t kPipelineMax = 16 * 1024;   // larger requests are not sent ahead
constexpr size_t kPipelineScan = 8;          // queued requests looked at for one to send ahead
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
// One request in flight to php-fpm.
//
// Pipelining: php-fpm reads the requests of a kept connection one after the other, so a
// GET/HEAD request that would wait in the group's queue is sent right behind the request in
// progress (its "carrier"), and the child finds it as soon as it finishes, without sleeping until
// we hear of it and write again. The follower holds no slot: when its carrier ends cleanly it
// inherits the carrier's connection and slot; when the carrier's connection is lost it goes back
// to the front of the queue (php-fpm never started it, so even a retry is safe).
class FastcgiExchange final : public handlers::Exchange,
                              public event::Pollable,
                              public upstream::Waiter,
                              public event::Disposable,
                              public RecycledAllocation<FastcgiExchange> {
 public:
  FastcgiExchange(FastcgiHandler& handler, const Request& request, handlers::Downstream& downstream,
                  Target target)
      : handler_(handler),
        group_(handler.group_),
        request_(request),
        downstream_(downstream),
        target_(std::move(target)),
        head_parser_(CgiHeadParser::kDefaultMaxHead) {
    io_timer_owner_.exchange = this;
    io_timer_.owner = &io_timer_owner_;
    flush_timer_owner_.exchange = this;
    flush_timer_.owner = &flush_timer_owner_;
    Spares<std::string>::take(out_);  // body buffers are taken when a body starts
    Spares<Response>::take(response_);
  }

  ~FastcgiExchange() override {
    Spares<std::string>::give(out_);
    Spares<std::string, ResponseBody>::give(body_);
    Spares<std::string, ResponseBody>::give(stage_);
    Spares<Response>::give(response_);
  }

  // Returns false when the exchange already ended (answered or failed).
  bool begin();

  // handlers::Exchange
  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;
  void on_abort() override;

  // event::Pollable
  void on_ready(uint32_t readiness) override;

  // upstream::Waiter
  void on_slot_ready() override;
  void on_queue_timeout() override;

  // Whether this queued request may be sent behind another on a connection to `server`.
  bool can_follow(size_t server) const;

 private:
  // kFollowing: sent on the connection of the request in progress (carrier_), waiting for it.
  enum class Phase : uint8_t { kCollecting, kQueued, kConnecting, kActive, kFollowing, kDone };
  struct IoTimerOwner final : event::TimerOwner {
    FastcgiExchange* exchange = nullptr;
    void on_timeout() override { exchange->on_io_timeout(); }
  };
  struct FlushTimerOwner final : event::TimerOwner {
    FastcgiExchange* exchange = nullptr;
    void on_timeout() override { exchange->on_flush_timeout(); }
  };

  bool try_acquire(bool first_in_line = false);
  void connect_upstream();
  void take_follower();
  void list_as_carrier(bool open);
  void offer_to_carriers();
  void take_over(FastcgiExchange& carrier, bool response_started);
  void requeue();
  void on_connected();
  void encode_request_head();
  bool write_upstream();
  void read_upstream(std::string_view first = {}, bool drained = false);
  bool process_input(std::string_view& input);
  bool decode_input(std::string_view& input);
  bool flush_stage();
  handlers::Downstream::Sent send_stage();
  bool handle_stdout(std::string_view data);
  bool start_streaming();
  void complete(bool clean, std::string_view rest);
  void upstream_failed(int status, const char* what, bool retryable);
  void on_io_timeout();
  void on_flush_timeout();
  void arm_io_timer(config::Millis timeout);
  void close_upstream();
  void release_slot();
  void end();
  const config::UpstreamServer& server() const { return group_.server(server_); }

  FastcgiHandler& handler_;
  upstream::GroupRuntime& group_;
  const Request& request_;
  handlers::Downstream& downstream_;
  Target target_;
  Phase phase_ = Phase::kCollecting;
  upstream::TriedSet tried_;
  size_t server_ = 0;
  bool has_slot_ = false;
  upstream::UpstreamConnection* conn_ = nullptr;
  int64_t started_ms_ = 0;
  event::TimerNode io_timer_;
  IoTimerOwner io_timer_owner_;
  event::TimerNode flush_timer_;  // streaming: staged bytes wait no longer than kStreamFlushMs
  FlushTimerOwner flush_timer_owner_;

  // Request side: encoded records waiting for the socket.
  std::string out_;
  size_t out_sent_ = 0;
  bool stdin_done_ = false;
  bool body_paused_ = false;  // we told the connection to stop sending body bytes
  std::string chunked_body_;  // chunked requests: the whole body, to know CONTENT_LENGTH
  bool any_response_byte_ = false;
  // out_ still holds every byte of the request written so far, so it can be sent again on a
  // fresh connection (a pooled one turned out stale, or the next server). Dropped beyond a size.
  bool replayable_ = true;
  bool keep_conn_ = false;               // FCGI_KEEP_CONN was asked for
  bool sent_any_ = false;                // some of the request reached a back end
  FastcgiExchange* follower_ = nullptr;  // the request sent behind this one on conn_
  FastcgiExchange* carrier_ = nullptr;   // kFollowing: the request this one is sent behind
  // Links in handler_.carriers_ while this request could carry a follower but has none.
  FastcgiExchange* carriers_prev_ = nullptr;
  FastcgiExchange* carriers_next_ = nullptr;
  bool listed_as_carrier_ = false;
  bool reuse_conn_ = true;  // false once conn_ carries bytes no one will read (a follower left)
  // conn_ reported a hang-up (php-fpm's child ends after pm.max_requests: it shuts its side down
  // with the last answer, and edge-triggered epoll says so only once): never pooled after us.
  bool upstream_hung_up_ = false;
  bool socket_drained_ = false;  // the last read from conn_ emptied it (see read_upstream)

  // Response side.
  // Bytes read but not yet decoded because the client was full. Reads go to the handler's
  // shared buffer; only a paused remainder is copied here.
  std::string leftover_;
  Decoder decoder_{kRequestId};
  CgiHeadParser head_parser_;
  bool head_done_ = false;
  bool streaming_ = false;
  bool unbuffered_ = false;   // X-Accel-Buffering: no (server-sent events): every read goes out
  bool head_sent_ = false;    // streaming: the head went out (with the first staged bytes)
  bool client_full_ = false;  // send_body() said kFull: stop reading php-fpm
  std::string body_;          // buffered response body (up to buffer_bytes)
  std::string stage_;         // streamed body bytes not sent yet (up to fastcgi_buffer)
  Response response_;
};

bool FastcgiExchange::begin() {
  started_ms_ = handler_.env_.clock.monotonic_ms;
  tried_ = upstream::TriedSet(group_.config().servers.size());
  if (request_.chunked) {  // PHP needs CONTENT_LENGTH: read the whole body first (bounded)
    phase_ = Phase::kCollecting;
    return true;
  }
  encode_request_head();
  return try_acquire();
}

bool FastcgiExchange::try_acquire(bool first_in_line) {
  AddressText client(group_.config().balance == config::Balance::kIpHash ? request_.peer : nullptr);
  upstream::PickContext context{handler_.env_.clock.monotonic_ms, client.ip_view(), request_.path};
  switch (group_.acquire(context, tried_, *this, &server_, first_in_line)) {
    case upstream::GroupRuntime::Acquire::kReady:
      has_slot_ = true;
      tried_.insert(server_);
      connect_upstream();
      return phase_ != Phase::kDone;
    case upstream::GroupRuntime::Acquire::kQueued:
      phase_ = Phase::kQueued;
      offer_to_carriers();
      return true;
    case upstream::GroupRuntime::Acquire::kQueueFull:
      LOG_WARN("fastcgi upstream %s: wait queue full (%zu), answering 503 to %.*s",
               group_.config().name.c_str(), group_.queued(),
               static_cast<int>(request_.target.size()), request_.target.data());
      phase_ = Phase::kDone;
      downstream_.fail(503);
      end();
      return false;
    case upstream::GroupRuntime::Acquire::kUnavailable:
      LOG_ERROR("fastcgi upstream %s: no server available for %.*s", group_.config().name.c_str(),
                static_cast<int>(request_.target.size()), request_.target.data());
      phase_ = Phase::kDone;
      downstream_.fail(502);
      end();
      return false;
  }
  return false;
}

void FastcgiExchange::on_slot_ready() {
  if (phase_ != Phase::kQueued) return;
  try_acquire();
}

void FastcgiExchange::on_queue_timeout() {
  if (phase_ != Phase::kQueued && phase_ != Phase::kConnecting && phase_ != Phase::kFollowing)
    return;
  LOG_WARN("fastcgi upstream %s: %.*s waited %lld ms for a free php-fpm slot: 503",
           group_.config().name.c_str(), static_cast<int>(request_.target.size()),
           request_.target.data(), static_cast<long long>(group_.config().queue_timeout.count()));
  close_upstream();
  release_slot();
  phase_ = Phase::kDone;
  downstream_.fail(503);
  end();
}

void FastcgiExchange::connect_upstream() {
  phase_ = Phase::kConnecting;
  conn_ = group_.take_idle(server_, *this);
  if (conn_) {
    on_connected();
    return;
  }
  conn_ = group_.open(server_, *this);
  if (!conn_) {
    if (errno == EAGAIN) {
      // php-fpm's listen backlog is full: keep the request waiting (bounded by queue_timeout)
      // instead of failing it, like a queued one.
      if (handler_.env_.clock.monotonic_ms - started_ms_ >= group_.config().queue_timeout.count()) {
        on_queue_timeout();
        return;
      }
      handler_.env_.timers.arm(io_timer_, kBacklogRetryMs, handler_.env_.clock.monotonic_ms);
      return;
    }
    upstream_failed(502, std::strerror(errno), true);
    return;
  }
  arm_io_timer(group_.config().connect_timeout);
  // Writability tells us the connect finished; on_ready() then calls on_connected().
}

void FastcgiExchange::on_connected() {
  phase_ = Phase::kActive;
  arm_io_timer(group_.config().send_timeout);
  write_upstream();
}

void FastcgiExchange::encode_request_head() {
  const Request& r = request_;
  const std::string& root = handler_.root_;
  std::string& out = out_;
  out.reserve(4096);
  // Keep the connection only under a cap (see UpstreamServer::max_conns): otherwise idle
  // connections could hold every php-fpm child while requests of another worker wait for one.
  keep_conn_ = true;
  for (size_t i = 0; i < group_.config().servers.size(); ++i)
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
  params.add("REQUEST_URI", r.target);
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
  params.add("SERVER_PROTOCOL", r.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1");
  for (const Header& h : r.header_list()) {
    // CONTENT_TYPE/LENGTH are passed above; "Proxy" would become HTTP_PROXY, which CGI
    // programs take for their outgoing proxy (httpoxy).
    if (ascii_iequals(h.name, "Content-Type") || ascii_iequals(h.name, "Content-Length") ||
        ascii_iequals(h.name, "Proxy"))
      continue;
    params.add_header(h.name, h.value);
  }
  params.add_encoded(handler_.extra_params_);  // last: a configured value overrides ours
  params.write(out, kRequestId);  // the views above (local, peer, length) are still alive
  append_params_end(out, kRequestId);
  if (!r.has_body()) {
    append_stdin_end(out, kRequestId);
    stdin_done_ = true;
  } else if (r.chunked) {
    append_stdin(out, kRequestId, chunked_body_);
    append_stdin_end(out, kRequestId);
    stdin_done_ = true;
    std::string().swap(chunked_body_);
  }
}

bool FastcgiExchange::on_body(std::string_view bytes, bool last) {
  if (phase_ == Phase::kDone) return false;
  if (phase_ == Phase::kCollecting) {  // chunked request body: collect, then go
    chunked_body_.append(bytes);
    if (!last) return true;
    encode_request_head();
    try_acquire();
    return true;
  }
  if (!replayable_ && out_sent_ == out_.size()) {  // reuse the buffer's start
    out_.clear();
    out_sent_ = 0;
  }
  if (!bytes.empty()) append_stdin(out_, kRequestId, bytes);
  if (last) {
    append_stdin_end(out_, kRequestId);
    stdin_done_ = true;
  }
  if (phase_ == Phase::kActive && !write_upstream()) return false;
  if (out_.size() - out_sent_ > kStdinHighWater) {
    body_paused_ = true;
    return false;
  }
  return true;
}

// Writes what is encoded. Returns false when the exchange failed (and ended).
bool FastcgiExchange::write_upstream() {
  while (out_sent_ < out_.size()) {
    ssize_t n = ::send(conn_->fd(), out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
      sent_any_ = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      conn_->watch_writable(true);
      arm_io_timer(group_.config().send_timeout);
      return true;
    }
    // A pooled connection php-fpm closed meanwhile: retry on a fresh one, not a failure.
    upstream_failed(502, n < 0 ? std::strerror(errno) : "connection closed", true);
    return false;
  }
  conn_->watch_writable(false);
  if (!replayable_ || any_response_byte_ || out_.size() > kReplayLimit) {
    out_.clear();
    out_sent_ = 0;
    replayable_ = false;
  }
  if (stdin_done_) {
    arm_io_timer(group_.config().read_timeout);
    take_follower();
  }
  if (body_paused_) {
    body_paused_ = false;
    downstream_.resume_body();  // may call on_body() (and end us): nothing after this
    return phase_ != Phase::kDone;
  }
  return true;
}

void FastcgiExchange::on_ready(uint32_t readiness) {
  if (phase_ == Phase::kDone || !conn_) return;
  if (readiness & event::kHangup) upstream_hung_up_ = true;
  if (phase_ == Phase::kConnecting) {
    int error = upstream::connect_result(conn_->fd());
    if (error != 0) {
      upstream_failed(502, std::strerror(error), true);
      return;
    }
    if (!(readiness & (event::kOut | event::kIn | event::kHangup))) return;
    on_connected();
    if (phase_ != Phase::kActive) return;
  }
  if (readiness & event::kOut) {
    if (out_sent_ < out_.size() && !write_upstream()) return;
  }
  if (readiness & (event::kIn | event::kHangup)) read_upstream();
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
      // What arrives after a read that emptied the socket raises a new (edge-triggered) event,
      // so reading again would only find EAGAIN; not so for a hang-up seen before the read.
      if (socket_drained_ && !upstream_hung_up_) return;
      ssize_t n = ::recv(conn_->fd(), buffer, kReadChunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n <= 0) {  // EOF or an error before END_REQUEST
        if (!any_response_byte_)
          upstream_failed(502, n < 0 ? std::strerror(errno) : "connection closed before a response",
                          true);
        else
          upstream_failed(502, n < 0 ? std::strerror(errno) : "connection closed mid-response",
                          false);
        return;
      }
      any_response_byte_ = true;
      socket_drained_ = static_cast<size_t>(n) < kReadChunk;  // a stream socket read short
      arm_io_timer(group_.config().read_timeout);
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
      handler_.env_.timers.arm(flush_timer_, kStreamFlushMs, handler_.env_.clock.monotonic_ms);
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
      close_upstream();
      release_slot();
      phase_ = Phase::kDone;
      end();
      return false;
  }
  return true;
}

bool FastcgiExchange::decode_input(std::string_view& input) {
  while (!input.empty()) {
    size_t used = 0;
    Record record;
    Decoder::Status status = decoder_.decode(input, used, record);
    input.remove_prefix(used);
    if (status == Decoder::Status::kNeedMore) return true;
    if (status == Decoder::Status::kError) {
      LOG_ERROR("fastcgi upstream %s (%s): malformed record (%s) for %.*s",
                group_.config().name.c_str(), server().address.c_str(), to_string(decoder_.error()),
                static_cast<int>(request_.target.size()), request_.target.data());
      upstream_failed(502, "malformed record", false);
      return false;
    }
    switch (record.type) {
      case RecordType::kStdout:
        if (record.end_of_stream) break;  // END_REQUEST follows
        if (!handle_stdout(record.data)) return false;
        break;
      case RecordType::kStderr: {
        std::string_view text = record.data;
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
        if (!text.empty())
          LOG_WARN("fastcgi %s stderr for \"%.*s %.*s\": %.*s", server().address.c_str(),
                   static_cast<int>(request_.method_text.size()), request_.method_text.data(),
                   static_cast<int>(request_.target.size()), request_.target.data(),
                   static_cast<int>(text.size()), text.data());
        break;
      }
      case RecordType::kEndRequest:
        if (record.protocol_status != ProtocolStatus::kRequestComplete) {
          const char* why = record.protocol_status == ProtocolStatus::kOverloaded
                                ? "overloaded"
                                : "refused the request";
          upstream_failed(502, why, false);
          return false;
        }
        complete(
            keep_conn_ && decoder_.at_record_boundary() && stdin_done_ && out_sent_ == out_.size(),
            input);
        return false;
      default:
        break;  // GET_VALUES_RESULT / UNKNOWN_TYPE: nothing we asked for
    }
    if (phase_ == Phase::kDone) return false;
    if (client_full_) return false;
  }
  return true;
}

bool FastcgiExchange::handle_stdout(std::string_view data) {
  if (!head_done_) {
    size_t used = 0;
    CgiHeadParser::Status status = head_parser_.feed(data, used);
    if (status == CgiHeadParser::Status::kError) {
      LOG_ERROR("fastcgi upstream %s (%s): bad response head (%s) for %.*s",
                group_.config().name.c_str(), server().address.c_str(),
                to_string(head_parser_.error()), static_cast<int>(request_.target.size()),
                request_.target.data());
      upstream_failed(502, "bad response head", false);
      return false;
    }
    if (status == CgiHeadParser::Status::kNeedMore) return true;
    head_done_ = true;
    Spares<std::string, ResponseBody>::take(body_);
    Spares<std::string, ResponseBody>::take(stage_);
    const CgiHead& head = head_parser_.head();
    response_.set_status(head.status);
    if (head.has_content_type) response_.add_header("Content-Type", head.content_type);
    if (!head.location.empty()) response_.add_header("Location", head.location);
    for (const CgiHeader& h : head.headers) {
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
    data.remove_prefix(used);
    if (unbuffered_) start_streaming();  // the head goes out now, without waiting for a body
  }
  if (data.empty()) return true;
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
    if (!start_streaming()) return false;
  }
  stage_.append(data);
  return true;
}

// The body outgrew the buffer: from now on it streams (no length). The head goes out with the
// first staged bytes, in the same send.
bool FastcgiExchange::start_streaming() {
  streaming_ = true;
  stage_.swap(body_);  // body_ keeps the stage's buffer: both go back to the spares
  return true;
}

void FastcgiExchange::on_writable() {
  if (phase_ != Phase::kActive || !client_full_) return;
  client_full_ = false;
  if (!stage_.empty() && !flush_timer_.armed())  // the flush timer fired while the client was full
    handler_.env_.timers.arm(flush_timer_, kStreamFlushMs, handler_.env_.clock.monotonic_ms);
  read_upstream();
}

// `clean`: the connection is at a request boundary and may carry another request; `rest`: the
// bytes read after END_REQUEST (the follower's response, or junk when there is none).
void FastcgiExchange::complete(bool clean, std::string_view rest) {
  phase_ = Phase::kDone;
  event::TimerList::disarm(io_timer_);
  if (!head_done_) {
    LOG_ERROR("fastcgi upstream %s (%s): the script ended without a response head for %.*s",
              group_.config().name.c_str(), server().address.c_str(),
              static_cast<int>(request_.target.size()), request_.target.data());
    close_upstream();
    release_slot();
    downstream_.fail(502);
    end();
    return;
  }
  group_.report_success(server_);
  if (clean && reuse_conn_ && follower_) {
    // The connection and the slot go on to the follower. It decodes `rest` at once, before
    // anything else may read into the buffer `rest` lies in.
    FastcgiExchange* next = std::exchange(follower_, nullptr);
    next->take_over(*this, !rest.empty());
    conn_ = nullptr;
    has_slot_ = false;
    next->read_upstream(rest, socket_drained_);
  } else if (clean && reuse_conn_ && rest.empty() && !upstream_hung_up_) {
    group_.put_idle(conn_);
    conn_ = nullptr;
  } else {
    close_upstream();
  }
  release_slot();
  if (streaming_) {
    if (send_stage() != handlers::Downstream::Sent::kGone) downstream_.finish();
  } else {
    response_.append_borrowed_body(body_);  // respond() copies it out before we end
    downstream_.respond(response_);
  }
  end();
}

bool FastcgiExchange::can_follow(size_t server) const {
  return phase_ == Phase::kQueued && keep_conn_ && stdin_done_ && out_.size() <= kPipelineMax &&
         (request_.method == Method::kGet || request_.method == Method::kHead) &&
         handler_.options_.pipelining && !tried_.contains(server);
}

// Our request is all sent: if requests wait for a slot, send the first that may follow right
// behind it. Sent in one piece or not at all (a partial send leaves the connection unusable
// after us, and the follower goes back to the queue when we end).
void FastcgiExchange::take_follower() {
  if (follower_ || !keep_conn_ || !reuse_conn_ || !conn_ || phase_ != Phase::kActive ||
      !handler_.options_.pipelining || conn_->uses() + 2 > group_.config().keepalive_requests) {
    list_as_carrier(false);
    return;
  }
  const size_t server = server_;
  upstream::Waiter* waiter = group_.queued() == 0
                                 ? nullptr
                                 : group_.find_waiter(
                                       [server](upstream::Waiter& w) {
                                         auto* e = dynamic_cast<FastcgiExchange*>(&w);
                                         return e && e->can_follow(server);
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
  upstream_hung_up_ = carrier.upstream_hung_up_;
  server_ = carrier.server_;
  has_slot_ = true;
  tried_.insert(server_);
  out_sent_ = out_.size();
  phase_ = Phase::kActive;
  group_.hand_over(conn_, *this);
  if (response_started) any_response_byte_ = true;
  arm_io_timer(group_.config().read_timeout);
  take_follower();
}

// The carrier's connection is gone before our turn: php-fpm never started this request, so it
// waits again, first in line.
void FastcgiExchange::requeue() {
  carrier_ = nullptr;
  sent_any_ = false;
  out_sent_ = 0;
  phase_ = Phase::kQueued;
  try_acquire(true);
}

void FastcgiExchange::upstream_failed(int status, const char* what, bool retryable) {
  const bool stale = conn_ && conn_->reused() && retryable && !any_response_byte_ && replayable_;
  close_upstream();
  if (stale) {  // the pooled connection had gone away: a fresh one, same server, same slot
    out_sent_ = 0;
    connect_upstream();
    return;
  }
  if (has_slot_) group_.report_failure(server_, what);
  LOG_ERROR("fastcgi upstream %s (%s): %s for \"%.*s %.*s\"", group_.config().name.c_str(),
            server().address.c_str(), what, static_cast<int>(request_.method_text.size()),
            request_.method_text.data(), static_cast<int>(request_.target.size()),
            request_.target.data());
  release_slot();
  // Another server: when the request never reached one, or reached it but may safely run twice.
  const bool idempotent = request_.method != Method::kPost && request_.method != Method::kPatch;
  if (retryable && replayable_ && !any_response_byte_ && (!sent_any_ || idempotent) &&
      tried_.count() < group_.config().tries) {
    out_sent_ = 0;
    sent_any_ = false;
    try_acquire();
    return;
  }
  phase_ = Phase::kDone;
  downstream_.fail(status);  // 502/504 page, or a close when part of the response is out
  end();
}

void FastcgiExchange::on_io_timeout() {
  if (phase_ == Phase::kConnecting && !conn_) {  // backlog retry
    connect_upstream();
    return;
  }
  const int64_t timeout = phase_ == Phase::kConnecting ? group_.config().connect_timeout.count()
                          : stdin_done_ && out_sent_ == out_.size()
                              ? group_.config().read_timeout.count()
                              : group_.config().send_timeout.count();
  LOG_ERROR("fastcgi upstream %s (%s): no progress within %lld ms for \"%.*s %.*s\"",
            group_.config().name.c_str(), server().address.c_str(), static_cast<long long>(timeout),
            static_cast<int>(request_.method_text.size()), request_.method_text.data(),
            static_cast<int>(request_.target.size()), request_.target.data());
  group_.report_failure(server_, "timeout");
  close_upstream();
  release_slot();
  phase_ = Phase::kDone;
  downstream_.fail(504);
  end();
}

void FastcgiExchange::arm_io_timer(config::Millis timeout) {
  handler_.env_.timers.arm(io_timer_, timeout.count(), handler_.env_.clock.monotonic_ms);
}

void FastcgiExchange::close_upstream() {
  event::TimerList::disarm(io_timer_);
  if (!conn_) return;
  group_.close(conn_);
  conn_ = nullptr;
  reuse_conn_ = true;
  upstream_hung_up_ = false;
  list_as_carrier(false);
  if (FastcgiExchange* next = std::exchange(follower_, nullptr)) next->requeue();
}

void FastcgiExchange::release_slot() {
  if (!has_slot_) return;
  has_slot_ = false;
  group_.release(server_);  // may start a queued request at once
}

void FastcgiExchange::on_abort() {
  // The client went away: tell php-fpm (FCGI_ABORT_REQUEST, best effort) and drop the
  // connection rather than wait for the script to notice. A follower goes back to the front of
  // the queue: php-fpm's child fails to write our answer and drops the connection without
  // reading the request behind it, so that one never runs twice.
  if (conn_ && phase_ == Phase::kActive) {
    std::string abort;
    append_abort_request(abort, kRequestId);
    ssize_t ignored = ::send(conn_->fd(), abort.data(), abort.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
  }
  group_.cancel(*this);
  close_upstream();
  release_slot();
  phase_ = Phase::kDone;
  end();
}

void FastcgiExchange::end() {
  phase_ = Phase::kDone;
  list_as_carrier(false);
  event::TimerList::disarm(flush_timer_);
  event::TimerList::disarm(queue_timer);
  if (carrier_) {  // our request will still reach php-fpm: nobody may read the connection after
    carrier_->follower_ = nullptr;
    carrier_->reuse_conn_ = false;
    carrier_ = nullptr;
  }
  group_.cancel(*this);
  event::TimerList::disarm(io_timer_);
  event::dispose_later(this);
}

// ---------------------------------------------------------------------------------------------

FastcgiHandler::FastcgiHandler(const config::Route& route, const config::Site& site,
                               upstream::GroupRuntime& group, const static_files::MimeTable& mime,
                               const handlers::WorkerEnv& env)
    : route_(route), options_(route.fastcgi), site_(site), group_(group), env_(env) {
  root_ = options_.root.empty() ? site.static_files.root : options_.root;
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  root_fd_ = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  read_buffer_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
  default_split_ =
      options_.split_path && options_.split_path->pattern() == config::kDefaultSplitPath;
  // Parameters that never change, encoded once (PARAMS is a byte stream of pairs).
  append_name_value(fixed_params_, "DOCUMENT_ROOT", root_);
  append_name_value(fixed_params_, "REQUEST_SCHEME", "http");
  append_name_value(fixed_params_, "SERVER_SOFTWARE", "peregrine");
  append_name_value(fixed_params_, "GATEWAY_INTERFACE", "CGI/1.1");
  append_name_value(fixed_params_, "REDIRECT_STATUS", "200");
  for (const auto& [key, value] : options_.params) append_name_value(extra_params_, key, value);
  config::StaticOptions files = route.static_files;
  files.root = root_;
  files.index.clear();
  for (const std::string& name : options_.index)
    if (!is_script("/" + name)) files.index.push_back(name);
  files_ = std::make_unique<static_files::StaticHandler>(files, std::string(), mime, env.clock);
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
