// A worker's runnable view of one configuration snapshot: every route's handler instantiated
// for this worker (static handlers with their own file caches), every site's access log buffer.
// Rebuilt when a new snapshot arrives; connections in the middle of a request keep the old one.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/static/mime.h"
#include "handlers/static/static_handler.h"
#include "handlers/stream_handler.h"
#include "peregrine/handler.h"
#include "peregrine/ref_counted.h"
#include "peregrine/server.h"
#include "server/access_log.h"
#include "upstream/group_runtime.h"

namespace peregrine::server {

// Application handlers an embedding program registered by name. Each worker calls the factory
// once per route that names it; returning one shared, thread-safe instance is fine.
using HandlerRegistry = std::map<std::string, Server::HandlerFactory, std::less<>>;

struct RouteRuntime {
  const config::Route* config;
  // Exactly one is set: a handler that answers at once (static, return, application), or one
  // that answers later from the worker's loop (FastCGI, proxy).
  std::shared_ptr<Handler> handler;
  std::shared_ptr<handlers::StreamHandler> stream;
};

struct SiteRuntime {
  const config::Site* config;
  std::vector<RouteRuntime> routes;
  std::unique_ptr<static_files::StaticHandler> error_pages;  // null without error_pages
  std::unique_ptr<AccessLogBuffer> access_log;               // null when off
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
  SiteRuntime& site_for(std::string_view host);
  SiteRuntime& default_site() { return sites_[config_->default_site]; }
  std::vector<SiteRuntime>& sites() { return sites_; }
  void flush_logs();

 private:
  std::shared_ptr<const config::Config> config_;
  std::unique_ptr<static_files::MimeTable> mime_;
  std::vector<SiteRuntime> sites_;
  std::vector<std::unique_ptr<upstream::GroupRuntime>> groups_;  // one per Config::upstreams
  std::vector<std::shared_ptr<void>> probes_;                    // active health checkers
};

}  // namespace peregrine::server
