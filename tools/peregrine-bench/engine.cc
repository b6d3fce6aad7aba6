// The load engine. One Worker per thread, shared-nothing apart from three atomics: the request
// budget (claimed in batches, so -n is exact without a lock per request), the stop flag and a
// progress counter (updated every 256 responses). Each worker owns an epoll poller, a timeout
// list, its connections, a scratch read buffer and its RunStats.
//
// With --h2 a connection carries an nghttp2 client session (H2Conn) and up to -m streams in
// slots; a null H2Conn pointer is the whole cost of HTTP/2 on the HTTP/1.1 path.
//
// A connection holds no read buffer of its own: it reads into the worker's scratch buffer and
// the response parser consumes bodies as they come; only an incomplete response head is copied
// aside (`carry`). Requests are written from one shared, prebuilt buffer holding the request P+1
// times over, so any run of up to P pipelined requests starting anywhere is one contiguous
// slice of it: a write is one send() with no copying.
#include "engine.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "event/poller.h"
#include "event/timer_list.h"
#include "http/http1/response_parser.h"

namespace peregrine::loadgen {
namespace {

using http1::BodyFraming;
using http1::ResponseParser;

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) {
  g_interrupted.store(true, std::memory_order_relaxed);
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t WallUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

uint64_t ToUs(int64_t ns) {
  return ns > 0 ? static_cast<uint64_t>(ns / 1000) : 0;
}

// What the workers share. Read-only during the run apart from the atomics.
struct Shared {
  const Options* options = nullptr;
  const Target* target = nullptr;
  std::string pipelined;  // the request, P+1 times
  size_t request_len = 0;
  int pipeline = 1;
  bool head_request = false;
  int64_t timeout_ms = 30000;
  int64_t deadline_ns = 0;         // 0: none
  std::atomic<int64_t> budget{0};  // requests not yet claimed by a worker
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> progress{0};
  std::atomic<int64_t> document_length{-1};
  std::mutex first_mutex;  // guards the fields below, set once
  std::string server_software;
  std::string tls_protocol;
  bool have_server = false;
  std::mutex log_mutex;  // -v output
};

class Worker;

struct Conn;

struct ConnTimer : event::TimerNode {
  Conn* conn = nullptr;
};

// One request on a connection, sent and not yet answered.
struct Pending {
  int64_t start = 0;     // when it started: the connect for the first one on a new connection
  int64_t intended = 0;  // -R: when it was scheduled
  int64_t sent = 0;      // when its bytes were handed to the kernel
  int64_t first_byte = 0;
  bool fresh =
      false;  // queued before the connection was established: its time includes the connect
};

// One HTTP/2 request in flight on a connection.
struct H2Stream {
  Pending p;
  int32_t id = 0;  // 0: not submitted to the session yet (the connection is still opening)
  int status = 0;
  uint64_t body = 0;
  size_t body_sent = 0;  // of the request body (-p / -u)
  bool in_use = false;
};

// --h2: the nghttp2 client session of one connection and its stream slots.
struct H2Conn {
  nghttp2_session* session = nullptr;
  std::unique_ptr<H2Stream[]> slots;
  std::vector<H2Stream*> free_slots;
  int slot_count = 0;
  std::string out;  // frames nghttp2 produced that the socket has not taken yet
  size_t out_off = 0;
  bool draining = false;  // GOAWAY received, or stream ids used up: no new streams here

  explicit H2Conn(int streams) : slots(new H2Stream[static_cast<size_t>(streams)]) {
    slot_count = streams;
    reset();
  }
  ~H2Conn() { end_session(); }
  void end_session() {
    if (session) nghttp2_session_del(session);  // calls no stream-close callbacks
    session = nullptr;
  }
  void reset() {
    end_session();
    free_slots.clear();
    for (int i = slot_count - 1; i >= 0; --i) {
      slots[static_cast<size_t>(i)] = H2Stream();
      free_slots.push_back(&slots[static_cast<size_t>(i)]);
    }
    out.clear();
    out_off = 0;
    draining = false;
  }
};

struct Conn final : event::Pollable {
  enum class State : uint8_t { kClosed, kConnecting, kHandshake, kOpen };

  ~Conn() {
    for (SSL_SESSION* session : tickets) SSL_SESSION_free(session);
  }

  Worker* worker = nullptr;
  int fd = -1;
  SSL* ssl = nullptr;
  std::unique_ptr<H2Conn> h2;  // --h2 only
  // --tls-resume: sessions the server gave this connection slot, newest last. A TLS 1.3 ticket
  // is offered once (RFC 8446 C.4; servers with single-use tickets refuse a second use), so the
  // two a full handshake brings last two reconnects; a TLS 1.2 session is offered until replaced.
  std::vector<SSL_SESSION*> tickets;
  State state = State::kClosed;
  bool in_ready_list = false;  // -R: waiting for a scheduled request
  int64_t ready_since = 0;     // -R: when it joined the ready list
  ConnTimer timer;
  ResponseParser parser;
  std::string carry;         // an incomplete response head, kept between reads
  size_t write_off = 0;      // offset into Shared::pipelined, modulo the request length
  size_t write_left = 0;     // bytes still to write
  uint32_t outstanding = 0;  // queued or sent, unanswered
  uint32_t head = 0;         // ring index of the oldest outstanding request
  std::unique_ptr<Pending[]> ring;
  int64_t conn_start = 0;
  int64_t connected_at = 0;
  uint64_t served = 0;      // responses on this connection
  uint32_t generation = 0;  // bumped on every close: tells a reopened connection apart

  void on_ready(uint32_t readiness) override;
};

class Worker {
 public:
  Worker(Shared& shared, int connections, double rate, bool gnuplot)
      : sh_(shared),
        opt_(*shared.options),
        // Never hold a wait for a batch: a reply read late is latency the report would add to
        // the server's, and requests sent late are load it never offered.
        poller_(event::make_epoll_poller(0)),
        timeouts_(shared.timeout_ms),
        conns_(new Conn[static_cast<size_t>(connections)]),
        conn_count_(connections),
        gnuplot_(gnuplot) {
    scratch_.reset(new char[kScratch]);
    for (int i = 0; i < connections; ++i) {
      Conn& c = conns_[static_cast<size_t>(i)];
      c.worker = this;
      c.timer.conn = &c;
      c.ring.reset(new Pending[static_cast<size_t>(sh_.pipeline)]);
      c.parser.start(sh_.head_request, true);
      if (opt_.h2) c.h2 = std::make_unique<H2Conn>(opt_.streams);
    }
    if (opt_.h2) h2_setup();
    if (rate > 0) interval_ns_ = static_cast<int64_t>(1e9 / rate);
    batch_ = 1;
    if (!opt_.unlimited_requests()) {
      int64_t per = opt_.requests / (static_cast<int64_t>(connections) * 8 + 1);
      batch_ = std::clamp<int64_t>(per, 1, 64);
    } else {
      batch_ = 64;
    }
  }

  ~Worker() {
    conns_.reset();  // the sessions go before the callbacks they were made with
    if (h2_callbacks_) nghttp2_session_callbacks_del(h2_callbacks_);
    if (h2_option_) nghttp2_option_del(h2_option_);
  }

  void run();
  void on_ready(Conn& c, uint32_t readiness);

  RunStats stats;
  std::vector<GnuplotRecord> records;

 private:
  static constexpr size_t kScratch = 256 * 1024;

  bool take_unit();
  void give_back(uint32_t n) { local_budget_ += n; }
  void fill(Conn& c, int64_t now);
  void queue_request(Conn& c, int64_t now, int64_t intended);
  void open(Conn& c, int64_t now);
  void open_socket(Conn& c, int64_t now);
  bool connected(Conn& c, int64_t now);
  bool handshake(Conn& c, int64_t now);
  bool flush(Conn& c, int64_t now);
  void read_all(Conn& c, uint32_t readiness, int64_t now);
  bool process(Conn& c, size_t len, int64_t now);
  bool complete(Conn& c, int64_t now);
  void on_eof(Conn& c, int64_t now);
  void fail(Conn& c, uint64_t RunStats::*counter, int64_t now);
  void retry_after_idle_close(Conn& c, CloseReason reason, int64_t now);
  void close_conn(Conn& c);
  void after_close(Conn& c, int64_t now);
  void arm(Conn& c, int64_t now) { timeouts_.arm(c.timer, now / 1'000'000); }
  void record_timing(const Conn& c, const Pending& p, int64_t now);
  void capture_server(std::string_view server) {
    captured_server_ = true;
    std::lock_guard<std::mutex> lock(sh_.first_mutex);
    if (!sh_.have_server) {
      sh_.have_server = true;
      sh_.server_software = std::string(server);
    }
  }
  void count_body_length(int64_t body) {
    int64_t doc = sh_.document_length.load(std::memory_order_relaxed);
    if (doc < 0) {
      if (sh_.document_length.compare_exchange_strong(doc, body, std::memory_order_relaxed))
        doc = body;
    }
    if (body != doc) ++stats.length_mismatch;
  }

  // --h2
  void h2_setup();
  bool h2_start(Conn& c, int64_t now);
  void h2_fill(Conn& c, int64_t now);
  bool h2_submit(Conn& c, H2Stream& s, int64_t now);
  bool h2_flush(Conn& c, int64_t now);
  void h2_read(Conn& c, uint32_t readiness, int64_t now);
  void h2_fail(Conn& c, uint64_t RunStats::*counter, int64_t now);
  void h2_stream_closed(Conn& c, H2Stream& s, uint32_t error_code);
  static int H2OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* conn);
  static int H2OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                        size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                        void* conn);
  static int H2OnData(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                      const uint8_t* data, size_t len, void* conn);
  static int H2OnFrame(nghttp2_session* session, const nghttp2_frame* frame, void* conn);
  static int H2OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                             void* conn);
  static int H2OnFrameSent(nghttp2_session* session, const nghttp2_frame* frame, void* conn);
  static int H2OnFrameNotSent(nghttp2_session* session, const nghttp2_frame* frame, int lib_error,
                              void* conn);
  static ssize_t H2ReadBody(nghttp2_session* session, int32_t stream_id, uint8_t* buf,
                            size_t length, uint32_t* data_flags, nghttp2_data_source* source,
                            void* conn);
  void dispatch(int64_t now);
  void make_ready(Conn& c, int64_t now) {
    if (interval_ns_ && !c.in_ready_list && c.outstanding < static_cast<uint32_t>(sh_.pipeline)) {
      c.in_ready_list = true;
      c.ready_since = now;
      ready_.push_back(&c);
    }
  }
  void count_progress() {
    if (++progress_pending_ >= 256) flush_progress();
  }
  void flush_progress() {
    if (progress_pending_) sh_.progress.fetch_add(progress_pending_, std::memory_order_relaxed);
    progress_pending_ = 0;
  }
  void log_text(const std::string& text) {
    std::lock_guard<std::mutex> lock(sh_.log_mutex);
    std::fwrite(text.data(), 1, text.size(), stderr);
  }

  Shared& sh_;
  const Options& opt_;
  std::unique_ptr<event::Poller> poller_;
  event::TimerList timeouts_;
  std::unique_ptr<Conn[]> conns_;
  int conn_count_;
  std::unique_ptr<char[]> scratch_;
  int open_conns_ = 0;
  int64_t local_budget_ = 0;
  int64_t batch_ = 1;
  bool budget_empty_ = false;
  bool gnuplot_;
  bool captured_server_ = false;
  uint64_t progress_pending_ = 0;
  int64_t interval_ns_ = 0;  // -R
  int64_t next_send_ns_ = 0;
  std::vector<Conn*> ready_;    // -R: connections that can take a request
  std::vector<Conn*> restart_;  // failed while opening: open again from the loop
  bool opening_ = false;
  int64_t wall_offset_us_ = 0;  // wall clock minus monotonic, for -g
  nghttp2_session_callbacks* h2_callbacks_ = nullptr;
  nghttp2_option* h2_option_ = nullptr;
  std::vector<nghttp2_nv> h2_nv_;  // the request's headers, pointing into the Target
  int64_t h2_now_ = 0;             // the time of the read whose frames the callbacks see
};

