#include "server/worker.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "client/http_client.h"
#include "core/log.h"
#include "event/deferred.h"
#include "http/http_date.h"
#include "server/connection.h"
#include "server/http2_connection.h"
#include "upstream/operator_state.h"

namespace peregrine::server {

// The only way in from other threads: a locked slot and an eventfd to wake the loop.
class Worker::Mailbox final : public event::Pollable {
 public:
  explicit Mailbox(Worker& worker) : worker_(worker), fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Mailbox() { ::close(fd_); }
  int fd() const { return fd_; }
  void on_ready(uint32_t) override {
    uint64_t ignored;
    while (::read(fd_, &ignored, sizeof ignored) > 0) {
    }
    worker_.handle_mail();
  }
  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(fd_, &one, sizeof one);
    (void)ignored;
  }

  std::mutex mutex;
  std::shared_ptr<const config::Config> config;     // guarded by mutex
  int stop = 0;                                     // 1 graceful, 2 now; guarded by mutex
  bool hand_over = false;                           // with stop = 1; guarded by mutex
  bool operator_states = false;                     // guarded by mutex
  std::vector<peregrine::Worker::Function> posted;  // guarded by mutex
  // Set with stop = 2: the loop looks at it between events, without reading the mail.
  std::atomic<bool> stop_now{false};

 private:
  Worker& worker_;
  int fd_;
};

BufferPool::~BufferPool() {
  for (char* b : free_) std::free(b);
}

char* BufferPool::acquire() {
  ++in_use_;
  if (!free_.empty()) {
    char* b = free_.back();
    free_.pop_back();
    return b;
  }
  char* b = static_cast<char*>(std::malloc(size_));
  if (!b) std::abort();
  return b;
}

void BufferPool::release(char* buffer) {
  --in_use_;
  if (free_.size() < kMaxFree) {
    free_.push_back(buffer);
  } else {
    std::free(buffer);
  }
}

void Listener::on_ready(uint32_t) {
  worker_.accept_from(*this);
}

void Listener::on_accepted(int fd, int error) {
  worker_.accepted(*this, fd, error);
}

void Listener::close() {
  if (fd_ < 0) return;
  worker_.poller().remove(fd_);
  ::close(fd_);
  fd_ = -1;
}

Worker::Worker(int id, std::vector<int> listen_fds, std::shared_ptr<const config::Config> config,
               const HandlerRegistry& registry, AccessLogWriter& log_writer, int total_workers,
               event::Backend backend)
    : id_(id),
      poller_(event::make_poller(backend, config->batch_wait_us)),
      registry_(registry),
      log_writer_(log_writer),
      total_workers_(total_workers),
      mailbox_(std::make_unique<Mailbox>(*this)),
      app_(this, id, total_workers, clock_),
      // Room for the largest head the parser accepts plus some body bytes behind it. A reload
      // that raises max_header_bytes takes effect for heads up to this size (restart for more).
      buffers_(config->limits.max_header_bytes + 4096),
      metrics_(metrics::registry().add_worker()) {
  for (size_t i = 0; i < listen_fds.size(); ++i) {
    ListenerOptions options;
    if (i < config->listen.size())
      options = {config->listen[i].tls, config->listen[i].http2, config->listen[i].proxy_protocol,
                 config->listen[i].admin};
    listeners_.push_back(std::make_unique<Listener>(*this, listen_fds[i], options));
  }
  clock_.update();
  metrics::Bind bind(metrics_);   // the table's blocks of figures are this worker's
  AppWorker::Scope scope(&app_);  // application factories may set up this worker's timers
  routes_ = RouteTable::build(std::move(config), env(), registry_, log_writer_, &error_);
  if (!routes_) return;
  scratch_output_.bytes().reserve(64 * 1024);
  refresh_date();
  apply_limits();
  operator_subscription_ =
      upstream::operator_states().subscribe([this] { post_operator_states(); });
}

Worker::~Worker() {
  if (operator_subscription_ >= 0) upstream::operator_states().unsubscribe(operator_subscription_);
  if (routes_) stop_now();
  free_closed();
  for (auto& l : listeners_) l->close();
  // The route table's upstream groups hand their pooled connections to dispose_later(): free
  // them here, on this (possibly different) thread, before the poller goes away.
  routes_ = nullptr;
  event::dispose_pending();
}

