#include "server/http2_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "compress/compress.h"
#include "core/address_text.h"
#include "core/log.h"
#include "core/spares.h"
#include "event/deferred.h"
#include "handlers/stream_handler.h"
#include "http/request_id.h"
#include "http/status.h"
#include "http2/headers.h"
#include "metrics/metrics.h"
#include "server/route_table.h"
#include "server/worker.h"

namespace peregrine::server {

using handlers::Downstream;
using handlers::Exchange;
using http2::session::ErrorCode;

namespace {

constexpr size_t kBatchBytes = 64 * 1024;  // frames gathered before one write
constexpr size_t kHighWater = 64 * 1024;   // a streamed body's queued bytes before kFull
constexpr size_t kLowWater = 16 * 1024;    // ...and before on_writable()
constexpr size_t kSpareStreams = 2048;     // stream objects kept for reuse, per thread

}  // namespace

// One request/response exchange on a connection. Objects (and their buffers) are reused per
// thread: a stream costs no allocation once warm.
class Http2Stream final : public Downstream, public event::TimerOwner {
 public:
  // A rate limit's delay mode: the stream waits on `delay_timer`, its DATA held unconsumed.
  void on_timeout() override {
    if (conn && delayed) conn->resume_delayed(*this);
  }
  event::TimerNode delay_timer;
  bool delayed = false;

  // ---- Downstream ----
  void resume_body() override;
  void respond(Response& response) override;
  bool send_head(Response& head, int64_t content_length) override;
  Sent send_body(std::string_view bytes) override;
  Sent hold_if_queued() override;
  void finish() override;
  void fail(int status) override;
  bool head_sent() const override { return head_sent_; }

  void reset(Http2Connection* connection, int32_t stream_id);
  size_t queued() const { return queued_; }
  // The session's data source: appends at most `max` body bytes to `out` (the batch buffer).
  void read_body(std::string& out, size_t max, bool& last);
  void append_body(std::string_view bytes);
  // The body a Response carries (bytes copied, file regions read later with pread).
  void append_response_body(const Response& response);
  void log(uint64_t bytes);

  Http2Connection* conn = nullptr;  // null once the stream is closed
  int32_t id = 0;
  int64_t started_us = 0;  // metrics: when the stream opened (the worker's loop clock)
  uint32_t slot = 0;       // in the connection's streams_
  // What Http2Connection::update_timer reads of every stream after each event sits together: a
  // stream is about 4 KB, and the scan then misses one cache line per stream, not two.
  bool handling = false;      // routed: a handler runs or waits for the body
  bool request_done = false;  // END_STREAM received
  bool answered = false;      // a response (head) was submitted
  bool body_paused = false;
  bool deferred = false;  // the data source said "later": resume on more bytes

  http2::RequestHeadBuilder head;
  Request request;
  Ref<RouteTable> routes;  // keeps the site, route and handler alive across a reload
  Selection selection;
  PeerAddress forwarded{};        // the client a trusted proxy's header named
  char request_id[32];            // [request_id]: the one made for this stream
  int64_t started_ms = 0;         // the head's arrival, for $request_time
  compress::StreamSlot compress;  // the exchange's Downstream when the route compresses
  bool keep_body = false;
  bool body_refused = false;  // 413 sent: further DATA is dropped
  bool server_reset = false;  // we reset it for the back end's failure, not the client's error
  std::string body;           // for a handler that wants it
  uint64_t body_received = 0;

  Exchange* exchange = nullptr;
  bool exchange_ended = false;  // respond(), finish() or fail() was called
  bool held_last = false;
  std::string held;  // DATA that arrived while paused; its window opens once delivered

  bool head_sent_ = false;
  bool body_allowed = true;
  bool out_done = false;     // nothing more will be queued: EOF once drained
  bool read_failed = false;  // a body file could not be read: the stream is reset
  bool notify_writable = false;
  bool logged = false;
  bool completed = false;  // END_STREAM queued (counted in the connection's completed_)
  int status = 0;
  uint64_t body_bytes_sent = 0;
  char status_text[4] = {};

 private:
  struct Part {
    Ref<BodyFile> file;  // null: bytes of out_ from `offset`
    off_t offset = 0;
    size_t length = 0;
  };
  std::string out_;
  std::vector<Part> parts_;
  size_t part_at_ = 0;
  size_t queued_ = 0;

  friend class Http2Connection;
};

namespace {

// Streams end inside the session's events, sometimes while an exchange that just answered is still
// on the stack: they are reused only after the current batch of events.
struct StreamSpares {
  std::vector<Http2Stream*> spare;
  std::vector<Http2Stream*> retiring;
  ~StreamSpares() {
    for (Http2Stream* s : spare) delete s;
    for (Http2Stream* s : retiring) delete s;
  }
};
thread_local StreamSpares stream_spares;

struct Sweeper final : event::Disposable {
  ~Sweeper() override {
    for (Http2Stream* s : stream_spares.retiring) {
      s->routes = nullptr;
      s->request.body = {};
      s->exchange = nullptr;
      // Enough for the streams a batch of events retires under load (100 connections x 10
      // streams is 1,000 at once); a buffer that grew large is not kept.
      if (kRecycleAllocations && stream_spares.spare.size() < kSpareStreams) {
        if (s->body.capacity() > kHighWater) std::string().swap(s->body);
        if (s->held.capacity() > kHighWater) std::string().swap(s->held);
        stream_spares.spare.push_back(s);
      } else {
        delete s;
      }
    }
    stream_spares.retiring.clear();
  }
};

thread_local std::string batch_buffer;
thread_local http2::ResponseFields response_fields;
// A head filtered through a route's header rules, before it becomes fields.
thread_local std::string edited_head;
thread_local std::vector<http2::session::Session::Header> field_scratch;
thread_local std::string held_scratch;
// What a response head is made of, each part length first so parts cannot run into each other:
// equal keys make equal fields (Session::remembers_response).
thread_local std::string head_key;

bool head_taken(bool taken) {
  if (!taken) LOG_INFO("HTTP/2: cannot send a response: the stream is gone");
  return taken;
}

void make_key(std::string& key, std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view part : parts) size += sizeof(uint32_t) + part.size();
  key.resize(size);
  char* out = key.data();
  for (std::string_view part : parts) {
    const auto part_size = static_cast<uint32_t>(part.size());
    std::memcpy(out, &part_size, sizeof part_size);
    // An empty view's data() may be null, which memcpy must not be given.
    if (!part.empty()) std::memcpy(out + sizeof part_size, part.data(), part.size());
    out += sizeof part_size + part.size();
  }
}

}  // namespace

