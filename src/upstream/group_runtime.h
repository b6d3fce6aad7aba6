// A worker's live view of one upstream group (config::UpstreamGroup): the balancer and passive
// health (balancer.h), a cap on concurrent requests per server with a bounded wait queue, and a
// pool of idle keep-alive connections per server. Shared by the FastCGI and proxy handlers.
// Worker-thread only; one instance per worker and route-table snapshot.
//
// A request's life against a group:
//   acquire()      -> kReady with a server (a slot is now held), or kQueued (the waiter is called
//                     back with on_slot_ready() when a slot frees, or on_queue_timeout()), or
//                     kUnavailable (no server up: 502 at once), kQueueFull (503).
//   take_idle()    -> a pooled connection to that server, or null: then open() a new one.
//   ... talk ...
//   put_idle() or close(), then release(): frees the slot and wakes the next waiter.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "core/log_throttle.h"
#include "event/deferred.h"
#include "event/poller.h"
#include "event/timer_list.h"
#include "event/timer_set.h"
#include "metrics/metrics.h"
#include "tls/client_context.h"
#include "tls/stream.h"
#include "upstream/balancer.h"
#include "upstream/operator_state.h"

namespace peregrine::upstream {

// Opens a non-blocking stream socket to `server` and starts connecting. Returns the descriptor
// (connected, or in progress: wait for writability, then check SO_ERROR), or -1 with errno set.
int connect_to(const config::UpstreamServer& server);
// After a non-blocking connect reported writability (or a hang-up): 0 when it succeeded, else
// the errno it failed with.
int connect_result(int fd);

class GroupRuntime;

// A connection to one upstream server. It stays registered with the poller for its whole life
// (no epoll_ctl per request): while an exchange uses it, readiness goes to that user; while it
// idles in the pool, any readiness (the back end closed it, or sent what it must not) or the
// idle timeout closes it.
class UpstreamConnection final : public event::Pollable,
                                 public event::TimerOwner,
                                 public event::Disposable {
 public:
  int fd() const { return fd_; }
  // The TLS session on fd() (an https group), or null: the plain path tests this one pointer.
  tls::Stream* tls() const { return tls_.get(); }
  size_t server() const { return server_; }
  uint32_t uses() const { return uses_; }  // requests it carried before this one
  bool reused() const { return uses_ > 0; }
  // When it last went back to the pool (monotonic ms): AJP checks a connection idle long with
  // CPING before it carries a request.
  int64_t idle_since_ms() const { return idle_since_ms_; }
  // Writability is worth watching only while a write is blocked (a connect in progress, a full
  // socket): a unix socket reports it each time the peer reads, which would wake the worker for
  // nothing on every request. Connections start watched (connect); users turn it off.
  void watch_writable(bool on);
  // io_uring: queues a copy of `bytes` to go out with the worker's next wait, in the system
  // call that waits (no send(2)); the user hears on_sent() once all of it is out. False when
  // the poller cannot (epoll, TLS, a send already in flight): write with send(2).
  bool send_with_wait(std::string_view bytes);
  // A send_with_wait() not yet complete: nothing else may be written before it, and the
  // connection must not go back to the pool (nor be modified: its completion would be lost).
  bool sending() const { return sending_; }
  void on_ready(uint32_t readiness) override;
  void on_sent(bool ok) override;
  void on_timeout() override;

 private:
  friend class GroupRuntime;
  GroupRuntime* group_ = nullptr;
  event::Pollable* user_ = nullptr;  // the exchange using it
  bool idle_ = false;                // in the pool
  bool writable_watched_ = true;
  bool sending_ = false;
  int fd_ = -1;
  std::unique_ptr<tls::Stream> tls_;
  size_t server_ = 0;
  uint32_t uses_ = 0;
  int64_t idle_since_ms_ = 0;
  UpstreamConnection* prev_ = nullptr;  // pool links
  UpstreamConnection* next_ = nullptr;
  event::TimerNode idle_timer_;
};

// A request waiting in a group's queue for a free slot.
class Waiter : public event::TimerOwner {
 public:
  // A slot may be free now: call acquire() again (the waiter has left the queue).
  virtual void on_slot_ready() = 0;
  // Waited queue_timeout: answer 503 with Retry-After (the waiter has left the queue).
  virtual void on_queue_timeout() = 0;

