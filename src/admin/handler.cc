#include "admin/handler.h"

#include <openssl/crypto.h>
#include <time.h>

#include <cctype>

#include "core/address_text.h"
#include "core/log.h"
#include "metrics/render.h"
#include "metrics/snapshot.h"

namespace peregrine::admin {

namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool is_ipv4_literal(std::string_view host) {
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

metrics::Snapshot take_snapshot() {
  metrics::Snapshot s = metrics::gather_now(metrics::registry());
  metrics::read_process_figures(s);
  return s;
}

void send_json(Response& response, std::string body) {
  response.set_status(200);
  response.set_content_type("application/json");
  response.add_header("Cache-Control", "no-store");
  response.set_body(body);
}

}  // namespace

bool host_allowed(std::string_view host, const std::vector<std::string>& names) {
  if (host.empty()) return true;
  if (host.front() == '[') return host.find(']') != std::string_view::npos;  // an IPv6 literal
  if (size_t colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  if (host.ends_with('.')) host.remove_suffix(1);
  if (is_ipv4_literal(host) || equal_ignoring_case(host, "localhost")) return true;
  for (const std::string& name : names)
    if (equal_ignoring_case(host, name)) return true;
  return false;
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "bearer ";
  if (token.empty() || authorization.size() < kScheme.size() ||
      !equal_ignoring_case(authorization.substr(0, kScheme.size()), kScheme))
    return false;
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  // The length is no secret worth hiding (the token file's length is up to the operator); the
  // bytes are compared in constant time.
  if (given.size() != token.size()) return false;
  return CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

AdminHandler::AdminHandler(std::shared_ptr<const config::Config> config)
    : config_(std::move(config)) {}

void AdminHandler::refuse(const Request& request, Response& response, int status,
                          std::string_view why) {
  const AddressText peer(request.peer);
  LOG_WARN("admin: %d for \"%.*s %.*s\" from %.*s: %.*s", status,
           static_cast<int>(request.method_text.size()), request.method_text.data(),
           static_cast<int>(request.target.size()), request.target.data(),
           static_cast<int>(peer.ip_length), peer.ip, static_cast<int>(why.size()), why.data());
  response.set_status(status);
  response.set_content_type("application/json");
  if (status == 401) response.add_header("WWW-Authenticate", "Bearer realm=\"peregrine admin\"");
  std::string body = "{\"error\":";
  metrics::append_json_string(body, why);
  body += "}\n";
  response.set_body(body);
}

bool AdminHandler::admit(const Request& request, Response& response) {
  const admin::Options& options = config_->admin;
  if (!host_allowed(request.host, options.hosts)) {
    refuse(request, response, 403,
           "Host not allowed (add it to [admin] hosts if the admin is reached by that name)");
    return false;
  }
  if (options.auth == Auth::kToken) {
    std::optional<std::string_view> authorization = request.header("Authorization");
    if (!authorization) {
      refuse(request, response, 401, "credentials required: Authorization: Bearer TOKEN");
      return false;
    }
    if (!bearer_matches(*authorization, options.token)) {
      refuse(request, response, 401, "wrong credentials");
      return false;
    }
  }
  return true;
}

void AdminHandler::handle(const Request& request, Response& response) {
  if (!admit(request, response)) return;
  static constexpr Endpoint kRoutes[] = {
      {"/metrics", &AdminHandler::serve_metrics},
      {"/api/stats", &AdminHandler::serve_stats},
      {"/api/status", &AdminHandler::serve_status},
  };
  for (const Endpoint& e : kRoutes) {
    if (request.path != e.path) continue;
    if (request.method != Method::kGet && request.method != Method::kHead) {
      response.add_header("Allow", "GET, HEAD");
      refuse(request, response, 405, "this endpoint only answers GET");
      return;
    }
    (this->*e.serve)(request, response);
    return;
  }
  response.set_status(404);
  response.set_content_type("application/json");
  response.set_body(
      "{\"error\":\"no such endpoint\",\"endpoints\":[\"/metrics\",\"/api/stats\","
      "\"/api/status\"]}\n");
}

void AdminHandler::serve_metrics(const Request&, Response& response) {
  response.set_status(200);
  response.set_content_type("text/plain; version=0.0.4; charset=utf-8");
  response.add_header("Cache-Control", "no-store");
  response.set_body(metrics::render_prometheus(take_snapshot()));
}

void AdminHandler::serve_stats(const Request&, Response& response) {
  send_json(response, metrics::render_json(take_snapshot()));
}

void AdminHandler::serve_status(const Request&, Response& response) {
  metrics::Snapshot s = take_snapshot();
  std::string body = "{\"version\":";
  metrics::append_json_string(body, s.version);
  body += ",\"uptime_seconds\":" + std::to_string(static_cast<int64_t>(s.uptime_seconds));
  body += ",\"start_time_seconds\":" + std::to_string(s.start_seconds);
  body += ",\"workers\":" + std::to_string(s.workers);
  body += ",\"generation\":" + std::to_string(s.generation);
  body += ",\"config_source\":";
  metrics::append_json_string(body, config_->source);
  body += ",\"listeners\":[";
  bool first = true;
  for (const config::ListenAddress& l : config_->listen) {
    if (!first) body += ',';
    first = false;
    body += "{\"address\":";
    metrics::append_json_string(body, l.text);
    body += ",\"kind\":";
    body += l.admin ? "\"admin\"" : "\"http\"";
    body += ",\"tls\":";
    body += l.tls ? "true" : "false";
    body += ",\"http2\":";
    body += l.http2 ? "true" : "false";
    body += '}';
  }
  body += "]}\n";
  send_json(response, std::move(body));
}

}  // namespace peregrine::admin