void Conn::on_ready(uint32_t readiness) {
  worker->on_ready(*this, readiness);
}

bool Worker::take_unit() {
  if (local_budget_ > 0) {
    --local_budget_;
    return true;
  }
  if (budget_empty_) return false;
  int64_t cur = sh_.budget.load(std::memory_order_relaxed);
  for (;;) {
    if (cur <= 0) {
      budget_empty_ = true;
      return false;
    }
    int64_t take = std::min(cur, batch_);
    if (sh_.budget.compare_exchange_weak(cur, cur - take, std::memory_order_relaxed)) {
      local_budget_ = take - 1;
      return true;
    }
  }
}

void Worker::queue_request(Conn& c, int64_t now, int64_t intended) {
  Pending& p = c.ring[(c.head + c.outstanding) % static_cast<uint32_t>(sh_.pipeline)];
  p.fresh = c.state != Conn::State::kOpen;
  p.start = now;
  p.intended = intended;
  p.sent = 0;
  p.first_byte = 0;
  if (c.outstanding == 0) arm(c, now);
  ++c.outstanding;
  c.write_left += sh_.request_len;
}

// Queues as many requests as the pipeline allows and the budget has, and starts them moving.
void Worker::fill(Conn& c, int64_t now) {
  if (c.h2) {
    h2_fill(c, now);
    return;
  }
  if (sh_.stop.load(std::memory_order_relaxed)) return;
  const auto depth = static_cast<uint32_t>(sh_.pipeline);
  while (c.outstanding < depth && take_unit()) queue_request(c, now, now);
  if (c.outstanding == 0) {
    if (c.state != Conn::State::kClosed) close_conn(c);  // nothing left to do
    return;
  }
  if (c.state == Conn::State::kClosed) {
    open(c, now);
  } else if (c.state == Conn::State::kOpen) {
    flush(c, now);
  }
}

void Worker::open(Conn& c, int64_t now) {
  opening_ = true;
  open_socket(c, now);
  opening_ = false;
}

