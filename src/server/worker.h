// One worker thread: its own event loop, listening sockets (SO_REUSEPORT), connections, timers,
// buffers and route table. Nothing here is touched by another thread except the mailbox.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_list.h"
#include "event/timer_set.h"
#include "metrics/metrics.h"
#include "peregrine/request.h"
#include "peregrine/response.h"
#include "peregrine/worker.h"
#include "server/app_worker.h"
#include "server/held_request.h"
#include "server/output_queue.h"
#include "server/route_table.h"
#include "tls/stream.h"

namespace peregrine::server {

class Connection;
class Http2Connection;
class Worker;

// What a listening address asks of the connections it accepts (config::ListenAddress, copied:
// listeners outlive the snapshot they were made from).
struct ListenerOptions {
  bool tls = false;
  bool http2 = false;  // ALPN "h2" on a TLS listener; h2c with prior knowledge on a plain one
  bool proxy_protocol = false;  // a PROXY protocol header comes first on every connection
  bool admin = false;  // [admin]: every request goes to the admin router (RouteTable::select_admin)
};

class Listener final : public event::Pollable {
 public:
  Listener(Worker& worker, int fd, ListenerOptions options)
      : worker_(worker), fd_(fd), options_(options) {}
  void on_ready(uint32_t readiness) override;
  void on_accepted(int fd, int error) override;
  int fd() const { return fd_; }
  const ListenerOptions& options() const { return options_; }
  void close();

 private:
  Worker& worker_;
  int fd_;
  ListenerOptions options_;
};

// Read buffers are borrowed only while a connection has bytes to parse, and given back when it
// goes idle, so idle keep-alive connections hold no buffer at all.
class BufferPool {
 public:
  explicit BufferPool(size_t buffer_size) : size_(buffer_size) {}
  ~BufferPool();
  char* acquire();
  void release(char* buffer);
  size_t buffer_size() const { return size_; }
  size_t in_use() const { return in_use_; }
  size_t spare() const { return free_.size(); }

 private:
  static constexpr size_t kMaxFree = 256;
  size_t size_;
  size_t in_use_ = 0;
  std::vector<char*> free_;
};

class Worker {
 public:
  // Builds the worker's route table from `config`; check ok() before run(). `listen_fds` holds
  // one socket per `config->listen` entry, in that order. `backend`: the process's choice
  // (event::choose_backend, made once at start).
  Worker(int id, std::vector<int> listen_fds, std::shared_ptr<const config::Config> config,
         const HandlerRegistry& registry, AccessLogWriter& log_writer, int total_workers,
         event::Backend backend = event::Backend::kEpoll);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  bool ok() const { return static_cast<bool>(routes_); }
  const std::string& error() const { return error_; }
  void run();  // the thread's body; returns when stopped

  // ---- Called from other threads ----
  void post_config(std::shared_ptr<const config::Config> config);
  // `hand_over`: a graceful stop because a new binary now serves (SIGUSR2), which is gentler
  // with idle connections (see handing_over()).
  void post_stop(bool graceful, bool hand_over = false);
  // The admin changed an upstream server's state (upstream/operator_state.h).
  void post_operator_states();
  void post_function(peregrine::Worker::Function f);  // runs on this worker's thread

  // The application's timers and mailbox (peregrine::this_worker() on this thread).
  AppWorker& app() { return app_; }
  void set_peers(const std::vector<std::unique_ptr<Worker>>* peers) { app_.set_peers(peers); }