void Worker::apply_limits() {
  const config::Limits& l = limits();
  header_timers.set_duration(l.header_timeout.count());
  keepalive_timers.set_duration(l.keepalive_timeout.count());
  body_timers.set_duration(l.body_timeout.count());
  send_timers.set_duration(l.send_timeout.count());
  linger_timers.set_duration(2000);
  max_connections_ = (l.max_connections + total_workers_ - 1) / total_workers_;
}

void Worker::refresh_date() {
  char date[32];
  size_t n = http::format_http_date(clock_.wall_seconds, date);
  date_second_ = clock_.wall_seconds;
  date_server_.assign("Date: ").append(date, n).append("\r\n");
  date_length_ = n;
  const std::string& server = routes_->config().server_header;
  if (!server.empty()) date_server_.append("Server: ");
  server_at_ = date_server_.size();
  server_length_ = server.size();
  if (!server.empty()) date_server_.append(server).append("\r\n");
}

void Worker::post_config(std::shared_ptr<const config::Config> config) {
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->config = std::move(config);
  }
  mailbox_->wake();
}

void Worker::post_stop(bool graceful, bool hand_over) {
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->stop = std::max(mailbox_->stop, graceful ? 1 : 2);
    if (graceful && hand_over) mailbox_->hand_over = true;
  }
  if (!graceful) mailbox_->stop_now.store(true, std::memory_order_relaxed);
  mailbox_->wake();
}

void Worker::post_operator_states() {
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->operator_states = true;
  }
  mailbox_->wake();
}

void Worker::post_function(peregrine::Worker::Function f) {
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->posted.push_back(std::move(f));
  }
  mailbox_->wake();
}

void Worker::handle_mail() {
  std::shared_ptr<const config::Config> config;
  int stop;
  bool hand_over;
  bool operator_states;
  std::vector<peregrine::Worker::Function> posted;
  {
    std::lock_guard lock(mailbox_->mutex);
    config = std::move(mailbox_->config);
    stop = mailbox_->stop;
    hand_over = mailbox_->hand_over;
    operator_states = std::exchange(mailbox_->operator_states, false);
    posted.swap(mailbox_->posted);
  }
  if (operator_states) routes_->apply_operator_states();
  for (auto& f : posted) f();
  if (config) {
    std::string error;
    Ref<RouteTable> table = RouteTable::build(config, env(), registry_, log_writer_, &error);
    if (table) {
      upstream::operator_states().retain(*config);  // servers the reload removed are forgotten
      routes_->flush_logs();
      routes_ = table;  // connections mid-request hold the old table until they finish
      apply_limits();
      refresh_date();
    } else {
      LOG_ERROR("worker %d: new configuration not applied: %s", id_, error.c_str());
    }
  }
  if (stop == 2) {
    stopping_ = true;
  } else if (stop == 1 && !draining_) {
    start_drain(hand_over);
  }
}

void Worker::accept_from(Listener& listener) {
  // Level-triggered listener, bounded batch: a flood of connects cannot starve the others.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr;
    socklen_t len = sizeof addr;
    int fd = accept4(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      accept_failed(errno);
      return;
    }
    adopt(listener, fd, reinterpret_cast<sockaddr*>(&addr), len);
  }
}

void Worker::accepted(Listener& listener, int fd, int error) {
  if (fd < 0) {
    accept_failed(error);
    return;
  }
  // A multishot accept gives no address (each completion would overwrite the last one's).
  sockaddr_storage addr;
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);  // ENOTCONN: the client has already reset it
    return;
  }
  adopt(listener, fd, reinterpret_cast<sockaddr*>(&addr), len);
}

void Worker::accept_failed(int error) {
  if (error == EMFILE || error == ENFILE) {
    if (++refused_connections_ % 1000 == 1)
      LOG_ERROR("worker %d: out of file descriptors (%s); raise the limit (ulimit -n)", id_,
                std::strerror(error));
  }
}

void Worker::adopt(Listener& listener, int fd, const sockaddr* peer, socklen_t peer_length) {
  // Draining, the listeners are closed; a connection still comes when the poller had accepted
  // it before (io_uring, in the batch that began the drain). It is served, and then closed as
  // every draining connection is: the client asked before we stopped.
  if (connection_count_ >= max_connections_) {
    refuse(fd);
    return;
  }
  auto* connection = new Connection(*this, fd, peer, peer_length, listener.options());
  connection->next = connections_;
  if (connections_) connections_->prev = connection;
  connections_ = connection;
  ++connection_count_;
  metrics_.connections_accepted.add();
  connection->start();
}