void Http2Stream::reset(Http2Connection* connection, int32_t stream_id) {
  conn = connection;
  id = stream_id;
  delay_timer.owner = this;
  delayed = false;
  head.reset();
  request.clear();
  routes = nullptr;
  selection = Selection{};
  handling = request_done = answered = keep_body = body_refused = server_reset = false;
  body.clear();
  body_received = 0;
  exchange = nullptr;
  exchange_ended = false;
  body_paused = held_last = false;
  held.clear();
  head_sent_ = false;
  body_allowed = true;
  out_done = deferred = read_failed = notify_writable = logged = completed = false;
  status = 0;
  body_bytes_sent = 0;
  out_.clear();
  parts_.clear();
  part_at_ = 0;
  queued_ = 0;
}

void Http2Stream::append_body(std::string_view bytes) {
  if (bytes.empty()) return;
  if (!parts_.empty() && !parts_.back().file &&
      static_cast<size_t>(parts_.back().offset) + parts_.back().length == out_.size()) {
    parts_.back().length += bytes.size();
  } else {
    parts_.push_back({nullptr, static_cast<off_t>(out_.size()), bytes.size()});
  }
  out_.append(bytes);
  queued_ += bytes.size();
}

void Http2Stream::append_response_body(const Response& response) {
  for (const Response::Segment& seg : response.segments()) {
    switch (seg.kind) {
      case Response::Segment::Kind::kOwned:
        append_body(response.owned_bytes(seg));
        break;
      case Response::Segment::Kind::kBorrowed:
        append_body({seg.data, seg.length});
        break;
      case Response::Segment::Kind::kFile:
        parts_.push_back({seg.file, seg.file_offset, seg.length});
        queued_ += seg.length;
        break;
    }
  }
}

void Http2Stream::read_body(std::string& out, size_t max, bool& last) {
  size_t n = 0;
  while (n < max && part_at_ < parts_.size()) {
    Part& p = parts_[part_at_];
    size_t take = std::min(max - n, p.length);
    if (!p.file) {
      out.append(out_, static_cast<size_t>(p.offset), take);
    } else {
      const size_t at = out.size();
      out.resize(at + take);
      ssize_t got = ::pread(p.file->fd(), out.data() + at, take, p.offset);
      if (got <= 0) {
        LOG_ERROR("HTTP/2: reading a response body file failed: %s",
                  got < 0 ? std::strerror(errno) : "file shrank");
        out.resize(at - n);  // nothing of this frame: the stream is reset after the batch
        read_failed = true;
        if (conn) conn->read_failed_ = true;
        return;
      }
      take = static_cast<size_t>(got);
      out.resize(at + take);
    }
    p.offset += static_cast<off_t>(take);
    p.length -= take;
    n += take;
    if (p.length == 0) {
      p.file = nullptr;
      ++part_at_;
    }
  }
  queued_ -= n;
  body_bytes_sent += n;
  if (part_at_ == parts_.size()) {
    parts_.clear();
    out_.clear();
    part_at_ = 0;
    if (out_done) {
      last = true;
    } else if (n == 0) {
      deferred = true;  // nothing appended: the session waits for resume_data()
    }
  } else if (part_at_ > 0 && out_.size() > 2 * kHighWater && !parts_[part_at_].file) {
    // A long streamed body: drop what has been sent rather than let out_ grow.
    size_t cut = static_cast<size_t>(parts_[part_at_].offset);
    out_.erase(0, cut);
    parts_.erase(parts_.begin(), parts_.begin() + static_cast<ptrdiff_t>(part_at_));
    part_at_ = 0;
    for (Part& p : parts_)
      if (!p.file) p.offset -= static_cast<off_t>(cut);
  }
  if (notify_writable && queued_ < kLowWater && conn) conn->writable_waiting_ = true;
}

