#include "server/http2_connection.h"

#include <nghttp2/nghttp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "compress/compress.h"
#include "core/log.h"
#include "core/spares.h"
#include "event/deferred.h"
#include "handlers/stream_handler.h"
#include "http/request_id.h"
#include "http2/headers.h"
#include "http2/memory.h"
#include "metrics/metrics.h"
#include "server/route_table.h"
#include "server/worker.h"

namespace peregrine::server {

using handlers::Downstream;
using handlers::Exchange;

namespace {

constexpr size_t kBatchBytes = 64 * 1024;  // frames gathered before one write
constexpr size_t kHighWater = 64 * 1024;   // a streamed body's queued bytes before kFull
constexpr size_t kLowWater = 16 * 1024;    // ...and before on_writable()
constexpr size_t kSpareStreams = 2048;     // stream objects kept for reuse, per thread

bool status_has_body(int status) {
  return status >= 200 && status != 204 && status != 304;
}

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
  // nghttp2's data source: copies the next body bytes into `buffer`.
  ssize_t read_body(uint8_t* buffer, size_t size, uint32_t* flags);
  void append_body(std::string_view bytes);
  // The body a Response carries (bytes copied, file regions read later with pread).
  void append_response_body(const Response& response);
  void log(uint64_t bytes);

  Http2Connection* conn = nullptr;  // null once the stream is closed
  int32_t id = 0;
  int64_t started_us = 0;  // metrics: when the stream opened (the worker's loop clock)
  Http2Stream* prev = nullptr;
  Http2Stream* next = nullptr;

  http2::RequestHeadBuilder head;
  Request request;
  Ref<RouteTable> routes;  // keeps the site, route and handler alive across a reload
  Selection selection;
  PeerAddress forwarded{};        // the client a trusted proxy's header named
  char request_id[32];            // [request_id]: the one made for this stream
  int64_t started_ms = 0;         // the head's arrival, for $request_time
  compress::StreamSlot compress;  // the exchange's Downstream when the route compresses
  bool handling = false;          // routed: a handler runs or waits for the body
  bool request_done = false;      // END_STREAM received
  bool answered = false;          // a response (head) was submitted
  bool keep_body = false;
  bool body_refused = false;  // 413 sent: further DATA is dropped
  bool server_reset = false;  // we reset it for the back end's failure, not the client's error
  std::string body;           // for a handler that wants it
  uint64_t body_received = 0;

  Exchange* exchange = nullptr;
  bool exchange_ended = false;  // respond(), finish() or fail() was called
  bool body_paused = false;
  bool held_last = false;
  std::string held;  // DATA that arrived while paused; its window opens once delivered