void Worker::refuse(int fd) {
  // Over the connection limit: answer 503 and close, rather than leave the client hanging in
  // the backlog. Read what arrived first so the close does not turn into a reset.
  static constexpr std::string_view kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
      "Content-Type: text/plain\r\nContent-Length: 20\r\n\r\nserver at capacity.\n";
  char sink[4096];
  ssize_t ignored = ::read(fd, sink, sizeof sink);
  ignored = ::send(fd, kBusy.data(), kBusy.size(), MSG_NOSIGNAL);
  (void)ignored;
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
  if (++refused_connections_ % 1000 == 1)
    LOG_WARN("worker %d: at max_connections (%zu), refusing new connections", id_,
             max_connections_);
}

void Worker::close_connection(Connection* connection) {
  if (connection->prev)
    connection->prev->next = connection->next;
  else
    connections_ = connection->next;
  if (connection->next) connection->next->prev = connection->prev;
  connection->prev = connection->next = nullptr;
  --connection_count_;
  closed_.push_back(connection);
}

void Worker::start_http2(int fd, const sockaddr* peer, socklen_t peer_len,
                         std::string_view already_read, const ListenerOptions& listener,
                         std::unique_ptr<tls::Stream> tls, const sockaddr* socket_peer,
                         socklen_t socket_peer_len) {
  auto* connection = new Http2Connection(*this, fd, peer, peer_len, listener, std::move(tls));
  if (socket_peer_len) connection->set_socket_peer(socket_peer, socket_peer_len);
  connection->next = http2_connections_;
  if (http2_connections_) http2_connections_->prev = connection;
  http2_connections_ = connection;
  ++connection_count_;
  connection->start(already_read);
  // Handing over, the first GOAWAY until every connection gets its final one.
  if (draining_ && !connection->closed()) connection->drain(handing_over_ && final_goaway_ms_);
}

void Worker::close_http2(Http2Connection* connection) {
  if (connection->prev)
    connection->prev->next = connection->next;
  else
    http2_connections_ = connection->next;
  if (connection->next) connection->next->prev = connection->prev;
  connection->prev = connection->next = nullptr;
  --connection_count_;
  closed_http2_.push_back(connection);
}

void Worker::free_closed() {
  for (Connection* c : closed_) delete c;
  closed_.clear();
  for (Http2Connection* c : closed_http2_) delete c;
  closed_http2_.clear();
}

void Worker::run_timers() {
  const int64_t now = clock_.monotonic_ms;
  for (event::TimerList* list : {&header_timers, &keepalive_timers, &body_timers, &send_timers,
                                 &linger_timers, &hand_over_timers}) {
    while (event::TimerNode* node = list->pop_expired(now)) node->owner->on_timeout();
  }
  upstream_timers.run(now);
  app_.run(now);
  if (final_goaway_ms_ && now >= final_goaway_ms_) {
    final_goaway_ms_ = 0;
    for (Http2Connection* c = http2_connections_; c;) {
      Http2Connection* next = c->next;
      c->drain();  // the last stream id: later streams are refused, retried elsewhere
      c = next;
    }
  }
}

void Worker::start_drain(bool hand_over) {
  draining_ = true;
  handing_over_ = hand_over;
  drain_deadline_ms_ = clock_.monotonic_ms + limits().shutdown_timeout.count();
  if (hand_over) final_goaway_ms_ = clock_.monotonic_ms + kHandOverIdleGrace;
  for (auto& l : listeners_) l->close();
  for (Connection* c = connections_; c;) {
    Connection* next = c->next;
    c->drain();
    c = next;
  }
  for (Http2Connection* c = http2_connections_; c;) {
    Http2Connection* next = c->next;
    c->drain(hand_over);  // GOAWAY; streams in flight finish
    c = next;
  }
}

void Worker::stop_now() {
  while (connections_) connections_->close_now();
  while (http2_connections_) http2_connections_->close_now();
  if (routes_) routes_->flush_logs();
}