void Http2Stream::log(uint64_t bytes) {
  if (logged) return;
  logged = true;
  if (conn) {  // metrics: one count per request, where its access-log line is made
    SiteRuntime* counted =
        selection.site ? selection.site : (routes ? &routes->default_site() : nullptr);
    const int64_t took = conn->worker_.clock().monotonic_us - started_us;
    metrics::local().count_request(
        selection.route ? selection.route->counters : (counted ? counted->counters : nullptr),
        metrics::Protocol::kHttp2, conn->tls_ != nullptr, status, bytes,
        took > 0 ? static_cast<uint64_t>(took) : 0);
  }
  SiteRuntime* site = selection.site;
  if (!site || !site->access_log || !conn) return;
  const tls::Stream* tls = conn->tls_.get();
  if (site->access_log->custom()) {
    LogContext context;
    context.bytes_sent = bytes;  // HPACK-compressed head sizes are not tracked per stream
    context.request_length = static_cast<uint64_t>(std::max<int64_t>(request.content_length, 0));
    context.request_time_ms = conn->worker_.clock().monotonic_ms - started_ms;
    if (tls) {
      context.tls_version = tls->version();
      context.tls_cipher = tls->cipher();
    }
    context.connection = conn->serial_;
    // This response counts once: a head alone is counted (on_response_complete) before its log.
    context.connection_requests = static_cast<uint32_t>(conn->completed_ + (completed ? 0 : 1));
    site->access_log->log_custom(request, status, bytes, conn->worker_.clock().wall_seconds,
                                 context);
    return;
  }
  if (tls && routes && routes->config().tls.log_tls) {
    site->access_log->log(request, status, bytes, conn->worker_.clock().wall_seconds,
                          tls->version(), tls->cipher());
    return;
  }
  site->access_log->log(request, status, bytes, conn->worker_.clock().wall_seconds);
}

// ---- The session's events ---------------------------------------------------------------------

struct Http2Callbacks final : http2::session::Events {
  explicit Http2Callbacks(Http2Connection& connection) : c(connection) {}
  Http2Connection& c;

  static Http2Stream* stream(http2::session::Stream& st) {
    return static_cast<Http2Stream*>(st.user);
  }

  void on_stream_begin(http2::session::Stream& st) override {
    if (c.draining_) {
      // RFC 9113 5.1.2: a stream error the client may retry. The stream limit is the session's.
      c.session_->submit_rst_stream(st.id, ErrorCode::kRefusedStream, true);
      return;
    }
    st.user = c.open_stream(st.id);
    if (++c.streams_begun_ >= c.worker_.limits().max_requests_per_connection) {
      // As for HTTP/1 keep-alive: the connection ends after this many requests. The GOAWAY
      // names this stream as the last one served, so the client retries later ones elsewhere.
      c.draining_ = true;
      c.session_->submit_goaway(ErrorCode::kNoError, st.id);
    }
  }

  bool on_field(http2::session::Stream& st, std::string_view name, std::string_view value,
                bool trailers) override {
    Http2Stream* s = stream(st);
    if (!s || trailers) return true;  // trailers: ignored
    // False: malformed, the session resets the stream (PROTOCOL_ERROR).
    return s->head.add(name, value);
  }

  void on_headers(http2::session::Stream& st, bool end_stream, bool trailers) override {
    Http2Stream* s = stream(st);
    if (!s) return;
    if (end_stream) s->request_done = true;
    if (!trailers) {
      c.on_request_head(*s, end_stream);
    } else if (end_stream) {
      c.on_request_end(*s);
    }
  }

  void on_data(http2::session::Stream& st, std::string_view bytes, bool end_stream) override {
    Http2Stream* s = stream(st);
    if (!s) {
      c.consume(st.id, bytes.size());
      return;
    }
    if (!bytes.empty()) c.on_data(*s, bytes);
    if (end_stream && (s = stream(st))) {
      s->request_done = true;
      c.on_request_end(*s);
    }
  }

  void on_stream_close(http2::session::Stream& st, ErrorCode) override {
    Http2Stream* s = stream(st);
    if (!s) return;
    st.user = nullptr;
    if (Exchange* exchange = s->exchange) {
      s->exchange = nullptr;
      exchange->on_abort();
    }
    c.retire(*s);
  }

  void on_response_complete(http2::session::Stream& st) override {
    ++c.completed_;
    if (Http2Stream* s = stream(st)) s->completed = true;
  }

  void read_body(http2::session::Stream& st, std::string& out, size_t max, bool& last) override {
    if (Http2Stream* s = stream(st)) s->read_body(out, max, last);
  }

  void on_malformed(http2::session::Stream&, const char* why) override {
    if (!log::enabled(LogLevel::kInfo)) return;
    AddressText from(&c.peer_.sa);
    LOG_INFO(
        "HTTP/2: client sent a malformed request (stream reset, PROTOCOL_ERROR): %s, "
        "client: %.*s",
        why, static_cast<int>(from.ip_length), from.ip);
  }

  // Every connection error: the session queued its GOAWAY; the connection lingers once it is out.
  void on_connection_error(ErrorCode, const char* why) override {
    if (c.calmed_) return;
    c.calmed_ = true;
    c.draining_ = true;
    LOG_INFO("HTTP/2: closing a connection: %s", why);
  }
};

// ---- The connection
// ------------------------------------------------------------------------------

Http2Connection::Http2Connection(Worker& worker, int fd, const sockaddr* peer, socklen_t peer_len,
                                 const ListenerOptions& listener, std::unique_ptr<tls::Stream> tls)
    : worker_(worker), listener_(listener), fd_(fd), tls_(std::move(tls)) {
  timer.owner = this;
  peer_len_ = std::min<socklen_t>(peer_len, sizeof peer_);
  std::memcpy(&peer_, peer, peer_len_);
  thread_local uint64_t connections_made = 0;  // a worker's serial (one worker per thread)
  serial_ = ++connections_made;
}

void Http2Connection::set_socket_peer(const sockaddr* address, socklen_t length) {
  socket_peer_len_ = std::min<socklen_t>(length, sizeof socket_peer_);
  std::memcpy(&socket_peer_, address, socket_peer_len_);
}

Http2Connection::~Http2Connection() = default;

ssize_t Http2Connection::read_some(char* buffer, size_t size) {
  ssize_t n = tls_ ? tls_->read(buffer, size) : ::recv(fd_, buffer, size, 0);
  if (n > 0) metrics::local().bytes_received[1].add(static_cast<uint64_t>(n));
  return n;
}