  bool head_sent_ = false;
  bool body_allowed = true;
  bool out_done = false;  // nothing more will be queued: EOF once drained
  bool deferred = false;  // the data source said "later": resume on more bytes
  bool notify_writable = false;
  bool logged = false;
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

// Streams end inside nghttp2's callbacks, sometimes while an exchange that just answered is still
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
thread_local std::vector<nghttp2_nv> nv_scratch;
thread_local std::string held_scratch;

}  // namespace

void Http2Stream::reset(Http2Connection* connection, int32_t stream_id) {
  conn = connection;
  id = stream_id;
  delay_timer.owner = this;
  delayed = false;
  prev = next = nullptr;
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
  out_done = deferred = notify_writable = logged = false;
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

ssize_t Http2Stream::read_body(uint8_t* buffer, size_t size, uint32_t* flags) {
  size_t n = 0;
  while (n < size && part_at_ < parts_.size()) {
    Part& p = parts_[part_at_];
    size_t take = std::min(size - n, p.length);
    if (!p.file) {
      std::memcpy(buffer + n, out_.data() + p.offset, take);
    } else {
      ssize_t got = ::pread(p.file->fd(), buffer + n, take, p.offset);
      if (got <= 0) {
        LOG_ERROR("HTTP/2: reading a response body file failed: %s",
                  got < 0 ? std::strerror(errno) : "file shrank");
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
      }
      take = static_cast<size_t>(got);
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
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (n == 0) {
      deferred = true;
      return NGHTTP2_ERR_DEFERRED;
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
  return static_cast<ssize_t>(n);
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
    context.connection_requests = static_cast<uint32_t>(conn->completed_ + 1);
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

// ---- nghttp2 callbacks -------------------------------------------------------------------------

struct Http2Callbacks {
  static Http2Stream* stream(nghttp2_session* session, int32_t id) {
    return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session, id));
  }

  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (c->live_streams_ >= Http2Limits::kMaxConcurrentStreams || c->draining_) {
      // RFC 9113 5.1.2: a stream error the client may retry (nghttp2 itself would end the
      // whole connection once our SETTINGS are acknowledged).
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    c->open_stream(frame->hd.stream_id);
    if (++c->streams_begun_ >= c->worker_.limits().max_requests_per_connection) {
      // As for HTTP/1 keep-alive: the connection ends after this many requests. The GOAWAY
      // names this stream as the last one served, so the client retries later ones elsewhere.
      c->draining_ = true;
      nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR,
                            nullptr, 0);
    }
    return 0;
  }

  // Counts a header block's bytes on the wire as its frames begin: a block that never ends
  // (CONTINUATION flood) is cut off before HPACK spends more time on it.
  static int on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    if (hd->type == NGHTTP2_HEADERS) {
      c->header_block_bytes_ = hd->length;
    } else if (hd->type == NGHTTP2_CONTINUATION) {
      c->header_block_bytes_ += hd->length;
      if (c->header_block_bytes_ >
          size_t{Http2Limits::kHeaderAbuseFactor} * c->worker_.limits().max_header_bytes) {
        c->calm_down("header block far over max_header_bytes (CONTINUATION flood)");
        return NGHTTP2_ERR_CALLBACK_FAILURE;  // stop reading now; the GOAWAY still leaves
      }
    }
    return 0;
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                       void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    Http2Stream* s = stream(session, frame->hd.stream_id);
    if (!s) return 0;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: ignored
    if (!s->head.add({reinterpret_cast<const char*>(name), namelen},
                     {reinterpret_cast<const char*>(value), valuelen}))
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // malformed: nghttp2 resets the stream
    if (s->head.list_bytes() >
        size_t{Http2Limits::kHeaderAbuseFactor} * c->worker_.limits().max_header_bytes) {
      c->calm_down("header list far over max_header_bytes");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    switch (frame->hd.type) {
      case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) c->settings_acked_ = true;
        return 0;
      case NGHTTP2_RST_STREAM: {
        Http2Stream* s = stream(session, frame->hd.stream_id);
        if (s && s->handling && ++c->client_resets_ > Http2Limits::kResetBudget + c->completed_ / 2)
          c->calm_down("too many streams reset by the client (rapid reset)");
        return 0;
      }
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: {
        Http2Stream* s = stream(session, frame->hd.stream_id);
        if (!s) return 0;
        const bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
          if (end) s->request_done = true;
          c->on_request_head(*s, end);
          return 0;
        }
        if (end) {
          s->request_done = true;
          c->on_request_end(*s);
        }
        return 0;
      }
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                           const uint8_t* data, size_t len, void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    Http2Stream* s = stream(session, stream_id);
    if (!s) {
      c->consume(stream_id, len);
      return 0;
    }
    c->on_data(*s, data, len);
    return 0;
  }

  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      Http2Stream* s = stream(session, frame->hd.stream_id);
      if (frame->rst_stream.error_code != NGHTTP2_NO_ERROR && !(s && s->server_reset))
        c->count_error();
      return 0;
    }
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      ++c->completed_;
      Http2Stream* s = stream(session, frame->hd.stream_id);
      // RFC 9113 8.1: the answer is complete; a body still coming is not wanted.
      if (s && !s->request_done)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                             void* user) {
    auto* c = static_cast<Http2Connection*>(user);
    Http2Stream* s = stream(session, stream_id);
    if (!s) return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
    if (Exchange* exchange = s->exchange) {
      s->exchange = nullptr;
      exchange->on_abort();
    }
    c->retire(*s);
    return 0;
  }

