// The reverse proxy: a route handler that forwards each request to a server of an upstream group
// (upstream/group_runtime.h) over HTTP/1.1 with keep-alive, and streams the answer back through
// the client connection (handlers/stream_handler.h). One instance per worker and route; every
// request in flight is a ProxyExchange (proxy_handler.cc): the HTTP/1.1 codec on the upstream
// exchange every gateway shares (upstream/exchange.h: slots, connections, timers, retries).
//
// What a request goes through:
//   slot      GroupRuntime::acquire(): a server with a free slot (or a wait in the group's queue)
//   socket    a pooled keep-alive connection, else a new non-blocking connect (connect_timeout)
//   request   head (headers.h rules) + body streamed from the client (send_timeout)
//   response  head parsed by http1::ResponseParser (read_timeout between reads); small complete
//             bodies are answered in one go, the rest is streamed with the client's back-pressure
//   done      a clean keep-alive connection goes back to the pool; the slot is released
// Failures follow the shared retry policy (upstream/retry.h): before the client saw a byte, the
// next server (connect errors always, other errors and timeouts for idempotent requests whose
// body is still in memory), bounded by `tries` and `try_timeout`; a stale pooled connection is
// retried once on a fresh one without counting.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/proxy/headers.h"
#include "handlers/proxy/options.h"
#include "handlers/stream_handler.h"
#include "peregrine/handler.h"
#include "upstream/group_runtime.h"

namespace peregrine::proxy {

class ProxyExchange;

class ProxyHandler final : public handlers::StreamHandler {
 public:
  ProxyHandler(const ProxyOptions& options, upstream::GroupRuntime& group, event::Poller& poller,
               event::TimerSet& timers, const Clock& clock);

  handlers::Exchange* start(const Request& request, handlers::Downstream& downstream) override;

 private:
  friend class ProxyExchange;

  const ProxyOptions& options_;
  upstream::GroupRuntime& group_;
  event::Poller& poller_;
  event::TimerSet& timers_;
  const Clock& clock_;

  RequestOptions request_options_;  // Host mode, forwarding headers, route rules
  // Route rules and the upstream origin; client_origin is set per response (worker-thread
  // scratch, like scratch_fields_).
  ResponseOptions response_options_;
  std::string upstream_host_;  // the Host the back end is addressed by ("app", "h:port")
  std::vector<std::string> server_origins_;  // "http://address" per server, "" when the same
  std::vector<HeaderView> scratch_fields_;
  // Read buffers of finished exchanges, for the next ones (per worker: no locking).
  std::unique_ptr<char[]> take_buffer();
  void give_back_buffer(std::unique_ptr<char[]> buffer);
  std::vector<std::unique_ptr<char[]>> spare_buffers_;

  bool map_path_ = false;  // replace options_.path_prefix by options_.path
};

}  // namespace peregrine::proxy