void Worker::open_socket(Conn& c, int64_t now) {
  const Target& t = *sh_.target;
  c.conn_start = now;
  if (c.h2) {
    for (int i = 0; i < c.h2->slot_count; ++i) {
      H2Stream& s = c.h2->slots[static_cast<size_t>(i)];
      if (!s.in_use) continue;
      s.p.start = now;
      s.p.fresh = true;
    }
  } else {
    for (uint32_t i = 0; i < c.outstanding; ++i) {
      Pending& p = c.ring[(c.head + i) % static_cast<uint32_t>(sh_.pipeline)];
      p.start = now;
      p.fresh = true;
    }
  }
  c.fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) {
    fail(c, &RunStats::fail_connect, now);
    return;
  }
  ++open_conns_;
  ++stats.connections_opened;
  c.state = Conn::State::kConnecting;
  // TLS and HTTP/2 write in pieces (a handshake flight then the request, frames): Nagle would
  // hold the second piece for the server's delayed ACK (40 ms a resumed handshake).
  if (sh_.pipeline > 1 || sh_.request_len > 1200 || c.h2 || t.ssl_ctx) {
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (t.bind_len &&
      ::bind(c.fd, reinterpret_cast<const sockaddr*>(&t.bind_addr), t.bind_len) != 0) {
    fail(c, &RunStats::fail_connect, now);
    return;
  }
  int r = ::connect(c.fd, reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len);
  if (r != 0 && errno != EINPROGRESS) {
    fail(c, &RunStats::fail_connect, now);
    return;
  }
  if (!poller_->add(c.fd, event::kReadable | event::kWritable | event::kEdgeTriggered, &c)) {
    fail(c, &RunStats::fail_connect, now);
    return;
  }
  arm(c, now);
  // On loopback the handshake is usually complete by now: try the request at once and save a
  // wakeup. A send on a socket still connecting just says EAGAIN.
  if (r == 0) {
    connected(c, now);
  } else if (t.ssl_ctx == nullptr && !c.h2) {
    flush(c, NowNs());  // flush() marks the connection open once a send succeeds
  }
}

// The TCP connection is up. Returns false when the connection was closed (TLS set-up failed).
bool Worker::connected(Conn& c, int64_t now) {
  c.connected_at = now;
  if (sh_.target->ssl_ctx) {
    c.ssl = SSL_new(sh_.target->ssl_ctx);
    if (!c.ssl) {
      fail(c, &RunStats::fail_connect, now);
      return false;
    }
    SSL_set_fd(c.ssl, c.fd);
    SSL_set_connect_state(c.ssl);
    SSL_set_app_data(c.ssl, &c);  // for the new-session callback (--tls-resume)
    if (!c.tickets.empty()) {
      SSL_SESSION* session = c.tickets.back();
      SSL_set_session(c.ssl, session);  // takes its own reference
      if (SSL_SESSION_get_protocol_version(session) == TLS1_3_VERSION) {
        c.tickets.pop_back();
        SSL_SESSION_free(session);
      }
    }
    if (!sh_.target->sni.empty()) SSL_set_tlsext_host_name(c.ssl, sh_.target->sni.c_str());
    c.state = Conn::State::kHandshake;
    return handshake(c, now);
  }
  c.state = Conn::State::kOpen;
  if (c.h2) return h2_start(c, now);
  return flush(c, now);
}

bool Worker::handshake(Conn& c, int64_t now) {
  ERR_clear_error();
  int r = SSL_do_handshake(c.ssl);
  if (r == 1) {
    c.connected_at = now;  // the TLS handshake counts as connection set-up
    c.state = Conn::State::kOpen;
    ++stats.tls_handshakes;
    if (SSL_session_reused(c.ssl)) ++stats.tls_resumed;
    if (sh_.tls_protocol.empty()) {
      std::lock_guard<std::mutex> lock(sh_.first_mutex);
      if (sh_.tls_protocol.empty()) {
        const unsigned char* alpn = nullptr;
        unsigned alpn_len = 0;
        SSL_get0_alpn_selected(c.ssl, &alpn, &alpn_len);
        sh_.tls_protocol = std::string(SSL_get_version(c.ssl)) + "," + SSL_get_cipher_name(c.ssl);
        if (alpn_len)
          sh_.tls_protocol += ",ALPN " + std::string(reinterpret_cast<const char*>(alpn), alpn_len);
      }
    }
    if (c.h2) return h2_start(c, now);
    return flush(c, now);
  }
  int err = SSL_get_error(c.ssl, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
  if (opt_.verbosity >= 2) {
    char buf[256];
    ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    log_text(std::string("TLS handshake failed: ") + buf + "\n");
  }
  fail(c, &RunStats::fail_connect, now);
  return false;
}

// Writes what is pending. Returns false when the connection was closed.
bool Worker::flush(Conn& c, int64_t now) {
  while (c.write_left > 0) {
    const char* data = sh_.pipelined.data() + c.write_off;
    ssize_t n;
    if (c.ssl) {
      ERR_clear_error();
      int r = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(c.write_left, 1 << 30)));
      if (r <= 0) {
        int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) return true;
        n = -1;
        errno = EPIPE;
      } else {
        n = r;
      }
    } else {
      n = ::send(c.fd, data, c.write_left, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      if (errno == ENOTCONN && c.state == Conn::State::kConnecting) return true;
      if (c.state == Conn::State::kConnecting) {
        fail(c, &RunStats::fail_connect, now);
      } else if (c.served > 0 && !c.parser.started()) {
        retry_after_idle_close(c, CloseReason::kReset, now);
      } else {
        fail(c, &RunStats::fail_write, now);
      }
      return false;
    }
    if (c.state == Conn::State::kConnecting) {
      c.connected_at = now;
      c.state = Conn::State::kOpen;
    }
    // Every request whose first byte left now was sent now.
    const auto depth = static_cast<uint32_t>(sh_.pipeline);
    for (uint32_t i = 0; i < c.outstanding; ++i) {
      Pending& p = c.ring[(c.head + i) % depth];
      if (p.sent == 0) p.sent = now;
    }
    stats.bytes_written += static_cast<uint64_t>(n);
    c.write_left -= static_cast<size_t>(n);
    c.write_off = (c.write_off + static_cast<size_t>(n)) % sh_.request_len;
  }
  return true;
}

void Worker::on_ready(Conn& c, uint32_t readiness) {
  const int64_t now = NowNs();
  switch (c.state) {
    case Conn::State::kClosed:
      return;
    case Conn::State::kConnecting:
      if (readiness & event::kHangup) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || !(readiness & event::kOut)) {
          if (opt_.verbosity >= 2)
            log_text(std::string("connect: ") + std::strerror(err ? err : ECONNREFUSED) + "\n");
          fail(c, &RunStats::fail_connect, now);
          return;
        }
      }
      if (!(readiness & (event::kOut | event::kIn | event::kHangup))) return;
      if (!connected(c, now)) return;
      if (c.state != Conn::State::kOpen) return;
      break;
    case Conn::State::kHandshake:
      if (!handshake(c, now)) return;
      if (c.state != Conn::State::kOpen) return;
      break;
    case Conn::State::kOpen:
      if (c.h2) {
        if ((readiness & event::kOut) && !h2_flush(c, now)) return;
        break;
      }
      if ((readiness & event::kOut) && c.write_left && !flush(c, now)) return;
      break;
  }
  if (readiness & (event::kIn | event::kHangup)) {
    if (c.h2) {
      h2_read(c, readiness, now);
    } else {
      read_all(c, readiness, now);
    }
  }
}

