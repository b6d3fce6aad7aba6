// A worker's live view of one upstream group (config::UpstreamGroup): the balancer and passive
// health (balancer.h), a cap on concurrent requests per server with a bounded wait queue, and a
// pool of idle keep-alive connections per server. Shared by the FastCGI and proxy handlers.
// Worker-thread only; one instance per worker and route-table snapshot.
//
// A request's life against a group:
//   acquire()      -> kReady with a server (a slot is now held), or kQueued (the waiter is called
//                     back with on_slot_ready() when a slot frees, or on_queue_timeout()), or
//                     kUnavailable (no server up: 502 at once), kQueueFull (503).
//   take_idle()    -> a pooled connection to that server, or -1: then connect() a new one.
//   ... talk ...
//   put_idle() or close the fd, then release(): frees the slot and wakes the next waiter.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_list.h"
#include "event/timer_set.h"
#include "upstream/balancer.h"

namespace peregrine::upstream {

// Opens a non-blocking stream socket to `server` and starts connecting. Returns the descriptor
// (connected, or in progress: wait for writability, then check SO_ERROR), or -1 with errno set.
int connect_to(const config::UpstreamServer& server);

class GroupRuntime;

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
  // Picks a server not in `tried` that is up and has a free slot, and takes the slot.
  Acquire acquire(const PickContext& context, const TriedSet& tried, Waiter& waiter,
                  size_t* server);
  // Gives the slot back and wakes the first waiter.
  void release(size_t server);
  // Leaves the queue (the client went away while waiting). Safe when not queued.
  void cancel(Waiter& waiter);

  // An idle connection to `server` from the pool, or -1. `uses` = requests it has carried.
  int take_idle(size_t server, uint32_t* uses);
  // Keeps a connection that finished a request cleanly for reuse (closes it when the pool is full
  // or keepalive_requests is reached). The pool watches it: a close by the back end or its idle
  // timeout closes it.
  void put_idle(size_t server, int fd, uint32_t uses);

  // Passive health with a log line when a server goes down. `what` says what failed.
  void report_failure(size_t server, const char* what);
  void report_success(size_t server) { upstream_.group().report_success(server); }

  // Active health checks set this; logs changes.
  void set_probe_up(size_t server, bool up);

  size_t in_use(size_t server) const { return slots_[server].in_use; }
  // This worker's share of the server's max_conns; 0 = unlimited.
  uint32_t cap(size_t server) const { return slots_[server].cap; }
  size_t queued() const { return queued_; }
  size_t idle(size_t server) const;

 private:
  struct IdleConnection;
  struct Slots {
    uint32_t in_use = 0;
    uint32_t cap = 0;                // 0 = unlimited
    IdleConnection* idle = nullptr;  // most recently used first
    size_t idle_count = 0;
  };
  void close_idle(IdleConnection* c);
  friend struct IdleConnection;

  const config::UpstreamGroup& config_;
  event::Poller& poller_;
  event::TimerSet& timers_;
  const Clock& clock_;
  Upstream upstream_;
  std::vector<Slots> slots_;
  Waiter* queue_head_ = nullptr;
  Waiter* queue_tail_ = nullptr;
  size_t queued_ = 0;
};

}  // namespace peregrine::upstream