ssize_t Http2Connection::write_some(const char* data, size_t size) {
  ssize_t n = tls_ ? tls_->write(data, size) : ::send(fd_, data, size, MSG_NOSIGNAL);
  if (n > 0) metrics::local().bytes_sent[1].add(static_cast<uint64_t>(n));
  return n;
}

void Http2Connection::start(std::string_view already_read) {
  in_event_ = true;
  const config::Limits& limits = worker_.limits();
  http2::session::Options options;
  options.max_concurrent_streams = Http2Limits::kMaxConcurrentStreams;
  options.stream_window = Http2Limits::kStreamWindow;
  options.connection_window = Http2Limits::kConnectionWindow;
  options.max_header_list_size = static_cast<uint32_t>(limits.max_header_bytes);
  options.header_abuse_factor = Http2Limits::kHeaderAbuseFactor;
  options.reset_budget = Http2Limits::kResetBudget;
  options.error_budget = Http2Limits::kErrorBudget;
  // Our SETTINGS and the connection's WINDOW_UPDATE are the session's first output.
  events_ = std::make_unique<Http2Callbacks>(*this);
  session_ = std::make_unique<http2::session::Session>(*events_, options);
  if (!already_read.empty() && !feed(already_read.data(), already_read.size())) {
    in_event_ = false;
    close_now();
    return;
  }
  if (!closed_ && !worker_.poller().add(
                      fd_, event::kReadable | event::kWritable | event::kEdgeTriggered, this)) {
    in_event_ = false;
    close_now();
    return;
  }
  if (!closed_) on_readable();  // what came after the bytes the caller read
  in_event_ = false;
  settle();
}

bool Http2Connection::feed(const char* data, size_t size) {
  progress_ = true;
  // False: a connection error, logged by on_connection_error; its GOAWAY goes out, the rest of
  // the input is dropped.
  if (!session_->receive({data, size})) linger();
  return true;
}

void Http2Connection::on_ready(uint32_t readiness) {
  if (closed_) return;
  in_event_ = true;
  if (readiness & event::kHangup) hangup_seen_ = true;
  if ((readiness & event::kOut) && pending_at_ < pending_.size()) {
    if (!write_pending()) {
      in_event_ = false;
      close_now();
      return;
    }
  }
  if ((readiness & (event::kIn | event::kHangup)) ||
      (read_blocked_ && pending_at_ == pending_.size())) {
    read_blocked_ = false;
    on_readable();
  }
  in_event_ = false;
  settle();
}

void Http2Connection::on_readable() {
  BufferPool& pool = worker_.buffers();
  const size_t capacity = pool.buffer_size();
  char* buffer = nullptr;
  bool ok = true;
  while (!closed_) {
    if (pending_at_ < pending_.size()) {
      read_blocked_ = true;  // back-pressure: nothing more until the client reads
      break;
    }
    if (!buffer) buffer = pool.acquire();
    ssize_t n = read_some(buffer, capacity);
    if (n > 0) {
      if (lingering_) continue;  // after our GOAWAY: read and drop, so the close is no reset
      if (!feed(buffer, static_cast<size_t>(n))) {
        ok = false;
        break;
      }
      // A short plain read means the socket is drained (edge-triggered); a short TLS read does
      // not (records may wait in the kernel or inside OpenSSL): the stream says when it is.
      if (!hangup_seen_ && (tls_ ? tls_->drained() : static_cast<size_t>(n) < capacity)) break;
      continue;
    }
    if (n == 0) {
      peer_closed_ = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) peer_closed_ = true;
    break;
  }
  // The session copies what it keeps: an idle connection holds no read buffer.
  if (buffer) pool.release(buffer);
  if (!ok || peer_closed_) {
    in_event_ = false;
    close_now();
  }
}