  static ssize_t read_data(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void*) {
    return static_cast<Http2Stream*>(source->ptr)->read_body(buf, length, data_flags);
  }

  static nghttp2_session_callbacks* make() {
    nghttp2_session_callbacks* cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    return cb;
  }
};

namespace {

const nghttp2_session_callbacks* callbacks() {
  static nghttp2_session_callbacks* cb = Http2Callbacks::make();
  return cb;
}

const nghttp2_option* options() {
  static nghttp2_option* opt = [] {
    nghttp2_option* o;
    nghttp2_option_new(&o);
    // The window opens as handlers and back ends take the bytes (nghttp2_session_consume).
    nghttp2_option_set_no_auto_window_update(o, 1);
    return o;
  }();
  return opt;
}

}  // namespace

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

Http2Connection::~Http2Connection() {
  if (session_) nghttp2_session_del(session_);
}

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
  if (nghttp2_session_server_new3(&session_, callbacks(), this, options(),
                                  http2::thread_memory()) != 0) {
    in_event_ = false;
    close_now();
    return;
  }
  const config::Limits& limits = worker_.limits();
  // nghttp2 is told twice our stream limit so that it never ends the connection over an extra
  // stream; patch_first_settings() shows the client the real one, which on_begin_headers keeps.
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2 * Http2Limits::kMaxConcurrentStreams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, Http2Limits::kStreamWindow},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits.max_header_bytes},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      // RFC 9113 deprecates the priority tree: with this nghttp2 keeps no tree and no closed
      // streams for it (~330 instructions less per request, callgrind); PRIORITY frames are
      // still accepted and ignored.
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        Http2Limits::kConnectionWindow);
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
  ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), size);
  if (rv < 0) {
    if (rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || rv == NGHTTP2_ERR_FLOODED)
      calm_down(nghttp2_strerror(static_cast<int>(rv)));  // nghttp2's own flood limits
    if (calmed_) {
      linger();  // our GOAWAY(ENHANCE_YOUR_CALM) goes out; the rest of the input is dropped
      return true;
    }
    LOG_INFO("HTTP/2: closing a connection: %s", nghttp2_strerror(static_cast<int>(rv)));
    return false;
  }
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
  // nghttp2 copies what it keeps: an idle connection holds no read buffer.
  if (buffer) pool.release(buffer);
  if (!ok || peer_closed_) {
    in_event_ = false;
    close_now();
  }
}

// Everything nghttp2 has to send, gathered into one buffer and written at once.
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
    out.clear();
    bool more = true;
    while (more) {
      while (out.size() < kBatchBytes) {
        const uint8_t* data;
        ssize_t n = nghttp2_session_mem_send(session_, &data);
        if (n < 0) {
          LOG_INFO("HTTP/2: closing a connection: %s", nghttp2_strerror(static_cast<int>(n)));
          out.clear();
          sending_ = false;
          close_now();
          return;
        }
        if (n == 0) {
          more = false;
          break;
        }
        out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
      }
      if (out.empty()) break;
      if (first_send_) {
        first_send_ = false;
        patch_first_settings(out);
      }
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
  for (Http2Stream* s = streams_; s && !closed_;) {
    Http2Stream* next = s->next;
    if (s->notify_writable && s->queued() < kLowWater && s->exchange) {
      s->notify_writable = false;
      s->exchange->on_writable();
    }
    s = next;
  }
}