void Worker::sample_connections() {
  int64_t phases[3] = {0, 0, 0};
  int64_t http1 = 0;
  for (Connection* c = connections_; c; c = c->next) {
    ++http1;
    ++phases[static_cast<int>(c->phase())];
  }
  int64_t http2 = 0;
  for (Http2Connection* c = http2_connections_; c; c = c->next) {
    ++http2;
    ++phases[c->busy() ? static_cast<int>(Connection::Phase::kWriting)
                       : static_cast<int>(Connection::Phase::kIdle)];
  }
  metrics_.connections_open[0].set(http1);
  metrics_.connections_open[1].set(http2);
  metrics_.connections_reading.set(phases[static_cast<int>(Connection::Phase::kReading)]);
  metrics_.connections_writing.set(phases[static_cast<int>(Connection::Phase::kWriting)]);
  metrics_.connections_idle.set(phases[static_cast<int>(Connection::Phase::kIdle)]);
  metrics_.read_buffers_in_use.set(static_cast<int64_t>(buffers_.in_use()));
  metrics_.read_buffers_spare.set(static_cast<int64_t>(buffers_.spare()));
}

void Worker::run() {
  metrics::Bind bind(metrics_);
  AppWorker::Scope scope(&app_);
  client::WorkerScope client_scope(env());  // HttpClient calls, ended before the loop's end
  // io_uring accepts for us. Else: a unix-socket listener is one socket shared by every worker
  // (TCP ones are per worker, SO_REUSEPORT): without kExclusive each connection would wake them
  // all. (The kernel's accepts wait exclusively too.)
  const uint32_t listening =
      poller_->accepts() ? uint32_t{event::kAccept} : event::kReadable | event::kExclusive;
  for (auto& l : listeners_) {
    if (!poller_->add(l->fd(), listening, l.get()))
      LOG_ERROR("worker %d: cannot watch a listening socket: %s", id_, std::strerror(errno));
  }
  poller_->add(mailbox_->fd(), event::kReadable, mailbox_.get());
  constexpr int kEvents = 512;
  event::ReadyEvent events[kEvents];
  while (!stopping_) {
    int64_t timeout = 1000;  // at least once a second: the Date header and log flushes
    for (event::TimerList* list : {&header_timers, &keepalive_timers, &body_timers, &send_timers,
                                   &linger_timers, &hand_over_timers}) {
      int64_t next = list->next_in(clock_.monotonic_ms);
      if (next >= 0 && next < timeout) timeout = next;
    }
    if (final_goaway_ms_)
      timeout =
          std::min<int64_t>(timeout, std::max<int64_t>(0, final_goaway_ms_ - clock_.monotonic_ms));
    int64_t next = upstream_timers.next_in(clock_.monotonic_ms);
    if (next >= 0 && next < timeout) timeout = next;
    next = app_.next_in(clock_.monotonic_ms);
    if (next >= 0 && next < timeout) timeout = next;
    int n = poller_->wait(static_cast<int>(timeout), events, kEvents);
    clock_.update();
    if (clock_.wall_seconds != date_second_) {
      refresh_date();
      routes_->flush_logs();
      // Walking every connection touches one cache line each (a millisecond a second at 10,000
      // idle ones): only worth it when an admin listener can show the figures.
      if constexpr (metrics::kEnabled)
        if (routes_->config().admin.enabled) sample_connections();
    }
    // A stop (SIGTERM) ends the batch at once: stop_now() closes what the rest would have
    // served, and a batch of long reads (fast back ends feeding compressed streams) held a stop
    // for more than ten seconds on a loaded machine. The flag, not the mail: the mailbox's event
    // may come last in a batch of hundreds.
    for (int i = 0; i < n; ++i) {
      if (!stopping_ && mailbox_->stop_now.load(std::memory_order_relaxed)) stopping_ = true;
      if (stopping_) {
        events[i].drop();
      } else {
        events[i].dispatch();
      }
    }
    if (stopping_ || mailbox_->stop_now.load(std::memory_order_relaxed)) break;
    run_timers();
    event::dispose_pending();
    free_closed();
    if (draining_ && (connection_count_ == 0 || clock_.monotonic_ms >= drain_deadline_ms_)) break;
  }
  stop_now();
  // The connections just closed cancelled their exchanges: let the application see it (waiting
  // coroutines resume cancelled and free their frames) before the worker goes. Bounded: an
  // application that keeps scheduling after(0) work cannot hold the stop.
  for (int i = 0; i < 8 && app_.next_in(clock_.monotonic_ms) == 0; ++i)
    app_.run(clock_.monotonic_ms);
  event::dispose_pending();
  free_closed();
  sample_connections();
}

}  // namespace peregrine::server