void Worker::read_all(Conn& c, uint32_t readiness, int64_t now) {
  char* buf = scratch_.get();
  for (;;) {
    size_t have = c.carry.size();
    if (have) std::memcpy(buf, c.carry.data(), have);
    const size_t room = kScratch - have;
    ssize_t n;
    if (c.ssl) {
      ERR_clear_error();
      int r = SSL_read(c.ssl, buf + have, static_cast<int>(room));
      if (r > 0) {
        n = r;
      } else {
        int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
        if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0)) {
          n = 0;
        } else {
          n = -1;
          if (errno == 0 || errno == EAGAIN) errno = ECONNRESET;
        }
      }
    } else {
      n = ::recv(c.fd, buf + have, room, 0);
    }
    if (n > 0) {
      stats.bytes_read += static_cast<uint64_t>(n);
      if (!process(c, have + static_cast<size_t>(n), now)) return;
      // A short read drained the socket, unless the peer also closed (then read the EOF now:
      // edge-triggered, nothing will tell us again).
      if (!c.ssl && static_cast<size_t>(n) < room && !(readiness & event::kHangup)) return;
      continue;
    }
    if (n == 0) {
      on_eof(c, now);
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR) continue;
    if (c.served > 0 && !c.parser.started()) {
      retry_after_idle_close(c, CloseReason::kReset, now);
    } else {
      if (opt_.verbosity >= 2) log_text(std::string("recv: ") + std::strerror(errno) + "\n");
      fail(c, &RunStats::fail_read, now);
    }
    return;
  }
}

// Parses `len` bytes at the start of the scratch buffer. Returns false when the connection was
// closed (or reopened): the caller must stop reading it.
bool Worker::process(Conn& c, size_t len, int64_t now) {
  const uint32_t generation = c.generation;
  std::string_view in(scratch_.get(), len);
  c.carry.clear();
  while (!in.empty()) {
    if (c.outstanding == 0) {
      // Bytes nobody asked for: the server is confused. Drop the connection.
      if (opt_.verbosity >= 2)
        log_text("unsolicited bytes from the server; closing the connection\n");
      close_conn(c);
      after_close(c, now);
      return false;
    }
    Pending& p = c.ring[c.head];
    if (!c.parser.started()) p.first_byte = now;
    const bool had_head = c.parser.head_complete();
    ResponseParser::Result r = c.parser.parse(in);
    if (opt_.verbosity >= 4 && !had_head && c.parser.head_complete()) {
      const auto& h = c.parser.head();
      log_text("LOG: header received:\n" +
               std::string(in.substr(0, h.interim_bytes + h.head_bytes)));
    }
    if (r.status == ResponseParser::Status::kError) {
      if (opt_.verbosity >= 2) log_text(std::string("protocol error: ") + c.parser.error() + "\n");
      fail(c, &RunStats::fail_protocol, now);
      return false;
    }
    in.remove_prefix(r.consumed);
    if (r.status == ResponseParser::Status::kNeedMore) {
      c.carry.assign(in.data(), in.size());
      return true;
    }
    if (!complete(c, now) || c.generation != generation) return false;
  }
  return true;
}

// The response to the oldest outstanding request is complete. Returns false when the connection
// was closed.
bool Worker::complete(Conn& c, int64_t now) {
  const auto depth = static_cast<uint32_t>(sh_.pipeline);
  Pending p = c.ring[c.head];
  c.head = (c.head + 1) % depth;
  --c.outstanding;
  ++c.served;
  const http1::ResponseHead& h = c.parser.head();
  ++stats.completed;
  ++stats.responses;
  count_progress();
  if (h.status < 1000) ++stats.status[static_cast<size_t>(h.status)];
  if (h.status < 200 || h.status >= 300) ++stats.non2xx;
  stats.head_bytes += h.head_bytes + h.interim_bytes;
  stats.body_wire_bytes += c.parser.body_wire_bytes();
  count_body_length(static_cast<int64_t>(c.parser.body_bytes()));
  const bool keep = c.parser.keep_alive();
  if (keep && opt_.keep_alive) ++stats.keep_alive_responses;
  if (!captured_server_) capture_server(h.server);
  if (opt_.verbosity >= 3) log_text("LOG: Response code = " + std::to_string(h.status) + "\n");
  record_timing(c, p, now);

  if (!keep) {
    if (opt_.keep_alive) {
      CloseReason reason = CloseReason::kConnectionClose;
      if (h.connection_close)
        reason = CloseReason::kConnectionClose;
      else if (c.parser.framing() == BodyFraming::kClose)
        reason = CloseReason::kNoLength;
      else if (h.transfer_encoding && h.has_content_length)
        reason = CloseReason::kTeAndLength;
      else if (h.version_minor == 0)
        reason = CloseReason::kHttp10NoKeepAlive;
      ++stats.server_closes[static_cast<size_t>(reason)];
      if (reason == CloseReason::kNoLength && h.version_minor == 0)
        stats.close_reason_http10 = true;
    }
    // Requests pipelined behind this one were not answered: they go back to the budget and are
    // sent again on the next connection.
    give_back(c.outstanding);
    c.outstanding = 0;
    close_conn(c);
    after_close(c, now);
    return false;
  }
  c.parser.start(sh_.head_request, false);
  if (c.outstanding > 0) {
    arm(c, now);
  } else {
    event::TimerList::disarm(c.timer);
  }
  const uint32_t generation = c.generation;
  if (interval_ns_) {
    make_ready(c, now);
    dispatch(now);
  } else {
    fill(c, now);
  }
  return c.state != Conn::State::kClosed && c.generation == generation;
}

void Worker::record_timing(const Conn& c, const Pending& p, int64_t now) {
  const int64_t start = p.fresh ? c.conn_start : p.start;
  const int64_t connect_ns = p.fresh ? c.connected_at - c.conn_start : 0;
  const int64_t total_ns = now - (interval_ns_ ? std::min(p.intended, start) : start);
  const int64_t wait_ns = p.first_byte && p.sent ? p.first_byte - p.sent : 0;
  const int64_t service_ns = now - start;
  stats.total.record(ToUs(total_ns));
  stats.connect.record(ToUs(connect_ns));
  stats.processing.record(ToUs(service_ns - connect_ns));
  stats.waiting.record(ToUs(wait_ns));
  if (gnuplot_) {
    records.push_back({start / 1000 + wall_offset_us_, static_cast<int64_t>(ToUs(connect_ns)),
                       static_cast<int64_t>(ToUs(service_ns - connect_ns)),
                       static_cast<int64_t>(ToUs(total_ns)), static_cast<int64_t>(ToUs(wait_ns))});
  }
}

void Worker::on_eof(Conn& c, int64_t now) {
  if (c.outstanding == 0) {
    // The server closed an idle kept-alive connection.
    if (opt_.keep_alive) ++stats.server_closes[static_cast<size_t>(CloseReason::kIdleClose)];
    close_conn(c);
    after_close(c, now);
    return;
  }
  ResponseParser::Result r = c.parser.finish();
  if (r.status == ResponseParser::Status::kDone) {
    complete(c, now);  // close-delimited: complete() closes and reopens
    return;
  }
  if (!c.parser.started() && c.served > 0) {
    retry_after_idle_close(c, CloseReason::kIdleClose, now);
    return;
  }
  if (opt_.verbosity >= 2) log_text(std::string("read: ") + c.parser.error() + "\n");
  fail(c, &RunStats::fail_read, now);
}

// The server closed (or reset) a connection that had served responses, before any byte of the
// next one: a keep-alive timeout or request limit racing our request. Resend on a new connection.
void Worker::retry_after_idle_close(Conn& c, CloseReason reason, int64_t now) {
  if (opt_.keep_alive) ++stats.server_closes[static_cast<size_t>(reason)];
  stats.retried += c.outstanding;
  give_back(c.outstanding);
  c.outstanding = 0;
  close_conn(c);
  after_close(c, now);
}