// Our first SETTINGS frame announces the real stream limit (see start()).
void Http2Connection::patch_first_settings(std::string& frames) {
  if (frames.size() < 9 || static_cast<uint8_t>(frames[3]) != NGHTTP2_SETTINGS) return;
  size_t length = (static_cast<uint8_t>(frames[0]) << 16) | (static_cast<uint8_t>(frames[1]) << 8) |
                  static_cast<uint8_t>(frames[2]);
  if (frames.size() < 9 + length) return;
  for (size_t at = 9; at + 6 <= 9 + length; at += 6) {
    uint16_t id = static_cast<uint16_t>((static_cast<uint8_t>(frames[at]) << 8) |
                                        static_cast<uint8_t>(frames[at + 1]));
    if (id != NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) continue;
    uint32_t limit = Http2Limits::kMaxConcurrentStreams;
    frames[at + 2] = static_cast<char>(limit >> 24);
    frames[at + 3] = static_cast<char>(limit >> 16);
    frames[at + 4] = static_cast<char>(limit >> 8);
    frames[at + 5] = static_cast<char>(limit);
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
  if (calmed_ && !output_left && !nghttp2_session_want_write(session_)) {
    linger();
    settle();
    return;
  }
  if (!output_left && !nghttp2_session_want_read(session_) &&
      !nghttp2_session_want_write(session_)) {
    close_now();  // GOAWAY sent (ours or the client's) and no stream left
    return;
  }
  if (draining_ && live_streams_ == 0 && !output_left && !nghttp2_session_want_write(session_)) {
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
  for (Http2Stream* s = streams_; s; s = s->next) {
    if (s->answered && s->queued() > 0 && !s->deferred) output_waiting = true;
    if (s->handling && !s->request_done && !s->body_paused) body_waiting = true;
  }
  if (output_waiting) {
    list = &worker_.send_timers;  // a zero window or a full socket: the client must read
  } else if (!settings_acked_) {
    list = &worker_.header_timers;
  } else if (live_streams_ == 0) {
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
  uint32_t code = NGHTTP2_NO_ERROR;
  if (!settings_acked_) {
    LOG_INFO("HTTP/2: closing a connection: the client never acknowledged our SETTINGS");
    code = NGHTTP2_SETTINGS_TIMEOUT;
  } else if (live_streams_ > 0) {
    LOG_INFO("HTTP/2: closing a connection: the client was too slow to read or send");
  }
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), code, nullptr, 0);
  in_event_ = true;
  send_frames();
  in_event_ = false;
  close_now();
}

void Http2Connection::drain() {
  if (closed_ || draining_) return;
  draining_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  settle();
}

// After a GOAWAY for abuse the client is likely still sending: closing at once would reset the
// connection and could destroy the GOAWAY before it is read. Drop its input for a while instead.
void Http2Connection::linger() {
  if (lingering_) return;
  send_frames();  // the GOAWAY; from now on nghttp2 produces nothing more
  if (closed_) return;
  lingering_ = true;
  event::TimerList::disarm(timer);
  while (Http2Stream* s = streams_) {
    nghttp2_session_set_stream_user_data(session_, s->id, nullptr);
    if (Exchange* exchange = s->exchange) {
      s->exchange = nullptr;
      exchange->on_abort();
    }
    retire(*s);
  }
}

void Http2Connection::calm_down(const char* why) {
  if (calmed_) return;
  calmed_ = true;
  LOG_INFO("HTTP/2: closing a connection: %s", why);
  draining_ = true;
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

void Http2Connection::count_error() {
  if (++errors_ > Http2Limits::kErrorBudget + completed_ / 2)
    calm_down("too many stream errors (provoked resets)");
}

void Http2Connection::close_now() {
  if (closed_) return;
  closed_ = true;
  while (Http2Stream* s = streams_) {
    if (session_) nghttp2_session_set_stream_user_data(session_, s->id, nullptr);
    if (Exchange* exchange = s->exchange) {
      s->exchange = nullptr;
      exchange->on_abort();
    }
    retire(*s);
  }
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
  s->next = streams_;
  if (streams_) streams_->prev = s;
  streams_ = s;
  ++live_streams_;
  nghttp2_session_set_stream_user_data(session_, id, s);
  return s;
}

void Http2Connection::retire(Http2Stream& s) {
  event::TimerList::disarm(s.delay_timer);
  s.delayed = false;
  if (s.prev)
    s.prev->next = s.next;
  else
    streams_ = s.next;
  if (s.next) s.next->prev = s.prev;
  s.prev = s.next = nullptr;
  s.conn = nullptr;
  --live_streams_;
  if (stream_spares.retiring.empty()) event::dispose_later(new Sweeper);
  stream_spares.retiring.push_back(&s);
}

void Http2Connection::consume(int32_t stream_id, size_t bytes) {
  if (bytes == 0 || closed_) return;
  if (nghttp2_session_consume(session_, stream_id, bytes) != 0)
    nghttp2_session_consume_connection(session_, bytes);
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
    LOG_INFO("HTTP/2: client sent a bad request (%d)", error);
    if (error == 400) {  // counted as a provoked reset when the RST_STREAM leaves
      s.handling = false;
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_PROTOCOL_ERROR);
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

void Http2Connection::on_data(Http2Stream& s, const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
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
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
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
      !s.request.is_head() && status_has_body(status) && response.body_length() > 0;
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
  http2::ResponseFields& fields = response_fields;
  fields.clear();
  // The configured header rules (null for most responses): a stream refused before routing has
  // its site's.
  const http::HeaderEdits* headers = s.selection.headers;
  if (!headers && s.selection.site) headers = s.selection.site->config->headers.edits.get();
  const http::HeaderEditList* edits = headers ? headers->for_status(status) : nullptr;
  if (edits) {
    std::string& kept = edited_head;
    kept.clear();
    edits->append_kept(kept, worker_.date_and_server_lines());
    fields.add_lines(kept);
  } else {
    fields.add_lines(worker_.date_and_server_lines());
  }
  if (tls_ && s.selection.site && !s.selection.site->config->tls.hsts.empty())
    fields.add("strict-transport-security", s.selection.site->config->tls.hsts);  // RFC 6797
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
  if (!s.request.request_id.empty() && s.routes && s.routes->config().request_id.response)
    fields.add(s.routes->config().request_id.header, s.request.request_id);
  char length_text[24];
  size_t length_size = 0;
  if (content_length >= 0 && status_has_body(status)) {
    auto [end, ec] = std::to_chars(length_text, length_text + sizeof length_text, content_length);
    length_size = static_cast<size_t>(end - length_text);
  }
  std::vector<nghttp2_nv>& nv = nv_scratch;
  nv.clear();
  auto add = [&nv](std::string_view name, std::string_view value) {
    nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                  reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                  value.size(), NGHTTP2_NV_FLAG_NONE});
  };
  add(":status", {s.status_text, 3});
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string_view name = fields.name(i);
    if (name == "content-length") continue;  // ours, from the body we send
    add(name, fields.value(i));
  }
  if (length_size) add("content-length", {length_text, length_size});
  nghttp2_data_provider provider;
  provider.source.ptr = &s;
  provider.read_callback = Http2Callbacks::read_data;
  int rv = nghttp2_submit_response(session_, s.id, nv.data(), nv.size(),
                                   with_body ? &provider : nullptr);
  if (rv != 0) {
    LOG_INFO("HTTP/2: cannot send a response: %s", nghttp2_strerror(rv));
    return false;
  }
  return true;
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
  body_allowed = !request.is_head() && status_has_body(code);
  status = code;
  if (body_allowed) append_response_body(head);
  if (!c->submit_head(*this, head, content_length, true)) {
    server_reset = true;
    nghttp2_submit_rst_stream(c->session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
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
    nghttp2_session_resume_data(c->session_, id);
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
    nghttp2_session_resume_data(c->session_, id);
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
    nghttp2_submit_rst_stream(c->session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
  }
  c->after_stream_call();
}

}  // namespace peregrine::server