  // ---- Used by connections and listeners (worker thread only) ----
  void accept_from(Listener& listener);
  // A connection the poller accepted (io_uring), or (fd -1) why accepting failed.
  void accepted(Listener& listener, int fd, int error);
  void close_connection(Connection* connection);  // deferred delete at the end of the batch
  // HTTP/2 on an accepted socket: from Connection when an http2 listener's client opens with the
  // h2c preface, and from the TLS layer after ALPN chose "h2". `already_read` is what the caller
  // read past the handshake (the preface onwards). Takes the descriptor; counts as a connection.
  // `tls`: the TLS session when the handshake's ALPN chose "h2"; null for h2c.
  void start_http2(int fd, const sockaddr* peer, socklen_t peer_len, std::string_view already_read,
                   const ListenerOptions& listener, std::unique_ptr<tls::Stream> tls = nullptr,
                   const sockaddr* socket_peer = nullptr, socklen_t socket_peer_len = 0);
  void close_http2(Http2Connection* connection);  // deferred delete at the end of the batch
  event::Poller& poller() { return *poller_; }
  const Clock& clock() const { return clock_; }
  RouteTable& routes() { return *routes_; }
  Ref<RouteTable> routes_ref() { return routes_; }
  const config::Limits& limits() const { return routes_->config().limits; }
  BufferPool& buffers() { return buffers_; }
  OutputQueue& scratch_output() { return scratch_output_; }
  Request& scratch_request() { return *scratch_request_; }
  // The scratch request, for a request that outlives this event; a spare takes its place.
  HeldRequest take_scratch_request() {
    HeldRequest taken = std::move(scratch_request_);
    scratch_request_ = spare_request();
    return taken;
  }
  Response& scratch_response() { return scratch_response_; }
  std::string_view date_and_server_lines() const { return date_server_; }
  // The two values of those lines (the Server value empty when the header is off), for HTTP/2,
  // which sends fields rather than lines.
  std::string_view date_value() const { return {date_server_.data() + 6, date_length_}; }
  std::string_view server_value() const {
    return {date_server_.data() + server_at_, server_length_};
  }
  bool draining() const { return draining_; }
  // Draining because a new binary took over (SIGUSR2). Its clients are still coming: an idle
  // keep-alive connection is closed only once it has been idle for kHandOverIdleGrace (closing
  // it as its client sends the next request loses that request; under load every connection
  // gets its next request, answered with Connection: close, long before), and HTTP/2
  // connections first get a GOAWAY that names no last stream, the final one kHandOverIdleGrace
  // later (RFC 9113 6.8), so that no stream the client sent meanwhile is refused.
  bool handing_over() const { return handing_over_; }
  static constexpr int64_t kHandOverIdleGrace = 1000;  // ms
  handlers::WorkerEnv env() {
    return {*poller_, upstream_timers, clock_, total_workers_, &draining_};
  }

  event::TimerList header_timers{0};
  event::TimerList keepalive_timers{0};
  event::TimerList body_timers{0};
  event::TimerList send_timers{0};
  event::TimerList linger_timers{0};
  event::TimerList hand_over_timers{kHandOverIdleGrace};  // idle connections, handing over
  event::TimerSet upstream_timers;  // durations from the config: upstream timeouts, queues, pools

 private:
  class Mailbox;
  void apply_limits();
  void refresh_date();
  void run_timers();
  void handle_mail();
  void start_drain(bool hand_over);
  void stop_now();
  void adopt(Listener& listener, int fd, const sockaddr* peer, socklen_t peer_length);
  void accept_failed(int error);
  void refuse(int fd);

  int id_;
  std::string error_;
  std::unique_ptr<event::Poller> poller_;
  Clock clock_;
  Ref<RouteTable> routes_;
  const HandlerRegistry& registry_;
  AccessLogWriter& log_writer_;
  int total_workers_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::unique_ptr<Mailbox> mailbox_;
  AppWorker app_;
  BufferPool buffers_;
  OutputQueue scratch_output_;
  HeldRequest scratch_request_ = spare_request();
  Response scratch_response_;
  std::string date_server_;  // "Date: ...\r\nServer: ...\r\n", rebuilt once a second
  size_t date_length_ = 0;   // the values' places in date_server_
  size_t server_at_ = 0;
  size_t server_length_ = 0;
  time_t date_second_ = -1;

  Connection* connections_ = nullptr;  // intrusive list of live connections
  size_t connection_count_ = 0;
  size_t max_connections_ = 0;
  std::vector<Connection*> closed_;               // freed after the current batch of events
  Http2Connection* http2_connections_ = nullptr;  // intrusive list; counted in connection_count_
  std::vector<Http2Connection*> closed_http2_;
  void free_closed();
  bool draining_ = false;
  bool handing_over_ = false;
  bool stopping_ = false;
  int64_t drain_deadline_ms_ = 0;
  int64_t final_goaway_ms_ = 0;  // handing over: when HTTP/2 connections get the final GOAWAY
  time_t last_log_flush_ = 0;
  uint64_t refused_connections_ = 0;
  metrics::WorkerMetrics& metrics_;  // this worker's figures (metrics::registry())
  int operator_subscription_ = -1;   // upstream::operator_states() announces changes here
  void sample_connections();         // once a second: the connection gauges

  friend class Connection;
};

}  // namespace peregrine::server