// The oldest outstanding request failed; the others go back to the budget. The connection is
// closed and, budget permitting, opened again.
void Worker::fail(Conn& c, uint64_t RunStats::*counter, int64_t now) {
  if (c.h2) {
    h2_fail(c, counter, now);
    return;
  }
  if (c.outstanding > 0) {
    ++(stats.*counter);
    ++stats.completed;
    count_progress();
    give_back(c.outstanding - 1);
    c.outstanding = 0;
  }
  close_conn(c);
  after_close(c, now);
}

void Worker::close_conn(Conn& c) {
  if (c.h2) c.h2->reset();
  if (c.ssl) {
    // Marked as shut down so that OpenSSL keeps the session resumable: the server closing
    // after a `Connection: close` response is no reason to forget it.
    SSL_set_shutdown(c.ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c.ssl);
    c.ssl = nullptr;
  }
  if (c.fd >= 0) {
    ::close(c.fd);  // also leaves the epoll set: the descriptor is never duplicated
    c.fd = -1;
    --open_conns_;
  }
  event::TimerList::disarm(c.timer);
  c.state = Conn::State::kClosed;
  c.carry.clear();
  c.parser.start(sh_.head_request, false);
  c.write_left = c.write_off = 0;
  c.outstanding = 0;
  c.head = 0;
  c.served = 0;
  ++c.generation;
}

void Worker::after_close(Conn& c, int64_t now) {
  if (interval_ns_) {
    make_ready(c, now);
  } else if (opening_) {
    restart_.push_back(&c);  // failed inside open(): retry from the loop, not by recursion
  } else {
    fill(c, now);
  }
}

// -R: hands every request whose scheduled time has come to a connection that can take it.
// Requests that find no free connection wait (their latency keeps counting from the schedule).
void Worker::dispatch(int64_t now) {
  while (next_send_ns_ <= now && !ready_.empty()) {
    Conn* c = ready_.back();
    if (c->outstanding >= static_cast<uint32_t>(sh_.pipeline)) {
      c->in_ready_list = false;
      ready_.pop_back();
      continue;
    }
    if (!take_unit()) return;
    // Lateness is the server's when no connection was free at the scheduled time: measure from
    // the schedule (coordinated omission). When a connection was free and we were late (timer
    // granularity), the delay is ours: measure from now.
    const int64_t intended = c->ready_since <= next_send_ns_ ? now : next_send_ns_;
    queue_request(*c, now, intended);
    next_send_ns_ += interval_ns_;
    if (c->outstanding >= static_cast<uint32_t>(sh_.pipeline)) {
      c->in_ready_list = false;
      ready_.pop_back();
    }
    if (c->state == Conn::State::kClosed) {
      open(*c, now);
    } else if (c->state == Conn::State::kOpen) {
      flush(*c, now);
    }
  }
}

