// A worker's runnable view of one configuration snapshot: every route's handler instantiated
// for this worker (static handlers with their own file caches), every site's access log buffer.
// Rebuilt when a new snapshot arrives; connections in the middle of a request keep the old one.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "access/options.h"
#include "admin/live_api.h"
#include "auth/basic.h"
#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/application/registry.h"
#include "handlers/static/mime.h"
#include "handlers/static/static_handler.h"
#include "handlers/stream_handler.h"
#include "metrics/metrics.h"
#include "peregrine/handler.h"
#include "peregrine/ref_counted.h"
#include "peregrine/request.h"
#include "peregrine/server.h"
#include "server/access_log.h"
#include "tls/server_context.h"
#include "upstream/group_runtime.h"

namespace peregrine::server {

// Application handlers an embedding program registered by name (handlers/application/registry.h).
using RegisteredHandler = application::RegisteredHandler;
using HandlerRegistry = application::Registry;

struct RouteRuntime {
  const config::Route* config;
  // Exactly one is set (by the route's registration, handlers/handler_type.h): a handler that
  // answers at once (static, return, application), or one that answers later from the worker's
  // loop (FastCGI, proxy, AJP).
  std::shared_ptr<Handler> handler;
  std::shared_ptr<handlers::StreamHandler> stream;
  std::string allow;  // the route's `methods` as an Allow value, built once; empty: any method
  const access::Options* access = nullptr;  // null when the route has no rules and no limits
  // What a method token this server has no name for (PROPFIND, MKCOL, PURGE...) gets: empty when
  // the handler passes any token on (proxy, FastCGI, application) or the route lists methods;
  // otherwise the Allow of the 405 it answers (its registration's default_methods: static and
  // return routes).
  std::string_view unknown_method_allow;
  metrics::RouteCounters* counters = nullptr;  // this worker's figures for the route
};

struct SiteRuntime {
  const config::Site* config;
  std::vector<RouteRuntime> routes;
  std::unique_ptr<static_files::StaticHandler> error_pages;  // null without error_pages
  std::unique_ptr<AccessLogBuffer> access_log;               // null when off
  const access::Options* access = nullptr;     // for requests no route takes; null when none
  metrics::RouteCounters* counters = nullptr;  // requests the route table answered itself

  // Gives an error response without a body (4xx/5xx) the site's page for its status, or a small
  // default page. Every client connection does this before writing a complete response, whatever
  // its protocol.
  void fill_error_body(const Request& request, Response& response) const;
};

// The route table's answer about one request. The site is always set: its error pages and access
// log apply whatever the answer. Either `route` is set and its handler runs, or `status` says
// what to answer instead.
struct Selection {
  SiteRuntime* site = nullptr;
  const RouteRuntime* route = nullptr;
  // 0 with a route. Otherwise one of
  //   400 the path does not normalize          413 the declared body exceeds max_body_bytes
  //   204 OPTIONS * (about the server as a whole)
  //   404 no route matches the path            405 the route does not take this method
  //   401 the route's basic auth did not accept the request's credentials
  //   400/421 the site's tls.verify_client refused the client's certificate (or its absence),
  //           or the handshake was made for another site (tls::client_certificate_status)
  // (A method token the server has no name for is routed like any other: proxy and FastCGI
  // routes pass it on, static and return routes answer 405.)
  int status = 0;
  std::string_view allow;  // the Allow value that goes with 204 and 405
  // Access control (access/check.h): 403, or a limit's status (429) with Retry-After seconds;
  // with a route, delay_ms > 0 asks to hold the request that long first (a limit's delay mode).
  uint32_t retry_after = 0;
  int64_t delay_ms = 0;
  const access::Options* access = nullptr;  // what applied, for counting the connection
  // The response header rules of the route (its site's and its own), or of the site when no
  // route was chosen; null when there are none.
  const http::HeaderEdits* headers = nullptr;
  std::string_view challenge;  // the WWW-Authenticate value that goes with 401

  // 400 and 413 refuse the request as a whole: it is answered before its body is read (the
  // connection does not read it). 204, 404 and 405 are answers like a handler's.
  bool refused() const { return status == 400 || status == 413; }
};

class RouteTable : public RefCounted {
 public:
  // Fails (returns null, `error` set) when a handler cannot be set up, e.g. an application
  // handler name nobody registered.
  static Ref<RouteTable> build(std::shared_ptr<const config::Config> config,
                               const handlers::WorkerEnv& env, const HandlerRegistry& registry,
                               AccessLogWriter& log_writer, std::string* error);
  ~RouteTable() override;

  const config::Config& config() const { return *config_; }
  // Where a request goes: its site by Host, then the first route of that site matching its path
  // (in declared order) and taking its method. Sets `request.path` (percent-decoded, dot-segments
  // removed; "*" for OPTIONS *) from the target, which is why the request is not const: every
  // client protocol asks this one question once the head is parsed, before any body is read.
  Selection select(Request& request);
  SiteRuntime& site_for(std::string_view host);
  SiteRuntime& default_site() { return sites_[config_->default_site]; }
  // The admin listener's one question ([admin], admin/handler.h): every request goes to the
  // admin router, with its path normalized as select() does (404 if a reload removed [admin]).
  Selection select_admin(Request& request);
  // GET /api/route-test: select() on a request made of `question`'s host, target and method.
  admin::RouteAnswer test_route(const admin::RouteQuestion& question);
  // This snapshot's TLS contexts for this worker; null when no listener is TLS.
  const tls::ServerContexts* tls() const { return tls_.get(); }
  // Once a second: writes out the access logs' buffers and the upstream groups' counts of error
  // lines held back (core/log_throttle.h).
  void flush_logs();
  // The admin changed an upstream server's state (upstream/operator_state.h): every group
  // applies it.
  void apply_operator_states();

 private:
  std::shared_ptr<const config::Config> config_;
  std::unique_ptr<static_files::MimeTable> mime_;
  std::vector<SiteRuntime> sites_;
  std::vector<std::unique_ptr<upstream::GroupRuntime>> groups_;  // one per Config::upstreams
  std::vector<std::shared_ptr<void>> probes_;                    // active health checkers
  std::unique_ptr<tls::ServerContexts> tls_;
  const Clock* clock_ = nullptr;

  // Access control once the route (or, for a 404, the site) is known; true when it refused.
  bool refuse_by_access(const access::Options& options, Request& request, Selection& selection);
  std::unique_ptr<auth::BasicAuth> auth_;  // this worker's verifications and their cache
  // [admin]: a site of one route whose handler is the admin router; null without [admin].
  struct Admin;
  std::unique_ptr<Admin> admin_;
};

}  // namespace peregrine::server