// Everything the session has to send, gathered into one buffer and written at once.
void Http2Connection::send_frames() {
  if (closed_ || !session_) return;
  if (lingering_) {  // only what the socket refused of the GOAWAY is left to write
    if (pending_at_ < pending_.size() && !write_pending()) close_now();
    return;
  }
  if (sending_) {
    send_again_ = true;
    return;
  }
  sending_ = true;
  do {
    send_again_ = false;
    if (pending_at_ < pending_.size()) {
      if (!write_pending()) break;
      if (pending_at_ < pending_.size()) break;
    }
    std::string& out = batch_buffer;
    for (;;) {
      out.clear();
      session_->produce(out, kBatchBytes);
      if (read_failed_) reset_failed_streams();  // their RST_STREAMs go in the next batch
      if (out.empty()) break;
      size_t at = 0;
      while (at < out.size()) {
        ssize_t n = write_some(out.data() + at, out.size() - at);
        if (n > 0) {
          at += static_cast<size_t>(n);
          progress_ = true;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        out.clear();
        sending_ = false;
        peer_closed_ = true;
        close_now();
        return;
      }
      if (at < out.size()) {
        pending_.assign(out, at);
        pending_at_ = 0;
        out.clear();
        break;
      }
      out.clear();
    }
    if (writable_waiting_ && pending_at_ == pending_.size()) notify_writable_streams();
  } while (send_again_ && !closed_);
  sending_ = false;
}

bool Http2Connection::write_pending() {
  while (pending_at_ < pending_.size()) {
    ssize_t n = write_some(pending_.data() + pending_at_, pending_.size() - pending_at_);
    if (n > 0) {
      pending_at_ += static_cast<size_t>(n);
      progress_ = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    peer_closed_ = true;
    return false;
  }
  pending_.clear();
  if (pending_.capacity() > kBatchBytes) pending_.shrink_to_fit();
  pending_at_ = 0;
  return true;
}

// Streams that said kFull and whose queue has drained hear about it.
void Http2Connection::notify_writable_streams() {
  writable_waiting_ = false;
  // A copy: a stream told it may write can end, and a retired stream stays allocated until the
  // batch is over, so `conn` says whether it is still ours.
  const std::vector<Http2Stream*> streams = streams_;
  for (Http2Stream* s : streams) {
    if (closed_) return;
    if (s->conn == this && s->notify_writable && s->queued() < kLowWater && s->exchange) {
      s->notify_writable = false;
      s->exchange->on_writable();
    }
  }
}

// A stream whose body file failed to read (read_body) is reset: the session must not be called
// from inside produce(), so it happens here.
void Http2Connection::reset_failed_streams() {
  read_failed_ = false;
  const std::vector<Http2Stream*> streams = streams_;  // a reset may end a stream
  for (Http2Stream* s : streams) {
    if (s->conn != this || !s->read_failed) continue;
    s->read_failed = false;
    s->server_reset = true;
    session_->submit_rst_stream(s->id, ErrorCode::kInternalError);
  }
}

// The end of every event: send, then close if the session is over, else arm the right timer.
void Http2Connection::settle() {
  if (closed_) return;
  send_frames();
  if (closed_) return;
  const bool output_left = pending_at_ < pending_.size();
  if (lingering_) {
    if (!output_left && !shut_) {
      shut_ = true;
      if (tls_) tls_->shutdown();  // close_notify before our FIN
      ::shutdown(fd_, SHUT_WR);
    }
    if (timer.list != &worker_.linger_timers && timer.list != &worker_.send_timers)
      (output_left ? worker_.send_timers : worker_.linger_timers)
          .arm(timer, worker_.clock().monotonic_ms);
    return;
  }
  if (calmed_ && !output_left && !session_->want_write()) {
    linger();
    settle();
    return;
  }
  // GOAWAY sent (ours or the client's) and no stream left.
  if ((draining_ || session_->goaway_received()) && streams_.empty() && !output_left &&
      !session_->want_write()) {
    // Handing over, the client is busy: frames it sends meanwhile (WINDOW_UPDATE, its own
    // GOAWAY) would make a close a reset, which can cost it the responses not yet read.
    if (worker_.handing_over() && !peer_closed_) {
      linger();
      settle();
      return;
    }
    close_now();
    return;
  }
  update_timer();
}

void Http2Connection::after_stream_call() {
  if (!in_event_) settle();
}

void Http2Connection::update_timer() {
  const int64_t now = worker_.clock().monotonic_ms;
  const bool moved = progress_;
  progress_ = false;
  event::TimerList* list = nullptr;
  bool output_waiting = pending_at_ < pending_.size();
  bool body_waiting = false;
  for (const Http2Stream* s : streams_) {
    if (s->answered && s->queued() > 0 && !s->deferred) output_waiting = true;
    if (s->handling && !s->request_done && !s->body_paused) body_waiting = true;
  }
  if (output_waiting) {
    list = &worker_.send_timers;  // a zero window or a full socket: the client must read
  } else if (!session_->settings_acked()) {
    list = &worker_.header_timers;
  } else if (streams_.empty()) {
    list = &worker_.keepalive_timers;
  } else if (body_waiting) {
    list = &worker_.body_timers;
  }
  if (!list) {
    event::TimerList::disarm(timer);
    return;
  }
  if (timer.list != list || moved) list->arm(timer, now);
}

void Http2Connection::on_timeout() {
  if (closed_) return;
  if (lingering_) {
    close_now();
    return;
  }
  ErrorCode code = ErrorCode::kNoError;
  AddressText from(&peer_.sa);
  if (!session_->settings_acked()) {
    LOG_INFO(
        "HTTP/2: closing a connection: the client never acknowledged our SETTINGS, client: %.*s",
        static_cast<int>(from.ip_length), from.ip);
    code = ErrorCode::kSettingsTimeout;
  } else if (!streams_.empty()) {
    LOG_INFO("HTTP/2: closing a connection: the client was too slow to read or send, client: %.*s",
             static_cast<int>(from.ip_length), from.ip);
  }
  session_->submit_goaway(code);
  in_event_ = true;
  send_frames();
  in_event_ = false;
  close_now();
}

void Http2Connection::drain(bool notice) {
  if (closed_ || draining_ || (notice && noticed_)) return;
  if (notice) {
    noticed_ = true;
    session_->submit_goaway(ErrorCode::kNoError, 0x7fffffff);  // RFC 9113 6.8
  } else {
    draining_ = true;
    session_->submit_goaway(ErrorCode::kNoError);
  }
  // From a stream's head (a per-address limit) this runs inside Session::receive(): the event's
  // own settle() sends the GOAWAY once receive() has returned.
  if (!in_event_) settle();
}

// After a GOAWAY for abuse the client is likely still sending: closing at once would reset the
// connection and could destroy the GOAWAY before it is read. Drop its input for a while instead.
void Http2Connection::linger() {
  if (lingering_) return;
  send_frames();  // the GOAWAY; from now on the session is not called any more
  if (closed_) return;
  lingering_ = true;
  event::TimerList::disarm(timer);
  detach_streams();
}

// Every stream ends here without the session's on_stream_close (it will not be called again).
void Http2Connection::detach_streams() {
  while (!streams_.empty()) {
    Http2Stream* s = streams_.back();
    if (session_)
      if (http2::session::Stream* st = session_->find(s->id)) st->user = nullptr;
    if (Exchange* exchange = s->exchange) {
      s->exchange = nullptr;
      exchange->on_abort();
    }
    retire(*s);
  }
}

void Http2Connection::close_now() {
  if (closed_) return;
  closed_ = true;
  detach_streams();
  event::TimerList::disarm(timer);
  if (tls_) tls_->shutdown();  // close_notify once, best effort
  worker_.poller().close(fd_);
  tls_.reset();
  pending_.clear();
  pending_.shrink_to_fit();
  worker_.close_http2(this);
}

const sockaddr* Http2Connection::local_address() {
  if (local_len_ == 0) {
    local_len_ = sizeof local_;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&local_), &local_len_) != 0) local_len_ = 0;
  }
  return local_len_ ? reinterpret_cast<const sockaddr*>(&local_) : nullptr;
}