void Worker::run() {
  wall_offset_us_ = WallUs() - NowNs() / 1000;
  int64_t now = NowNs();
  if (interval_ns_) {
    next_send_ns_ = now;
    for (int i = conn_count_ - 1; i >= 0; --i) make_ready(conns_[static_cast<size_t>(i)], now);
    dispatch(now);
  } else {
    for (int i = 0; i < conn_count_; ++i) fill(conns_[static_cast<size_t>(i)], now);
  }
  event::ReadyEvent events[256];
  std::vector<Conn*> restarting;
  for (;;) {
    now = NowNs();
    if (sh_.stop.load(std::memory_order_relaxed) || (sh_.deadline_ns && now >= sh_.deadline_ns))
      break;
    const int64_t now_ms = now / 1'000'000;
    while (event::TimerNode* node = timeouts_.pop_expired(now_ms)) {
      Conn& c = *static_cast<ConnTimer*>(node)->conn;
      if (opt_.verbosity >= 2) log_text("request timed out\n");
      fail(c, &RunStats::fail_timeout, now);
    }
    if (!restart_.empty()) {
      restarting.swap(restart_);
      for (Conn* c : restarting) {
        if (c->state == Conn::State::kClosed) fill(*c, now);
      }
      restarting.clear();
    }
    if (interval_ns_) {
      dispatch(now);
      if (budget_empty_ && local_budget_ == 0) {
        bool busy = false;
        for (int i = 0; i < conn_count_ && !busy; ++i)
          busy = conns_[static_cast<size_t>(i)].outstanding > 0;
        if (!busy) break;
      }
    } else if (open_conns_ == 0 && restart_.empty()) {
      break;  // every connection found the budget spent
    }
    int64_t wait_ms = restart_.empty() ? 100 : 0;
    int64_t t = timeouts_.next_in(now_ms);
    if (t >= 0 && t < wait_ms) wait_ms = t;
    if (sh_.deadline_ns)
      wait_ms = std::min<int64_t>(wait_ms, (sh_.deadline_ns - now + 999'999) / 1'000'000);
    if (interval_ns_ && !ready_.empty()) {
      // Rounded up: an early wakeup would spin; lateness with a free connection is not
      // charged to the server (see dispatch()).
      wait_ms = std::min<int64_t>(
          wait_ms, std::max<int64_t>(0, (next_send_ns_ - now + 999'999) / 1'000'000));
    }
    int n = poller_->wait(static_cast<int>(std::max<int64_t>(wait_ms, 0)), events, 256);
    for (int i = 0; i < n; ++i) events[i].target->on_ready(events[i].readiness);
  }
  // Stopped by the time limit or an interrupt, or done: what is still in flight is not counted.
  for (int i = 0; i < conn_count_; ++i) {
    Conn& c = conns_[static_cast<size_t>(i)];
    stats.in_flight_at_end += c.outstanding;
    c.outstanding = 0;
    close_conn(c);
  }
  flush_progress();
}

// --- HTTP/2 (--h2) ---------------------------------------------------------------------------

// h2load's defaults: windows of 2^30-1, so flow control never paces a benchmark.
constexpr int32_t kH2Window = (1 << 30) - 1;

void Worker::h2_setup() {
  nghttp2_session_callbacks_new(&h2_callbacks_);
  nghttp2_session_callbacks_set_on_begin_headers_callback(h2_callbacks_, &H2OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(h2_callbacks_, &H2OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h2_callbacks_, &H2OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(h2_callbacks_, &H2OnFrame);
  nghttp2_session_callbacks_set_on_stream_close_callback(h2_callbacks_, &H2OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(h2_callbacks_, &H2OnFrameSent);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(h2_callbacks_, &H2OnFrameNotSent);
  nghttp2_option_new(&h2_option_);
  // Until the server's SETTINGS say otherwise, assume it takes all our streams at once.
  nghttp2_option_set_peer_max_concurrent_streams(h2_option_, static_cast<uint32_t>(opt_.streams));
  for (const auto& [name, value] : sh_.target->h2_headers) {
    nghttp2_nv nv{};
    nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
    nv.namelen = name.size();
    nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
    nv.valuelen = value.size();
    nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    h2_nv_.push_back(nv);
  }
}

// The connection is up (TCP, and TLS with ALPN "h2"): start the session and send the streams
// queued while it was opening.
bool Worker::h2_start(Conn& c, int64_t now) {
  if (c.ssl) {
    const unsigned char* alpn = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(c.ssl, &alpn, &len);
    if (len != 2 || std::memcmp(alpn, "h2", 2) != 0) {
      if (opt_.verbosity >= 2) log_text("the server did not select h2 by ALPN\n");
      fail(c, &RunStats::fail_connect, now);
      return false;
    }
  }
  H2Conn& h = *c.h2;
  if (nghttp2_session_client_new2(&h.session, h2_callbacks_, &c, h2_option_) != 0) {
    h.session = nullptr;
    fail(c, &RunStats::fail_connect, now);
    return false;
  }
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kH2Window}};
  nghttp2_submit_settings(h.session, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(h.session, NGHTTP2_FLAG_NONE, 0, kH2Window);
  for (int i = 0; i < h.slot_count; ++i) {
    H2Stream& s = h.slots[static_cast<size_t>(i)];
    if (s.in_use && s.id == 0) h2_submit(c, s, now);
  }
  return h2_flush(c, now);
}

bool Worker::h2_submit(Conn& c, H2Stream& s, int64_t now) {
  nghttp2_data_provider body{};
  body.source.ptr = &s;
  body.read_callback = &H2ReadBody;
  const bool has_body = !opt_.post_file.empty() || !opt_.put_file.empty();
  const int32_t id =
      nghttp2_submit_request(c.h2->session, nullptr, h2_nv_.data(), h2_nv_.size(),
                             has_body && !sh_.target->body.empty() ? &body : nullptr, &s);
  if (id < 0) {
    // Stream ids used up (2^31 on one connection): this one goes to the next connection.
    c.h2->draining = true;
    s = H2Stream();
    c.h2->free_slots.push_back(&s);
    --c.outstanding;
    give_back(1);
    return false;
  }
  s.id = id;  // s.p.sent is set when its HEADERS frame goes out (H2OnFrameSent)
  return true;
}

// Opens streams up to -m while the budget lasts; a connection with nothing left to do is closed,
// and one that was told to go away (GOAWAY) is replaced by a new one.
void Worker::h2_fill(Conn& c, int64_t now) {
  H2Conn& h = *c.h2;
  const auto depth = static_cast<uint32_t>(opt_.streams);
  if (!sh_.stop.load(std::memory_order_relaxed) && !h.draining) {
    while (c.outstanding < depth && !h.free_slots.empty() && take_unit()) {
      H2Stream& s = *h.free_slots.back();
      h.free_slots.pop_back();
      s = H2Stream();
      s.in_use = true;
      s.p.start = s.p.intended = now;
      s.p.fresh = c.state != Conn::State::kOpen;
      if (c.outstanding == 0) arm(c, now);
      ++c.outstanding;
      if (h.session && !h2_submit(c, s, now)) break;
    }
  }
  if (c.outstanding == 0) {
    const bool replace = h.draining && c.state != Conn::State::kClosed;
    if (c.state != Conn::State::kClosed) close_conn(c);
    if (replace) after_close(c, now);
    return;
  }
  if (c.state == Conn::State::kClosed) {
    open(c, now);
  } else if (c.state == Conn::State::kOpen) {
    h2_flush(c, now);
  }
}

// Sends what the session wants to send, many frames per write. Returns false when the
// connection was closed.
bool Worker::h2_flush(Conn& c, int64_t now) {
  H2Conn& h = *c.h2;
  if (!h.session) return true;
  h2_now_ = now;
  for (;;) {
    if (h.out_off == h.out.size()) {
      h.out.clear();
      h.out_off = 0;
      for (;;) {
        const uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(h.session, &data);
        if (n < 0) {
          if (opt_.verbosity >= 2)
            log_text(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)) + "\n");
          h2_fail(c, &RunStats::fail_protocol, now);
          return false;
        }
        if (n == 0) break;
        h.out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
        if (h.out.size() >= 64 * 1024) break;
      }
      if (h.out.empty()) break;
    }
    const char* data = h.out.data() + h.out_off;
    const size_t left = h.out.size() - h.out_off;
    ssize_t n;
    if (c.ssl) {
      ERR_clear_error();
      const int r = SSL_write(c.ssl, data, static_cast<int>(left));
      if (r <= 0) {
        const int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) return true;
        n = -1;
        errno = EPIPE;
      } else {
        n = r;
      }
    } else {
      n = ::send(c.fd, data, left, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      if (opt_.verbosity >= 2) log_text(std::string("send: ") + std::strerror(errno) + "\n");
      h2_fail(c, &RunStats::fail_write, now);
      return false;
    }
    stats.bytes_written += static_cast<uint64_t>(n);
    h.out_off += static_cast<size_t>(n);
  }
  if (!nghttp2_session_want_read(h.session) && !nghttp2_session_want_write(h.session)) {
    // The session is over (GOAWAY exchanged, or a connection error we reported): streams
    // still open on it will not be answered.
    if (c.outstanding > 0) {
      h2_fail(c, &RunStats::fail_protocol, now);
    } else {
      close_conn(c);
      after_close(c, now);
    }
    return false;
  }
  return true;
}

void Worker::h2_read(Conn& c, uint32_t readiness, int64_t now) {
  char* buf = scratch_.get();
  const uint32_t generation = c.generation;
  h2_now_ = now;
  for (;;) {
    ssize_t n;
    if (c.ssl) {
      ERR_clear_error();
      const int r = SSL_read(c.ssl, buf, static_cast<int>(kScratch));
      if (r > 0) {
        n = r;
      } else {
        const int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) break;
        if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0)) {
          n = 0;
        } else {
          n = -1;
          if (errno == 0 || errno == EAGAIN) errno = ECONNRESET;
        }
      }
    } else {
      n = ::recv(c.fd, buf, kScratch, 0);
    }
    if (n > 0) {
      stats.bytes_read += static_cast<uint64_t>(n);
      const ssize_t r = nghttp2_session_mem_recv(c.h2->session, reinterpret_cast<uint8_t*>(buf),
                                                 static_cast<size_t>(n));
      if (r < 0) {
        if (opt_.verbosity >= 2)
          log_text(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(r)) + "\n");
        h2_fail(c, &RunStats::fail_protocol, now);
        return;
      }
      if (c.generation != generation) return;
      if (!c.ssl && static_cast<size_t>(n) < kScratch && !(readiness & event::kHangup)) break;
      continue;
    }
    if (n == 0) {
      if (c.outstanding == 0) {
        close_conn(c);  // an idle connection closed (after GOAWAY, or the server's idle timeout)
        after_close(c, now);
      } else {
        if (opt_.verbosity >= 2) log_text("HTTP/2: the server closed the connection\n");
        h2_fail(c, &RunStats::fail_read, now);
      }
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    if (opt_.verbosity >= 2) log_text(std::string("recv: ") + std::strerror(errno) + "\n");
    h2_fail(c, &RunStats::fail_read, now);
    return;
  }
  // Streams may have ended: open new ones, and send what the session owes (WINDOW_UPDATE,
  // SETTINGS and PING acknowledgements) with them.
  h2_fill(c, now);
}

// The connection failed: every stream that was sent fails; streams not yet sent go back to the
// budget. A connection that never answered anything counts one failure even if nothing was sent
// (as a failed connect on HTTP/1.1), so that a dead server ends the run.
void Worker::h2_fail(Conn& c, uint64_t RunStats::*counter, int64_t now) {
  H2Conn& h = *c.h2;
  uint64_t sent = 0, unsent = 0;
  for (int i = 0; i < h.slot_count; ++i) {
    const H2Stream& s = h.slots[static_cast<size_t>(i)];
    if (!s.in_use) continue;
    (s.p.sent ? sent : unsent) += 1;
  }
  if (sent == 0 && unsent > 0 && c.served == 0) {
    sent = 1;
    --unsent;
  }
  stats.*counter += sent;
  stats.completed += sent;
  for (uint64_t i = 0; i < sent; ++i) count_progress();
  give_back(static_cast<uint32_t>(unsent));
  c.outstanding = 0;
  close_conn(c);
  after_close(c, now);
}

void Worker::h2_stream_closed(Conn& c, H2Stream& s, uint32_t error_code) {
  const int64_t now = h2_now_;
  if (error_code == NGHTTP2_NO_ERROR && s.status != 0) {
    ++stats.completed;
    ++stats.responses;
    count_progress();
    if (s.status < 1000) ++stats.status[static_cast<size_t>(s.status)];
    if (s.status < 200 || s.status >= 300) ++stats.non2xx;
    count_body_length(static_cast<int64_t>(s.body));
    ++stats.keep_alive_responses;
    ++c.served;
    if (opt_.verbosity >= 3) log_text("LOG: Response code = " + std::to_string(s.status) + "\n");
    record_timing(c, s.p, now);
  } else if (error_code == NGHTTP2_REFUSED_STREAM) {
    // Not processed (RFC 9113 8.7): safe to send again, on this or the next connection.
    ++stats.retried;
    give_back(1);
  } else {
    if (opt_.verbosity >= 2)
      log_text("HTTP/2: stream " + std::to_string(s.id) + " closed with " +
               nghttp2_http2_strerror(error_code) + (s.status ? "" : " before a response") + "\n");
    ++stats.fail_protocol;
    ++stats.completed;
    count_progress();
  }
  s = H2Stream();
  c.h2->free_slots.push_back(&s);
  --c.outstanding;
  if (c.outstanding > 0) {
    arm(c, now);
  } else {
    event::TimerList::disarm(c.timer);
  }
}

int Worker::H2OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* conn) {
  auto* s =
      static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (s && s->p.first_byte == 0) s->p.first_byte = static_cast<Conn*>(conn)->worker->h2_now_;
  return 0;
}

int Worker::H2OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* conn) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* s =
      static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (!s) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  Worker& w = *static_cast<Conn*>(conn)->worker;
  w.stats.head_bytes += namelen + valuelen + 4;  // as the header line would be in HTTP/1.1
  if (n == ":status") {
    int status = 0;
    for (char ch : v) status = status * 10 + (ch - '0');  // nghttp2 checked: three digits
    if (s->status < 200) s->status = status;              // a final status after 1xx ones
  } else if (n == "server" && !w.captured_server_) {
    w.capture_server(v);
  }
  return 0;
}

