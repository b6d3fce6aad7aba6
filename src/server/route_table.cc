#include "server/route_table.h"

#include "access/check.h"
#include "admin/handler.h"
#include "admin/live_api.h"
#include "admin/log_tail.h"
#include "core/log.h"
#include "core/strings.h"
#include "handlers/handler_type.h"
#include "handlers/static/config.h"
#include "http/path.h"
#include "http/router.h"
#include "http/status.h"
#include "http2/headers.h"
#include "metrics/labels.h"
#include "upstream/health_check.h"

namespace peregrine::server {

namespace {

// What OPTIONS * answers: the methods some route of this server may take.
constexpr std::string_view kServerMethods = "GET, HEAD, POST, PUT, DELETE, OPTIONS";

std::string allow_value(const std::vector<std::string>& methods) {
  std::string allow;
  for (const std::string& m : methods) allow.append(allow.empty() ? "" : ", ").append(m);
  return allow;
}

std::string position(const config::Route& route) {
  return route.pos.file + ":" + std::to_string(route.pos.line) + ":" +
         std::to_string(route.pos.column);
}

// Sets `request.path` from the target's path, percent-decoded and without dot-segments: a view
// of the target in the common case (no copy), else the request's own storage. False: it does not
// normalize (400).
bool normalize_request_path(Request& request) {
  if (http::path_is_normal(request.raw_path)) {
    request.path = request.raw_path;
    return true;
  }
  if (http::normalize_path(request.raw_path, request.path_storage) != http::PathStatus::kOk)
    return false;
  request.path = request.path_storage;
  return true;
}

}  // namespace

struct RouteTable::Admin {
  // One route per admin::AdminPart, in its order: the router, the live endpoints (which ask this
  // table's select() for /api/route-test) and the log tail, the one that answers asynchronously.
  Admin(const std::shared_ptr<const config::Config>& config, const handlers::WorkerEnv& env,
        RouteTable& table) {
    route_config.pattern = "/";
    site.config = &site_config;
    auto router = std::make_shared<admin::AdminHandler>(config);
    RouteRuntime route;
    route.config = &route_config;
    route.counters = metrics::local().route("(admin)", "/");
    site.counters = route.counters;
    route.handler = router;
    site.routes.push_back(route);
    route.handler = std::make_shared<admin::LiveHandler>(
        config, router, [&table](const admin::RouteQuestion& q) { return table.test_route(q); });
    site.routes.push_back(route);
    route.handler = nullptr;
    route.stream = std::make_shared<admin::LogTailHandler>(router, env);
    site.routes.push_back(route);
  }
  config::Site site_config;
  config::Route route_config;
  SiteRuntime site;
};

RouteTable::~RouteTable() {
  // Handlers and probes refer to the groups: they go first.
  probes_.clear();
  sites_.clear();
  groups_.clear();
}

Ref<RouteTable> RouteTable::build(std::shared_ptr<const config::Config> config,
                                  const handlers::WorkerEnv& env, const HandlerRegistry& registry,
                                  AccessLogWriter& log_writer, std::string* error) {
  const Clock& clock = env.clock;
  Ref<RouteTable> table(new RouteTable);
  table->config_ = config;
  table->clock_ = &env.clock;
  table->auth_ = std::make_unique<auth::BasicAuth>(env.clock);
  for (const config::UpstreamGroup& group : config->upstreams) {
    table->groups_.push_back(std::make_unique<upstream::GroupRuntime>(group, env.poller, env.timers,
                                                                      env.clock, env.workers));
    if (group.health_check.enabled)
      table->probes_.push_back(std::make_shared<upstream::HealthChecker>(
          *table->groups_.back(), env.poller, env.timers, env.clock));
  }
  auto find_group = [&](std::string_view name) -> upstream::GroupRuntime* {
    for (auto& g : table->groups_)
      if (g->config().name == name) return g.get();
    return nullptr;
  };
  table->tls_ = tls::ServerContexts::build(config, error);
  if (!error->empty()) return {};
  table->mime_ = std::make_unique<static_files::MimeTable>(config->mime_types);
  table->sites_.reserve(config->sites.size());
  for (const config::Site& site : config->sites) {
    SiteRuntime runtime{&site, {}, nullptr, nullptr, site.access.any() ? &site.access : nullptr};
    runtime.counters = metrics::local().route(metrics::site_label(site), "");
    for (const config::Route& route : site.routes) {
      // The route's registration makes its runtime (handlers/handler_type.h): whatever the
      // handler, each request then costs the one virtual call it costs today.
      // A route made in code without a type serves static files, as one in a file does.
      const auto* type = dynamic_cast<const handlers::HandlerType*>(
          route.type != nullptr ? route.type : &static_files::handler_type());
      if (type == nullptr) {
        *error = position(route) + ": the route's handler '" +
                 std::string(route.type != nullptr ? route.type->name : "?") +
                 "' has no runtime in this program";
        return {};
      }
      handlers::BuildContext context{route, site, env, *table->mime_, registry, find_group};
      handlers::Runtime made = type->make(context, error);
      if (!made.handler && !made.stream) {
        if (error->empty())
          *error = position(route) + ": handler '" + std::string(type->name) + "' made nothing";
        return {};
      }
      std::shared_ptr<Handler> handler = std::move(made.handler);
      std::shared_ptr<handlers::StreamHandler> stream = std::move(made.stream);
      std::string_view unknown_method_allow =
          route.methods.empty() ? type->default_methods : std::string_view();
      runtime.routes.push_back(
          {&route, std::move(handler), std::move(stream), allow_value(route.methods),
           route.access.any() ? &route.access : nullptr, unknown_method_allow});
      runtime.routes.back().counters =
          metrics::local().route(metrics::site_label(site), metrics::route_label(route));
    }
    if (!site.error_pages.empty() && !site.static_files.root.empty()) {
      config::StaticOptions pages = site.static_files;
      pages.dotfiles = true;  // the operator named these files explicitly
      runtime.error_pages =
          std::make_unique<static_files::StaticHandler>(pages, std::string(), *table->mime_, clock);
    }
    if (site.access_log.format != config::AccessLogFormat::kOff) {
      int sink = log_writer.open_sink(site.access_log.path, error);
      if (sink < 0) return {};
      runtime.access_log = std::make_unique<AccessLogBuffer>(
          log_writer, sink, site.access_log.format,
          site.access_log.format == config::AccessLogFormat::kCustom ? &site.access_log.custom
                                                                     : nullptr);
    }
    table->sites_.push_back(std::move(runtime));
  }
  if (config->admin.enabled) table->admin_ = std::make_unique<Admin>(config, env, *table);
  return table;
}

Selection RouteTable::select_admin(Request& request) {
  Selection selection;
  if (!admin_) {  // [admin] was removed by a reload; its listener stays until a restart
    selection.site = &default_site();
    selection.status = 404;
    return selection;
  }
  selection.site = &admin_->site;
  if (!normalize_request_path(request)) {
    selection.status = 400;
    return selection;
  }
  if (request.method == Method::kUnknown) {
    selection.status = 501;
    return selection;
  }
  selection.route = &admin_->site.routes[static_cast<size_t>(admin::admin_part(request.path))];
  return selection;
}

admin::RouteAnswer RouteTable::test_route(const admin::RouteQuestion& question) {
  Request request;
  request.host = question.host;
  request.target = question.target;
  const size_t mark = question.target.find('?');
  request.raw_path = question.target.substr(0, mark);
  if (mark != std::string_view::npos) request.query = question.target.substr(mark + 1);
  request.method_text = question.method;
  request.method = http2::method_from_text(question.method);
  if (question.asker) {
    request.peer = question.asker->peer;
    request.peer_len = question.asker->peer_len;
    request.socket_peer = question.asker->socket_peer;
    request.socket_peer_len = question.asker->socket_peer_len;
  }
  const Selection selection = select(request);
  admin::RouteAnswer answer;
  answer.site = static_cast<int>(selection.site - sites_.data());
  answer.status = selection.status;
  answer.allow = selection.allow;
  const RouteRuntime* route = selection.route;
  // 405, 401, 403 and 429 are answered on the first route matching the path, which select()
  // does not return: it is found by the same matcher.
  if (!route && selection.status != 404 && selection.status != 400 && selection.status != 413)
    for (const RouteRuntime& r : selection.site->routes)
      if (http::route_matches(*r.config, request.path)) {
        route = &r;
        break;
      }
  if (route) answer.route = static_cast<int>(route->config - selection.site->config->routes.data());
  return answer;
}

Selection RouteTable::select(Request& request) {
  Selection selection;
  SiteRuntime& site = site_for(request.host);
  selection.site = &site;
  selection.headers = site.config->headers.edits.get();
  if (request.tls && tls_ &&
      site.config->tls.verify_client != config::SiteTls::VerifyClient::kOff) {
    std::string_view why;  // a server request's TlsSession is always a tls::Stream
    const int status = tls_->check_client(*static_cast<const tls::Stream*>(request.tls),
                                          static_cast<size_t>(&site - sites_.data()), &why);
    if (status != 0) {
      LOG_INFO("client certificate refused (%d): %.*s", status, static_cast<int>(why.size()),
               why.data());
      selection.status = status;
      return selection;
    }
  }
  if (request.target == "*") {
    request.path = "*";
  } else if (!normalize_request_path(request)) {
    selection.status = 400;
    return selection;
  }
  if (request.content_length > 0 &&
      static_cast<uint64_t>(request.content_length) > config_->limits.max_body_bytes) {
    selection.status = 413;
    return selection;
  }
  if (request.target == "*") {
    selection.status = 204;
    selection.allow = kServerMethods;
    return selection;
  }
  for (const RouteRuntime& route : site.routes) {
    if (!http::route_matches(*route.config, request.path)) continue;
    selection.headers = route.config->headers.edits.get();
    if (route.access && refuse_by_access(*route.access, request, selection)) return selection;
    if (!http::method_allowed(*route.config, request.method_text)) {
      selection.status = 405;
      selection.allow = route.allow;
      return selection;
    }
    if (request.method == Method::kUnknown && !route.unknown_method_allow.empty()) {
      selection.status = 405;
      selection.allow = route.unknown_method_allow;
      return selection;
    }
    // After allow/deny and the rate limit (which keep a flood of guesses from reaching here).
    if (const auth::Htpasswd* users = route.config->auth.users.get()) {
      request.remote_user = auth_->check(*users, request);
      if (request.remote_user.empty()) {
        selection.status = 401;
        selection.challenge = route.config->auth.challenge;
        return selection;
      }
    }
    selection.route = &route;
    return selection;
  }
  if (site.access && refuse_by_access(*site.access, request, selection)) return selection;
  selection.status = 404;
  return selection;
}

bool RouteTable::refuse_by_access(const access::Options& options, Request& request,
                                  Selection& selection) {
  selection.access = &options;
  const access::Decision decision =
      access::check(options, request, clock_->monotonic_ms * int64_t{1000});
  selection.delay_ms = decision.delay_ms;
  if (decision.status == 0) return false;
  selection.status = decision.status;
  selection.retry_after = decision.retry_after_s;
  return true;
}

void SiteRuntime::fill_error_body(const Request& request, Response& response) const {
  const int status = response.status();
  if (error_pages) {
    auto page = config->error_pages.find(status);
    if (page != config->error_pages.end() &&
        error_pages->serve_error_page(page->second, status, request, response))
      return;
  }
  std::string_view reason = http::reason_phrase(status);
  std::string body = "<!DOCTYPE html>\n<html><head><title>";
  append_decimal(body, static_cast<uint64_t>(status));
  body.append(" ").append(reason).append("</title></head><body><h1>");
  append_decimal(body, static_cast<uint64_t>(status));
  body.append(" ").append(reason).append("</h1></body></html>\n");
  response.set_content_type("text/html; charset=utf-8");
  response.set_body(body);
}

SiteRuntime& RouteTable::site_for(std::string_view host) {
  return sites_[http::select_site(*config_, host)];
}

void RouteTable::apply_operator_states() {
  for (auto& group : groups_) group->apply_operator_states();
}

void RouteTable::flush_logs() {
  for (SiteRuntime& site : sites_)
    if (site.access_log) site.access_log->flush();
  for (const std::unique_ptr<upstream::GroupRuntime>& group : groups_)
    group->report_suppressed_lines();
}

}  // namespace peregrine::server