// ---- Streams
// -------------------------------------------------------------------------------------

Http2Stream* Http2Connection::open_stream(int32_t id) {
  Http2Stream* s;
  if (!stream_spares.spare.empty()) {
    s = stream_spares.spare.back();
    stream_spares.spare.pop_back();
  } else {
    s = new Http2Stream;
  }
  s->reset(this, id);
  s->head.set_max_list_bytes(worker_.limits().max_header_bytes);
  s->started_us = worker_.clock().monotonic_us;  // metrics
  metrics::local().http2_streams.add();
  s->slot = static_cast<uint32_t>(streams_.size());
  streams_.push_back(s);
  return s;
}

void Http2Connection::retire(Http2Stream& s) {
  event::TimerList::disarm(s.delay_timer);
  s.delayed = false;
  Http2Stream* last = streams_.back();
  streams_[s.slot] = last;
  last->slot = s.slot;
  streams_.pop_back();
  s.conn = nullptr;
  if (stream_spares.retiring.empty()) event::dispose_later(new Sweeper);
  stream_spares.retiring.push_back(&s);
}

void Http2Connection::consume(int32_t stream_id, size_t bytes) {
  if (bytes == 0 || closed_) return;
  session_->consume(stream_id, bytes);
}

void Http2Connection::on_request_head(Http2Stream& s, bool end_stream) {
  const int error = s.head.finish(s.request, end_stream);
  s.request.peer = &peer_.sa;
  s.request.peer_len = peer_len_;
  s.request.socket_peer = socket_peer_len_ ? &socket_peer_.sa : &peer_.sa;
  s.request.socket_peer_len = socket_peer_len_ ? socket_peer_len_ : peer_len_;
  s.request.secure = tls_ != nullptr;  // HTTPS=on, X-Forwarded-Proto, HSTS
  s.request.tls = tls_.get();
  s.started_ms = worker_.clock().monotonic_ms;
  s.routes = worker_.routes_ref();
  // Before select(): allow/deny and limits run inside it and must see the real client.
  if (const auto& policy = s.routes->config().client_address; !policy.trusted_proxies.empty())
    use_forwarded_client(s.request, policy, &s.forwarded);
  if (const auto& ids = s.routes->config().request_id; ids.enabled && !error)
    http::assign_request_id(s.request, ids.header, ids.trust_incoming, s.request_id);
  if (error) {
    if (s.request.method_text.empty()) s.request.method_text = "-";
    if (s.request.target.empty()) s.request.target = "-";
    if (log::enabled(LogLevel::kInfo)) {
      AddressText from(&peer_.sa);
      LOG_INFO("HTTP/2: client sent a bad request (%d), client: %.*s", error,
               static_cast<int>(from.ip_length), from.ip);
    }
    if (error == 400) {  // counted as a provoked reset when the RST_STREAM leaves
      s.handling = false;
      session_->submit_rst_stream(s.id, ErrorCode::kProtocolError, true);
      return;
    }
    s.selection.site = &s.routes->site_for(s.request.host);
    respond_status(s, error);
    return;
  }
  s.selection = s.routes->select(s.request);
  if (!first_stream_seen_) {  // per-address connection limits count by the first request
    first_stream_seen_ = true;
    if (s.selection.access) {
      if (int status =
              access::count_connection(*s.selection.access, s.request,
                                       worker_.clock().monotonic_ms * int64_t{1000}, &counted_)) {
        respond_status(s, status);
        drain();
        return;
      }
    }
  }
  if (!s.selection.route && s.selection.refused()) {
    respond_status(s, s.selection.status);
    return;
  }
  if (s.selection.delay_ms > 0) {
    s.delayed = true;
    worker_.upstream_timers.arm(s.delay_timer, access::timer_duration_ms(s.selection.delay_ms),
                                worker_.clock().monotonic_ms);
    return;
  }
  start_handling(s);
}

// Once the wait is over the stream goes on as if its head had just arrived; the DATA that came
// meanwhile goes to the handler's buffer or the exchange, and only then is its window opened.
void Http2Connection::resume_delayed(Http2Stream& s) {
  s.delayed = false;
  if (s.answered) return;
  const bool was_in_event = in_event_;
  in_event_ = true;
  const bool streamed = s.selection.route && s.selection.route->stream;
  if (!streamed) {
    if (s.selection.route && s.selection.route->handler->wants_body()) s.body.append(s.held);
    consume(s.id, s.held.size());
    s.held.clear();
    s.held_last = false;
  }
  start_handling(s);
  if (streamed && s.conn && s.exchange && s.request.has_body() && (!s.held.empty() || s.held_last))
    deliver(s, {}, false);
  in_event_ = was_in_event;
  if (!in_event_) settle();
}

void Http2Connection::start_handling(Http2Stream& s) {
  s.handling = true;
  if (s.selection.route && s.selection.route->stream) {
    s.request.local = local_address();
    s.request.local_len = local_len_;
    Exchange* exchange = s.selection.route->stream->start(
        s.request, s.compress.wrap(s, s.request, s.selection.route->config->compress));
    // start() may have ended the exchange at once (respond/fail), or the stream may be gone.
    if (s.conn && !s.exchange_ended) s.exchange = exchange;
    return;
  }
  s.keep_body = s.selection.route && s.selection.route->handler->wants_body();
  if (!s.request.has_body() || s.request_done) answer(s);
}