int Worker::H2OnData(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t*,
                     size_t len, void* conn) {
  auto* s = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
  if (s) s->body += len;
  static_cast<Conn*>(conn)->worker->stats.body_wire_bytes += len;
  return 0;
}

int Worker::H2OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* conn) {
  Conn& c = *static_cast<Conn*>(conn);
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    ++c.worker->stats.h2_rst_stream;
  } else if (frame->hd.type == NGHTTP2_GOAWAY) {
    ++c.worker->stats.h2_goaway;
    c.h2->draining = true;
    if (c.worker->opt_.verbosity >= 2)
      c.worker->log_text(std::string("HTTP/2: GOAWAY ") +
                         nghttp2_http2_strerror(frame->goaway.error_code) + ", last stream " +
                         std::to_string(frame->goaway.last_stream_id) + "\n");
  }
  return 0;
}

int Worker::H2OnFrameSent(nghttp2_session* session, const nghttp2_frame* frame, void* conn) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* s =
      static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (s && s->in_use) s->p.sent = static_cast<Conn*>(conn)->worker->h2_now_;
  return 0;
}

// A request nghttp2 never sent: queued behind the server's stream limit when a GOAWAY came.
// Not a failure; it goes back to the budget for the next connection.
int Worker::H2OnFrameNotSent(nghttp2_session*, const nghttp2_frame* frame, int, void* conn) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  // The stream was never opened, so nghttp2 has no user data for it: find it by its id.
  Conn& c = *static_cast<Conn*>(conn);
  H2Stream* s = nullptr;
  for (int i = 0; i < c.h2->slot_count && !s; ++i) {
    H2Stream& candidate = c.h2->slots[static_cast<size_t>(i)];
    if (candidate.in_use && candidate.id == frame->hd.stream_id) s = &candidate;
  }
  if (!s || s->p.sent) return 0;
  Worker& w = *c.worker;
  ++w.stats.retried;
  w.give_back(1);
  *s = H2Stream();
  c.h2->free_slots.push_back(s);
  if (--c.outstanding == 0) event::TimerList::disarm(c.timer);
  return 0;
}

int Worker::H2OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                            void* conn) {
  auto* s = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
  Conn& c = *static_cast<Conn*>(conn);
  if (s && s->in_use) c.worker->h2_stream_closed(c, *s, error_code);
  return 0;
}

ssize_t Worker::H2ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void* conn) {
  auto& s = *static_cast<H2Stream*>(source->ptr);
  const std::string& body = static_cast<Conn*>(conn)->worker->sh_.target->body;
  const size_t n = std::min(length, body.size() - s.body_sent);
  std::memcpy(buf, body.data() + s.body_sent, n);
  s.body_sent += n;
  if (s.body_sent == body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

int OnNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* c = static_cast<Conn*>(SSL_get_app_data(ssl));
  if (!c) return 0;
  constexpr size_t kKept = 4;
  if (c->tickets.size() >= kKept) {
    SSL_SESSION_free(c->tickets.front());
    c->tickets.erase(c->tickets.begin());
  }
  c->tickets.push_back(session);  // ours now (returning 1 keeps the reference)
  return 1;
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string ensure_nofile(uint64_t needed, std::string& note) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return "";
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur >= needed) return "";
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= needed) {
    lim.rlim_cur = needed;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      note = "raised the open-files limit (RLIMIT_NOFILE) from " + std::to_string(before) + " to " +
             std::to_string(needed);
      return "";
    }
  }
  rlimit raised{needed, needed};
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
    note = "raised the open-files limit (RLIMIT_NOFILE, hard and soft) from " +
           std::to_string(before) + " to " + std::to_string(needed);
    return "";
  }
  return "this run needs about " + std::to_string(needed) +
         " file descriptors but the open-files limit is " + std::to_string(before) +
         " (hard limit " + std::to_string(lim.rlim_max) +
         ") and cannot be raised: " + std::strerror(errno) +
         ". Raise it (ulimit -n, or LimitNOFILE= / limits.conf) or lower -c.";
}