  event::TimerNode queue_timer;
  Waiter* queue_prev = nullptr;
  Waiter* queue_next = nullptr;
  GroupRuntime* queued_in = nullptr;
  // Set by a kind of waiter that looks for its own kind in the queue (FastCGI pipelining), so
  // that it can tell without RTTI: a dynamic_cast through the exchange's multiple bases cost
  // more than the whole request once the queue is long.
  const void* kind = nullptr;

 protected:
  Waiter() { queue_timer.owner = this; }
  ~Waiter() = default;

 private:
  void on_timeout() final;
};

class GroupRuntime {
 public:
  GroupRuntime(const config::UpstreamGroup& config, event::Poller& poller, event::TimerSet& timers,
               const Clock& clock, int workers);
  ~GroupRuntime();
  GroupRuntime(const GroupRuntime&) = delete;
  GroupRuntime& operator=(const GroupRuntime&) = delete;

  const config::UpstreamGroup& config() const { return config_; }
  const config::UpstreamServer& server(size_t i) const { return config_.servers[i]; }
  Upstream& upstream() { return upstream_; }

  enum class Acquire : uint8_t { kReady, kQueued, kUnavailable, kQueueFull };
  // Picks a server not in `tried` that is up and has a free slot, and takes the slot. A waiter
  // that must wait joins the back of the queue, or its front when `first_in_line` (it had been
  // served before and lost its place through no fault of its own).
  Acquire acquire(const PickContext& context, const TriedSet& tried, Waiter& waiter, size_t* server,
                  bool first_in_line = false);
  // Gives the slot back and wakes the first waiter.
  void release(size_t server);
  // Leaves the queue (the client went away while waiting). Safe when not queued. With
  // `keep_deadline` its queue_timeout keeps running: on_queue_timeout() is still called unless
  // the waiter disarms queue_timer first.
  void cancel(Waiter& waiter, bool keep_deadline = false);
  // The first of the next `limit` waiters in the queue for which `accept` is true (still
  // queued: the caller cancels it once it has served it), or null.
  template <class Accept>
  Waiter* find_waiter(Accept accept, size_t limit) const {
    for (Waiter* w = queue_head_; w && limit > 0; w = w->queue_next, --limit)
      if (accept(*w)) return w;
    return nullptr;
  }

  // The most recently used idle connection to `server`, now passing its readiness to `user`;
  // null when the pool is empty.
  UpstreamConnection* take_idle(size_t server, event::Pollable& user);
  // A new connection to `server`, connecting: wait for writability, then check SO_ERROR. Null
  // with errno set when the socket cannot even be created or the connect fails at once (EAGAIN:
  // a unix socket's backlog is full). In a TLS group the connection carries a client session
  // whose handshake the user drives (tls()->handshake()) once the connect succeeded; the
  // server's last session is offered for resumption.

  UpstreamConnection* open(size_t server, event::Pollable& user);
  // The request on `c` completed and the next one was already sent on it (FastCGI pipelining):
  // its readiness goes to `user` now, which counts as a reuse.
  void hand_over(UpstreamConnection* c, event::Pollable& user);
  // The request on `c` completed cleanly: keep it for the next one, unless the pool is full,
  // keepalive_requests is reached or the server's cap would be exceeded (then it is closed).
  void put_idle(UpstreamConnection* c);
  // Closes `c` (freed after the current batch of events).
  void close(UpstreamConnection* c);

  // Passive health with a log line when a server goes down. `what` says what failed.
  void report_failure(size_t server, const char* what);
  void report_success(size_t server) { upstream_.group().report_success(server); }