void Http2Connection::on_request_end(Http2Stream& s) {
  if (s.delayed) {
    s.held_last = true;
    return;
  }
  if (s.exchange) {
    if (!s.request.has_body()) return;  // an exchange hears of a body only when there is one
    if (s.body_paused || !s.held.empty()) {
      s.held_last = true;
      return;
    }
    deliver(s, {}, true);
    return;
  }
  if (s.handling && !s.answered && !s.body_refused) answer(s);
}

void Http2Connection::on_data(Http2Stream& s, std::string_view bytes) {
  const size_t size = bytes.size();
  s.body_received += size;
  if (s.body_refused || (!s.handling && !s.delayed)) {
    consume(s.id, size);
    return;
  }
  if (s.body_received > worker_.limits().max_body_bytes) {
    s.body_refused = true;
    consume(s.id, size);
    if (s.delayed) {  // its wait ends with the 413
      event::TimerList::disarm(s.delay_timer);
      s.delayed = false;
      consume(s.id, s.held.size());
      s.held.clear();
    }
    if (Exchange* exchange = s.exchange) {
      s.exchange = nullptr;
      exchange->on_abort();
    }
    if (!s.answered) {
      respond_status(s, 413);
    } else {  // the answer has begun: only the reset is left
      s.log(s.body_bytes_sent);
      session_->submit_rst_stream(s.id, ErrorCode::kCancel, true);
    }
    return;
  }
  if (s.delayed) {
    s.held.append(bytes);  // its window stays closed until the wait is over
    return;
  }
  if (s.exchange) {
    if (s.body_paused || !s.held.empty()) {
      s.held.append(bytes);  // its window stays closed until the exchange takes it
      return;
    }
    deliver(s, bytes, false);
    return;
  }
  if (s.keep_body && !s.answered) s.body.append(bytes);
  consume(s.id, size);
}

// Hands body bytes (plus whatever was held) to the exchange; their window opens as it takes them.
void Http2Connection::deliver(Http2Stream& s, std::string_view bytes, bool last) {
  Exchange* exchange = s.exchange;
  if (!exchange) return;
  std::string& held = held_scratch;
  held.clear();
  if (!s.held.empty()) {
    held.swap(s.held);
    held.append(bytes);
    bytes = held;
  }
  if (s.held_last) last = true;
  s.held_last = false;
  const int32_t id = s.id;
  bool more = exchange->on_body(bytes, last);
  consume(id, bytes.size());
  if (!more && s.conn && s.exchange) s.body_paused = true;
}

void Http2Connection::answer(Http2Stream& s) {
  Response& response = worker_.scratch_response();
  response.clear();
  if (s.selection.route) {
    s.request.body = s.body;
    s.selection.route->handler->handle(s.request, response);
    compress::maybe_compress(s.request, response, s.selection.route->config->compress);
  } else {
    response.set_status(s.selection.status);
    if (!s.selection.allow.empty()) response.add_header("Allow", s.selection.allow);
    access::add_retry_after(response, s.selection.retry_after);
    if (!s.selection.challenge.empty())
      response.add_header("WWW-Authenticate", s.selection.challenge);
  }
  respond_complete(s, response);
}

void Http2Connection::respond_status(Http2Stream& s, int status) {
  Response& response = worker_.scratch_response();
  response.clear();
  response.set_status(status);
  if (status == 503) response.add_header("Retry-After", "1");
  respond_complete(s, response);
}

// A complete response: an empty 4xx/5xx body gets the site's error page, then HEADERS (+DATA).
void Http2Connection::respond_complete(Http2Stream& s, Response& response) {
  if (s.answered || !s.conn) return;
  const int status = response.status();
  if (status >= 400 && response.body_length() == 0)
    (s.selection.site ? *s.selection.site : s.routes->default_site())
        .fill_error_body(s.request, response);
  const bool with_body =
      !s.request.is_head() && http::status_has_body(status) && response.body_length() > 0;
  if (with_body) s.append_response_body(response);
  s.out_done = true;
  s.status = status;
  if (!s.selection.site) s.selection.site = &s.routes->default_site();
  const uint64_t logged_bytes = s.request.is_head() ? 0 : response.body_length();
  if (!submit_head(s, response, static_cast<int64_t>(response.body_length()), with_body)) return;
  s.logged = false;
  s.log(logged_bytes);
  s.body_bytes_sent = 0;
}