std::string prepare_target(const Options& o, const std::string& url_text, Target& t) {
  t = Target();
  t.url_text = url_text;
  std::string err = parse_url(url_text, t.url);
  if (!err.empty()) return err;
  t.connect_host = t.url.host;
  t.connect_port = t.url.port;
  if (!o.proxy.empty()) {
    if (t.url.tls) return "https through an -X proxy (CONNECT) is not supported";
    Url proxy;
    err = parse_url("http://" + o.proxy + "/", proxy);
    if (!err.empty()) return "bad -X proxy '" + o.proxy + "'";
    t.proxied = true;
    t.connect_host = proxy.host;
    t.connect_port = proxy.port_given ? proxy.port : 80;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(t.connect_port);
  int rc = getaddrinfo(t.connect_host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) return "cannot resolve " + t.connect_host + ": " + gai_strerror(rc);
  std::memcpy(&t.addr, res->ai_addr, res->ai_addrlen);
  t.addr_len = res->ai_addrlen;
  freeaddrinfo(res);
  if (!o.bind_address.empty()) {
    hints.ai_family = t.addr.ss_family;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
    rc = getaddrinfo(o.bind_address.c_str(), "0", &hints, &res);
    if (rc != 0 || !res) return "bad -B address " + o.bind_address + ": " + gai_strerror(rc);
    std::memcpy(&t.bind_addr, res->ai_addr, res->ai_addrlen);
    t.bind_len = res->ai_addrlen;
    freeaddrinfo(res);
  }
  std::string body;
  const std::string& file = !o.post_file.empty() ? o.post_file : o.put_file;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return "cannot read " + file + ": " + std::strerror(errno);
    std::ostringstream ss;
    ss << in.rdbuf();
    body = ss.str();
  }
  t.body_size = body.size();
  t.request = build_request(o, t.url, body, t.proxied);
  if (o.h2) t.h2_headers = build_h2_headers(o, t.url, body.size());
  t.body = std::move(body);
  if (t.url.tls) {
    OPENSSL_init_ssl(0, nullptr);
    t.ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (!t.ssl_ctx) return "cannot create a TLS context";
    SSL_CTX_set_verify(t.ssl_ctx, SSL_VERIFY_NONE,
                       nullptr);  // a load generator, as ab: no verification
    SSL_CTX_set_mode(t.ssl_ctx,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char kAlpnH2[] = {2, 'h', '2'};
    static const unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    if (o.h2) {
      SSL_CTX_set_alpn_protos(t.ssl_ctx, kAlpnH2, sizeof kAlpnH2);
    } else if (!o.http10) {
      SSL_CTX_set_alpn_protos(t.ssl_ctx, kAlpnHttp11, sizeof kAlpnHttp11);
    }
    if (o.tls_resume) {
      // Each connection keeps the last ticket it was given and offers it when it reconnects.
      SSL_CTX_set_session_cache_mode(t.ssl_ctx,
                                     SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
      SSL_CTX_sess_set_new_cb(t.ssl_ctx, &OnNewSession);
    }
    in6_addr a6;
    in_addr a4;
    if (!t.url.ipv6_literal && inet_pton(AF_INET, t.url.host.c_str(), &a4) != 1 &&
        inet_pton(AF_INET6, t.url.host.c_str(), &a6) != 1) {
      t.sni = t.url.host;
    }
  }
  return "";
}

void release_target(Target& t) {
  if (t.ssl_ctx) SSL_CTX_free(t.ssl_ctx);
  t.ssl_ctx = nullptr;
}

namespace {

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

double Seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

}  // namespace

void run_load(const Options& o, const Target& t, bool progress, RunOutput& out) {
  Shared sh;
  sh.options = &o;
  sh.target = &t;
  sh.pipeline = o.pipeline;
  sh.request_len = t.request.size();
  sh.pipelined.reserve(sh.request_len * static_cast<size_t>(o.pipeline + 1));
  for (int i = 0; i <= o.pipeline; ++i) sh.pipelined += t.request;
  sh.head_request = o.effective_method() == "HEAD";
  sh.timeout_ms = static_cast<int64_t>(o.timeout_s * 1000.0);
  if (sh.timeout_ms < 1) sh.timeout_ms = 1;
  sh.budget.store(o.unlimited_requests() ? INT64_MAX / 2 : o.requests);

  int workers = o.workers > 0 ? o.workers : UsableCores();
  workers = std::max(1, std::min(workers, o.concurrency));
  const bool gnuplot = !o.gnuplot_file.empty();

  rusage ru0{};
  getrusage(RUSAGE_SELF, &ru0);
  const int64_t start = NowNs();
  if (o.time_limit_s > 0) sh.deadline_ns = start + static_cast<int64_t>(o.time_limit_s * 1e9);

  std::vector<std::unique_ptr<Worker>> pool;
  for (int i = 0; i < workers; ++i) {
    int conns = o.concurrency / workers + (i < o.concurrency % workers ? 1 : 0);
    double rate = o.rate > 0 ? o.rate * conns / o.concurrency : 0;
    pool.push_back(std::make_unique<Worker>(sh, conns, rate, gnuplot));
  }
  std::atomic<int> running{workers};
  std::vector<std::thread> threads;
  for (auto& w : pool) {
    threads.emplace_back([&running, worker = w.get()] {
      worker->run();
      running.fetch_sub(1);
    });
  }

  // The main thread watches the clock, SIGINT and progress.
  const bool heartbeat = progress && !o.unlimited_requests() && o.requests >= 150;
  const uint64_t step =
      heartbeat ? std::max<uint64_t>(100, static_cast<uint64_t>(o.requests) / 10) : 0;
  uint64_t next_report = step;
  while (running.load() > 0) {
    timespec ts{0, 20'000'000};
    nanosleep(&ts, nullptr);
    if (g_interrupted.load(std::memory_order_relaxed)) {
      sh.stop.store(true);
      out.info.interrupted = true;
    }
    if (sh.deadline_ns && NowNs() >= sh.deadline_ns) sh.stop.store(true);
    if (heartbeat) {
      uint64_t done = sh.progress.load(std::memory_order_relaxed);
      while (next_report && done >= next_report &&
             next_report < static_cast<uint64_t>(o.requests)) {
        std::fprintf(stderr, "Completed %llu requests\n",
                     static_cast<unsigned long long>(next_report));
        next_report += step;
      }
    }
  }
  for (auto& th : threads) th.join();
  const int64_t end = NowNs();
  rusage ru1{};
  getrusage(RUSAGE_SELF, &ru1);
  if (heartbeat)
    std::fprintf(stderr, "Finished %llu requests\n",
                 static_cast<unsigned long long>(sh.progress.load()));

  RunStats& s = out.stats;
  for (auto& w : pool) {
    s.merge(w->stats);
    if (gnuplot) out.records.insert(out.records.end(), w->records.begin(), w->records.end());
  }
  RunInfo& info = out.info;
  info.url = t.url_text;
  info.server_software = sh.server_software;
  info.hostname = t.url.host;
  info.port = t.url.port;
  info.path = t.url.path;
  info.tls_protocol = sh.tls_protocol;
  info.tls_server_name = t.sni;
  info.protocol = o.h2 ? (t.url.tls ? "h2" : "h2c") : (o.http10 ? "HTTP/1.0" : "HTTP/1.1");
  info.streams = o.h2 ? o.streams : 1;
  info.tls_resume = o.tls_resume;
  info.document_length = std::max<int64_t>(0, sh.document_length.load());
  info.concurrency = o.concurrency;
  info.elapsed_s = static_cast<double>(end - start) / 1e9;
  info.keep_alive = o.keep_alive;
  info.strict_length = o.strict_length && !o.accept_variable_length;
  info.head = sh.head_request;
  info.posting = t.body_size > 0 || !o.post_file.empty() || !o.put_file.empty();
  info.no_median_sd = o.no_median_sd;
  info.no_percentiles = o.no_percentiles;
  info.workers = workers;
  info.pipeline = o.pipeline;
  info.rate = o.rate;
  info.time_limited = o.time_limit_s > 0;
  info.cpu_user_s = Seconds(ru1.ru_utime) - Seconds(ru0.ru_utime);
  info.cpu_system_s = Seconds(ru1.ru_stime) - Seconds(ru0.ru_stime);
  s.body_bytes_sent = t.body_size * s.completed;
}

}  // namespace peregrine::loadgen
