#include "upstream/group_runtime.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/log.h"
#include "event/deferred.h"

namespace peregrine::upstream {

int connect_to(const config::UpstreamServer& server) {
  const int family = server.addr.ss_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (family != AF_UNIX) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server.addr), server.addr_len) == 0 ||
      errno == EINPROGRESS)
    return fd;
  // A unix socket whose listen backlog is full answers EAGAIN: report it like a refusal (the
  // caller's queue, not a failure count, is what absorbs a busy php-fpm).
  int saved = errno;
  ::close(fd);
  errno = saved;
  return -1;
}

int connect_result(int fd) {
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

// True when the socket holds no byte and no end of file right now. A readable report can be
// stale: the io_uring backend reports readiness as it was when a segment arrived (epoll checks
// again when it reports), so the last exchange may have read those bytes already.
static bool nothing_to_read(int fd) {
  char byte;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
         (errno == EAGAIN || errno == EWOULDBLOCK);
}

void UpstreamConnection::on_ready(uint32_t readiness) {
  if (fd_ < 0) return;  // closed earlier in this batch
  if (idle_) {
    // Writability alone means nothing here; input or a hang-up while idle means the back end
    // closed it (or broke the protocol). Closing on a stale report instead dropped a kept
    // connection after about every other reuse on io_uring.
    if ((readiness & event::kHangup) || ((readiness & event::kIn) && !nothing_to_read(fd_)))
      group_->close(this);
    return;
  }
  if (user_) user_->on_ready(readiness);
}

bool UpstreamConnection::send_with_wait(std::string_view bytes) {
  if (sending_ || tls_ || fd_ < 0 || !group_->poller_.send(fd_, bytes)) return false;
  sending_ = true;
  return true;
}

void UpstreamConnection::on_sent(bool ok) {
  sending_ = false;
  if (user_) user_->on_sent(ok);
}

void UpstreamConnection::watch_writable(bool on) {
  // Not with a send in flight: a modified registration no longer hears of its send's end.
  if (on == writable_watched_ || fd_ < 0 || sending_) return;
  uint32_t interest =
      event::kReadable | event::kEdgeTriggered | (on ? uint32_t{event::kWritable} : 0u);
  if (group_->poller_.modify(fd_, interest, this)) writable_watched_ = on;
}

void UpstreamConnection::on_timeout() {
  if (fd_ >= 0 && idle_) group_->close(this);
}

void Waiter::on_timeout() {
  if (queued_in) queued_in->group_counters_->queue_timeouts.add();
  if (queued_in) queued_in->cancel(*this);
  on_queue_timeout();
}

GroupRuntime::GroupRuntime(const config::UpstreamGroup& config, event::Poller& poller,
                           event::TimerSet& timers, const Clock& clock, int workers)
    : config_(config),
      poller_(poller),
      timers_(timers),
      clock_(clock),
      upstream_(
          [&] {
            std::vector<ServerSpec> specs;
            for (const config::UpstreamServer& s : config.servers)
              specs.push_back({s.address, static_cast<int>(s.weight), s.backup,
                               static_cast<int>(config.max_fails), config.fail_timeout.count()});
            return specs;
          }(),
          [&] {
            switch (config.balance) {
              case config::Balance::kLeastConn:
                return Strategy::kLeastConnections;
              case config::Balance::kIpHash:
                return Strategy::kIpHash;
              case config::Balance::kHash:
                return Strategy::kConsistentHash;
              case config::Balance::kRoundRobin:
                break;
            }
            return Strategy::kRoundRobin;
          }()),
      slots_(config.servers.size()),
      group_counters_(metrics::local().upstream_group(config.name)) {
  for (const config::UpstreamServer& s : config.servers)
    counters_.push_back(metrics::local().upstream_server(config.name, s.address, s.backup));
  const uint32_t share = static_cast<uint32_t>(workers > 0 ? workers : 1);
  for (size_t i = 0; i < slots_.size(); ++i) {
    uint32_t cap = config.servers[i].max_conns;
    // Rounded down, so that the workers' shares never add up to more than the back end has:
    // an over-committed php-fpm leaves a connection waiting for a child that another worker's
    // idle connection holds.
    slots_[i].cap = cap == 0 ? 0 : std::max<uint32_t>(1, cap / share);
    if (cap != 0 && cap < share)
      LOG_WARN("upstream %s: server %s has max_conns = %u for %u workers; each worker uses 1",
               config.name.c_str(), config.servers[i].address.c_str(), cap, share);
    slots_[i].idle_limit = config.keepalive;
    if (config.keepalive_leaves_children && cap != 0) {
      // A FastCGI pool's children are shared (nginx, cron jobs, another group): all workers
      // together keep idle at most max_conns less a quarter (at least one), so another client
      // finds a free child at once rather than after keepalive_timeout.
      const uint32_t reserve = std::max<uint32_t>(1, cap / 4);
      slots_[i].idle_limit = cap > reserve ? (cap - reserve) / share : 0;
    }
  }
  if (config.tls.enabled) {
    // Per worker: the context's session callback and the caches it fills need no locks.
    tls::ClientOptions options;
    options.verify = config.tls.verify;
    options.ca_file = config.tls.ca_file;
    options.certificate = config.tls.certificate;
    options.key = config.tls.key;
    std::string error;
    tls_ = tls::ClientContext::make(options, &error);
    if (!tls_)  // checked at load; a file changed since then
      LOG_ERROR("upstream %s: TLS to the servers is unavailable: %s", config.name.c_str(),
                error.c_str());
    sessions_ = std::make_unique<tls::SessionCache[]>(config.servers.size());
  }
  operator_.assign(config.servers.size(), OperatorState::kNone);
  // The figures outlive runtimes: a server forgotten by a reload and added back starts afresh.
  for (metrics::UpstreamServerCounters* c : counters_) c->operator_state.set(0);
  apply_operator_states();
}

void GroupRuntime::apply_operator_states() {
  // Taken before the reads: a set() during them moves the version again and is applied next time.
  operator_version_ = operator_states().version();
  for (size_t i = 0; i < operator_.size(); ++i) {
    const OperatorState state = operator_states().get(config_.name, config_.servers[i].address);
    if (state == operator_[i]) continue;
    operator_[i] = state;
    upstream_.group().set_operator_out(i, state != OperatorState::kNone);
    counters_[i]->operator_state.set(static_cast<int64_t>(state));
    if (state == OperatorState::kDisabled)
      while (slots_[i].idle) close(slots_[i].idle);
  }
}

GroupRuntime::~GroupRuntime() {
  report_suppressed_lines(true);  // a reload or a stop: no later line will say it
  for (Slots& s : slots_)
    while (s.idle) close(s.idle);
  while (queue_head_) cancel(*queue_head_);
}

GroupRuntime::Acquire GroupRuntime::acquire(const PickContext& context, const TriedSet& tried,
                                            Waiter& waiter, size_t* server, bool first_in_line) {
  if (operator_states().version() != operator_version_) apply_operator_states();
  // Servers at their cap are skipped like tried ones; if every up server is full, wait.
  TriedSet skip = tried;
  bool any_full = false;
  if (context.preferred >= 0 && static_cast<size_t>(context.preferred) < slots_.size()) {
    const size_t i = static_cast<size_t>(context.preferred);
    Slots& s = slots_[i];
    if (!tried.contains(i) && upstream_.group().is_up(i, context.now_ms) &&
        (s.cap == 0 || s.in_use < s.cap)) {
      ++s.in_use;
      upstream_.group().on_connect(i);
      *server = i;
      return Acquire::kReady;
    }
  }
  for (;;) {
    std::optional<size_t> pick = upstream_.pick_excluding(context, skip);
    if (!pick) break;
    Slots& s = slots_[*pick];
    if (s.cap == 0 || s.in_use < s.cap) {
      ++s.in_use;
      counters_[*pick]->requests.add();
      counters_[*pick]->in_flight.add(1);
      upstream_.group().on_connect(*pick);
      *server = *pick;
      return Acquire::kReady;
    }
    any_full = true;
    skip.insert(*pick);
  }
  if (!any_full) return Acquire::kUnavailable;
  if (queued_ >= config_.queue) return Acquire::kQueueFull;
  waiter.queued_in = this;
  Waiter* prev = first_in_line ? nullptr : queue_tail_;
  Waiter* next = first_in_line ? queue_head_ : nullptr;
  waiter.queue_prev = prev;
  waiter.queue_next = next;
  (prev ? prev->queue_next : queue_head_) = &waiter;
  (next ? next->queue_prev : queue_tail_) = &waiter;
  ++queued_;
  group_counters_->queue_waits.add();
  group_counters_->queue_length.add(1);
  timers_.arm(waiter.queue_timer, config_.queue_timeout.count(), clock_.monotonic_ms);
  return Acquire::kQueued;
}

void GroupRuntime::release(size_t server) {
  Slots& s = slots_[server];
  if (s.in_use > 0) {
    --s.in_use;
    counters_[server]->in_flight.add(-1);
  }
  upstream_.group().on_release(server);
  // Wake waiters in order until one takes the slot: the first may not be able to use this
  // server (a retry that already tried it) and then queues again.
  for (size_t tries = queued_; tries > 0 && queue_head_; --tries) {
    Waiter* first = queue_head_;
    cancel(*first);
    first->on_slot_ready();
    if (s.cap == 0 || s.in_use >= s.cap) break;  // taken (or nothing was limited)
  }
}

void GroupRuntime::cancel(Waiter& waiter, bool keep_deadline) {
  if (waiter.queued_in != this) return;
  if (!keep_deadline) event::TimerList::disarm(waiter.queue_timer);
  if (waiter.queue_prev)
    waiter.queue_prev->queue_next = waiter.queue_next;
  else
    queue_head_ = waiter.queue_next;
  if (waiter.queue_next)
    waiter.queue_next->queue_prev = waiter.queue_prev;
  else
    queue_tail_ = waiter.queue_prev;
  waiter.queue_prev = waiter.queue_next = nullptr;
  waiter.queued_in = nullptr;
  --queued_;
  group_counters_->queue_length.add(-1);
}

void GroupRuntime::unlink_idle(UpstreamConnection* c) {
  Slots& s = slots_[c->server_];
  if (c->prev_)
    c->prev_->next_ = c->next_;
  else
    s.idle = c->next_;
  if (c->next_) c->next_->prev_ = c->prev_;
  c->prev_ = c->next_ = nullptr;
  c->idle_ = false;
  --s.idle_count;
  counters_[c->server_]->idle.add(-1);
  event::TimerList::disarm(c->idle_timer_);
}

UpstreamConnection* GroupRuntime::take_idle(size_t server, event::Pollable& user) {
  UpstreamConnection* c = slots_[server].idle;
  if (!c) return nullptr;
  unlink_idle(c);
  c->user_ = &user;
  counters_[server]->connections_reused.add();
  return c;
}

std::unique_ptr<tls::Stream> GroupRuntime::open_tls(int fd, size_t server) {
  if (!tls_) return nullptr;
  return tls_->open(fd, config_.tls.server_name, &sessions_[server]);
}

UpstreamConnection* GroupRuntime::open(size_t server, event::Pollable& user) {
  std::unique_ptr<tls::Stream> stream;
  if (config_.tls.enabled && !tls_) {
    errno = EPROTO;  // the context failed to build (logged then)
    return nullptr;
  }
  int fd = connect_to(config_.servers[server]);
  if (fd < 0) return nullptr;
  if (tls_ && !(stream = open_tls(fd, server))) {
    ::close(fd);
    errno = ENOMEM;
    return nullptr;
  }
  auto* c = new UpstreamConnection;
  c->group_ = this;
  c->fd_ = fd;
  c->tls_ = std::move(stream);
  c->server_ = server;
  c->user_ = &user;
  c->idle_timer_.owner = c;
  if (!poller_.add(fd, event::kReadable | event::kWritable | event::kEdgeTriggered, c)) {
    int saved = errno;
    ::close(fd);
    delete c;
    errno = saved;
    return nullptr;
  }
  counters_[server]->connections_opened.add();
  return c;
}

void GroupRuntime::hand_over(UpstreamConnection* c, event::Pollable& user) {
  ++c->uses_;
  c->user_ = &user;
  counters_[c->server_]->connections_reused.add();
}

void GroupRuntime::put_idle(UpstreamConnection* c) {
  Slots& s = slots_[c->server_];
  ++c->uses_;
  // Bytes nobody asked for (decrypted, or read ahead and not yet decrypted): the back end broke
  // the protocol, as with input on an idle plain connection.
  if (c->tls_ && SSL_has_pending(c->tls_->ssl()) == 1) {
    close(c);
    return;
  }
  // An idle TLS connection keeps no record buffers (some 34 KB each): OpenSSL allocates them
  // again when the connection is next used.
  if (c->tls_) SSL_free_buffers(c->tls_->ssl());
  if (c->sending_) {  // answered before its request was all out: the back end broke the protocol
    close(c);
    return;
  }
  // With a cap, idle connections count against it too: a php-fpm child serves one connection
  // at a time, so an idle FCGI_KEEP_CONN connection holds a child.
  if (s.idle_count >= s.idle_limit || c->uses_ >= config_.keepalive_requests ||
      operator_[c->server_] == OperatorState::kDisabled ||
      (s.cap != 0 && s.idle_count + s.in_use > s.cap)) {
    close(c);
    return;
  }
  c->user_ = nullptr;
  c->idle_ = true;
  c->idle_since_ms_ = clock_.monotonic_ms;
  c->next_ = s.idle;
  c->prev_ = nullptr;
  if (s.idle) s.idle->prev_ = c;
  s.idle = c;
  ++s.idle_count;
  counters_[c->server_]->idle.add(1);
  timers_.arm(c->idle_timer_, config_.keepalive_timeout.count(), clock_.monotonic_ms);
}

void GroupRuntime::close(UpstreamConnection* c) {
  if (c->fd_ < 0) return;
  if (c->tls_) {
    if (c->idle_) {
      c->tls_->shutdown();  // a clean end: close_notify
    } else if (c->tls_->handshake_done()) {
      // Freed without a close_notify of ours, OpenSSL would mark the session not resumable,
      // and it is the one the server's cache holds: a back end that closes after each response
      // (or a reset) would then cost a full handshake on every new connection.
      SSL_set_shutdown(c->tls_->ssl(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    c->tls_.reset();  // before the descriptor number can be reused; frees the session now
  }
  if (c->idle_) unlink_idle(c);
  event::TimerList::disarm(c->idle_timer_);
  poller_.close(c->fd_);  // leaves the poller too (io_uring: its poll is cancelled)
  c->fd_ = -1;
  c->user_ = nullptr;
  event::dispose_later(c);
}

void GroupRuntime::report_failure(size_t server, const char* what) {
  // A lone server is never taken out (as in nginx): refusing every request for fail_timeout
  // would only turn a blip into an outage, since there is nowhere else to go.
  if (config_.servers.size() == 1) return;
  if (upstream_.group().report_failure(server, clock_.monotonic_ms)) {
    counters_[server]->down_until_ms.set(clock_.monotonic_ms + config_.fail_timeout.count());
    LOG_ERROR("upstream %s: server %s is down for %lld ms after %u failure(s) (last: %s)",
              config_.name.c_str(), config_.servers[server].address.c_str(),
              static_cast<long long>(config_.fail_timeout.count()), config_.max_fails, what);
  }
}

void GroupRuntime::report_suppressed_lines(bool all) {
  auto take = [&](LogThrottle& t) {
    return all ? t.take_all() : t.take_overdue(clock_.monotonic_ms);
  };
  for (size_t i = 0; i < slots_.size(); ++i)
    if (uint64_t n = take(slots_[i].failure_log))
      LOG_ERROR("upstream %s: server %s: %llu similar lines suppressed", config_.name.c_str(),
                config_.servers[i].address.c_str(), static_cast<unsigned long long>(n));
  if (uint64_t n = take(group_log_))
    LOG_ERROR("upstream %s: %llu similar lines suppressed", config_.name.c_str(),
              static_cast<unsigned long long>(n));
}

void GroupRuntime::set_probe_up(size_t server, bool up) {
  if (upstream_.group().probe_up(server) == up) return;
  upstream_.group().set_probe_up(server, up);
  counters_[server]->probe_down.set(!up);
  if (up)
    LOG_INFO("upstream %s: server %s passed its health check and is back", config_.name.c_str(),
             config_.servers[server].address.c_str());
  else
    LOG_ERROR("upstream %s: server %s failed its health check and is out", config_.name.c_str(),
              config_.servers[server].address.c_str());
}

}  // namespace peregrine::upstream