bool Http2Connection::submit_head(Http2Stream& s, const Response& response, int64_t content_length,
                                  bool with_body) {
  const int status = response.status() < 100 || response.status() > 599 ? 500 : response.status();
  s.answered = true;
  s.status = status;
  s.status_text[0] = static_cast<char>('0' + status / 100);
  s.status_text[1] = static_cast<char>('0' + status / 10 % 10);
  s.status_text[2] = static_cast<char>('0' + status % 10);
  // The configured header rules (null for most responses): a stream refused before routing has
  // its site's.
  const http::HeaderEdits* headers = s.selection.headers;
  if (!headers && s.selection.site) headers = s.selection.site->config->headers.edits.get();
  const http::HeaderEditList* edits = headers ? headers->for_status(status) : nullptr;
  const std::string_view hsts =
      tls_ && s.selection.site ? s.selection.site->config->tls.hsts : std::string_view{};
  const bool with_request_id =
      !s.request.request_id.empty() && s.routes && s.routes->config().request_id.response;
  char length_text[24];
  size_t length_size = 0;
  if (content_length >= 0 && http::status_has_body(status)) {
    auto [end, ec] = std::to_chars(length_text, length_text + sizeof length_text, content_length);
    length_size = static_cast<size_t>(end - length_text);
  }
  // A head like the last one on this connection goes out as the same bytes, unbuilt: parsing
  // the handler's lines into fields and encoding them was 40 % of the server's user-space
  // instructions per HTTP/2 request (callgrind, h2load -c100 -m10, 11 B file). Heads with rules
  // or a request id (new every time) are built as usual.
  std::string& key = head_key;
  key.clear();
  if (!edits && !with_request_id) {
    make_key(key, {{s.status_text, 3},
                   worker_.date_value(),
                   worker_.server_value(),
                   hsts,
                   response.prebuilt_headers(),
                   response.extra_headers(),
                   {length_text, length_size}});
    if (session_->remembers_response(key))
      return head_taken(session_->submit_remembered_response(s.id, with_body));
  }
  http2::ResponseFields& fields = response_fields;
  fields.clear();
  if (edits) {
    std::string& kept = edited_head;
    kept.clear();
    edits->append_kept(kept, worker_.date_and_server_lines());
    fields.add_lines(kept);
  } else {
    fields.add("date", worker_.date_value());
    if (!worker_.server_value().empty()) fields.add("server", worker_.server_value());
  }
  if (!hsts.empty()) fields.add("strict-transport-security", hsts);  // RFC 6797
  if (edits) {
    std::string& kept = edited_head;
    kept.clear();
    edits->append_kept(kept, response.prebuilt_headers());
    edits->append_kept(kept, response.extra_headers());
    kept.append(edits->lines);
    fields.add_lines(kept);
  } else {
    fields.add_lines(response.prebuilt_headers());
    fields.add_lines(response.extra_headers());
  }
  if (with_request_id) fields.add(s.routes->config().request_id.header, s.request.request_id);
  std::vector<http2::session::Session::Header>& nv = field_scratch;
  nv.clear();
  auto add = [&nv](std::string_view name, std::string_view value) {
    nv.push_back({name, value, false});
  };
  add(":status", {s.status_text, 3});
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string_view name = fields.name(i);
    if (name == "content-length") continue;  // ours, from the body we send
    add(name, fields.value(i));
  }
  if (length_size) add("content-length", {length_text, length_size});
  return head_taken(session_->submit_response(s.id, nv, with_body, key));
}

// ---- Downstream
// ------------------------------------------------------------------------------------

void Http2Stream::resume_body() {
  if (!conn || !body_paused || !exchange) return;
  body_paused = false;
  Http2Connection* c = conn;
  if (!held.empty() || held_last) c->deliver(*this, {}, false);
  c->after_stream_call();
}

void Http2Stream::respond(Response& response) {
  if (!conn) return;
  Http2Connection* c = conn;
  exchange = nullptr;
  exchange_ended = true;
  if (!head_sent_) {
    c->respond_complete(*this, response);
    if (!request_done && conn) {
      // The body is not needed any more: stop it (RFC 9113 8.1 allows an early answer).
      body_refused = true;
    }
  }
  c->after_stream_call();
}

bool Http2Stream::send_head(Response& head, int64_t content_length) {
  if (!conn) return false;
  Http2Connection* c = conn;
  const int code = head.status();
  if (code < 200) {  // no tunnels or interim answers over HTTP/2
    fail(502);
    return false;
  }
  head_sent_ = true;
  body_allowed = !request.is_head() && http::status_has_body(code);
  status = code;
  if (body_allowed) append_response_body(head);
  if (!c->submit_head(*this, head, content_length, true)) {
    server_reset = true;
    c->session_->submit_rst_stream(id, ErrorCode::kInternalError);
  }
  Exchange* ex = exchange;
  exchange = nullptr;
  c->after_stream_call();
  if (!conn) return false;
  exchange = ex;
  return true;
}

Downstream::Sent Http2Stream::send_body(std::string_view bytes) {
  if (!conn) return Sent::kGone;
  if (bytes.empty() || !body_allowed) return Sent::kMore;
  Http2Connection* c = conn;
  append_body(bytes);
  if (deferred) {
    deferred = false;
    c->session_->resume_data(id);
  }
  Exchange* ex = exchange;
  exchange = nullptr;
  c->after_stream_call();
  if (!conn) return Sent::kGone;
  exchange = ex;
  if (queued_ >= kHighWater) {
    notify_writable = true;
    return Sent::kFull;
  }
  return Sent::kMore;
}

Downstream::Sent Http2Stream::hold_if_queued() {
  if (!conn) return Sent::kGone;
  // read_body() wakes a stream when it drops below kLowWater: below it already, go on.
  if (queued_ < kLowWater) return Sent::kMore;
  notify_writable = true;
  return Sent::kFull;
}

void Http2Stream::finish() {
  if (!conn) return;
  Http2Connection* c = conn;
  exchange = nullptr;
  exchange_ended = true;
  out_done = true;
  if (deferred) {
    deferred = false;
    c->session_->resume_data(id);
  }
  log(body_bytes_sent + queued_);
  c->after_stream_call();
}

void Http2Stream::fail(int code) {
  if (!conn) return;
  Http2Connection* c = conn;
  exchange = nullptr;
  exchange_ended = true;
  if (!head_sent_) {
    c->respond_status(*this, code);
  } else {
    log(body_bytes_sent);
    server_reset = true;
    c->session_->submit_rst_stream(id, ErrorCode::kInternalError);
  }
  c->after_stream_call();
}

}  // namespace peregrine::server