  // Active health checks set this; logs changes.
  void set_probe_up(size_t server, bool up);

  // The group's TLS client context (this worker's), or null for plain HTTP (or when it could not
  // be built: open() then fails with EPROTO, logged once).
  const tls::ClientContext* tls_context() const { return tls_.get(); }
  // A client TLS session on `fd` for `server` (resuming its last session); null when the group
  // is plain or OpenSSL cannot make one. Health checks use it too.
  std::unique_ptr<tls::Stream> open_tls(int fd, size_t server);

  // This worker's share of the server's max_conns; 0 = unlimited.
  uint32_t cap(size_t server) const { return slots_[server].cap; }
  // Idle connections this worker keeps to the server: `keepalive`, or for a FastCGI group
  // without it, its share of max_conns less a quarter (config::UpstreamGroup).
  uint32_t idle_limit(size_t server) const { return slots_[server].idle_limit; }
  size_t queued() const { return queued_; }

  // This worker's figures for a server (metrics/metrics.h) and the last health-check result.
  metrics::UpstreamServerCounters& counters(size_t server) { return *counters_[server]; }
  void record_check(size_t server, bool ok) {
    metrics::UpstreamServerCounters& c = *counters_[server];
    c.last_check_seconds.set(clock_.wall_seconds);
    c.last_check_ok.set(ok);
    c.check_history[c.checks.get() % c.kCheckHistory].set(clock_.wall_seconds * 2 + ok);
    c.checks.add();
  }

  // The error log's share (core/log_throttle.h) for the lines about one server's failed requests,
  // and for the group's own (no server available, queue full, waited too long): false when the
  // line is to be held back, else `*suppressed` lines were held back since the last one.
  bool may_log_failure(size_t server, uint64_t* suppressed) {
    return slots_[server].failure_log.allow(clock_.monotonic_ms, suppressed);
  }
  bool may_log_group_line(uint64_t* suppressed) {
    return group_log_.allow(clock_.monotonic_ms, suppressed);
  }
  // Once a second: logs how many lines were held back in windows that are over, when no later
  // line said it; `all`: whatever the window (the group runtime is going away).
  void report_suppressed_lines(bool all = false);

  // The admin's drain/disable/enable (operator_state.h): reads the process-wide table for every
  // server of this group and applies what changed. Called when the table changes, at build, and
  // by acquire() when the table's version has moved.
  void apply_operator_states();
  OperatorState operator_state(size_t server) const { return operator_[server]; }

 private:
  struct Slots {
    uint32_t in_use = 0;
    uint32_t cap = 0;                    // 0 = unlimited
    UpstreamConnection* idle = nullptr;  // most recently used first
    size_t idle_count = 0;
    uint32_t idle_limit = 0;  // see idle_limit()
    LogThrottle failure_log;
  };
  void unlink_idle(UpstreamConnection* c);
  friend class UpstreamConnection;
  friend class Waiter;

  const config::UpstreamGroup& config_;
  event::Poller& poller_;
  event::TimerSet& timers_;
  const Clock& clock_;
  Upstream upstream_;
  std::vector<Slots> slots_;
  std::unique_ptr<tls::ClientContext> tls_;
  std::unique_ptr<tls::SessionCache[]> sessions_;  // per server: the session to resume
  Waiter* queue_head_ = nullptr;
  Waiter* queue_tail_ = nullptr;
  size_t queued_ = 0;
  LogThrottle group_log_;
  std::vector<OperatorState> operator_;  // per server
  uint64_t operator_version_ = 0;        // the table's version operator_ was read at
  // Metrics blocks live as long as the process; in-flight, idle and queue gauges move by deltas
  // because the runtime of the previous snapshot may still be finishing on the same worker.
  std::vector<metrics::UpstreamServerCounters*> counters_;
  metrics::UpstreamGroupCounters* group_counters_;
};

}  // namespace peregrine::upstream
