#include "admin/handler.h"

#include <time.h>

#include "admin/config_api.h"
#include "admin/json.h"
#include "admin/ui.h"
#include "auth/htpasswd.h"
#include "core/address_text.h"
#include "core/log.h"
#include "core/strings.h"
#include "metrics/render.h"
#include "metrics/snapshot.h"

namespace peregrine::admin {

namespace {

metrics::Snapshot take_snapshot() {
  metrics::Snapshot s = metrics::gather_now(metrics::registry());
  metrics::read_process_figures(s);
  return s;
}

void serve_metrics(const Context&, const Request&, Response& response) {
  response.set_status(200);
  response.set_content_type("text/plain; version=0.0.4; charset=utf-8");
  response.add_header("Cache-Control", "no-store");
  response.set_body(metrics::render_prometheus(take_snapshot()));
}

void serve_stats(const Context&, const Request&, Response& response) {
  send_json(response, metrics::render_json(take_snapshot()));
}

void serve_status(const Context& context, const Request&, Response& response) {
  metrics::Snapshot s = take_snapshot();
  std::string body = "{\"version\":";
  metrics::append_json_string(body, s.version);
  body += ",\"uptime_seconds\":" + std::to_string(static_cast<int64_t>(s.uptime_seconds));
  body += ",\"start_time_seconds\":" + std::to_string(s.start_seconds);
  body += ",\"workers\":" + std::to_string(s.workers);
  body += ",\"generation\":" + std::to_string(s.generation);
  body += ",\"config_source\":";
  metrics::append_json_string(body, context.config.source);
  body += ",\"listeners\":[";
  bool first = true;
  for (const config::ListenAddress& l : context.config.listen) {
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
  send_json(response, body);
}

void send_api(Response& response, const ApiAnswer& answer) {
  if (!answer.etag.empty()) response.add_header("ETag", answer.etag);
  send_json(response, answer.body, answer.status);
}

void serve_get_config(const Context&, const Request&, Response& response) {
  send_api(response, get_config());
}

void serve_validate(const Context&, const Request& request, Response& response) {
  send_api(response, validate_config(request.body));
}

void serve_put_config(const Context&, const Request& request, Response& response) {
  send_api(response, put_config(request.body, request.header("If-Match")));
}

void serve_history(const Context&, const Request&, Response& response) {
  send_api(response, config_history());
}

void serve_version(const Context&, const Request& request, Response& response) {
  send_api(response, config_version(request.path.substr(request.path.rfind('/') + 1)));
}

void serve_rollback(const Context&, const Request& request, Response& response) {
  std::optional<std::string> etag = json_string_member(request.body, "etag");
  if (!etag) {
    send_json(response, "{\"error\":\"the body must be {\\\"etag\\\": \\\"...\\\"}\"}\n", 400);
    return;
  }
  send_api(response, rollback_config(*etag));
}

void serve_reload(const Context&, const Request&, Response& response) {
  send_api(response, reload_config());
}

std::string client_address(const Request& request) {
  const AddressText peer(request.peer);
  return std::string(peer.ip, peer.ip_length);
}

// Login and logout, which authorize() does not see, still check the Host and refuse another
// site's page (true: refused, the answer is set).
bool refused_before_credentials(const Context& context, const Request& request,
                                Response& response) {
  std::optional<std::string_view> origin = request.header("Origin");
  if (!host_allowed(request.host, context.config.admin.hosts))
    refuse(request, response, 403, "Host not allowed");
  else if (origin && !ascii_iequals(*origin, own_origin(request)))
    refuse(request, response, 403, "cross-origin request refused (Origin is not this admin's)");
  else
    return false;
  return true;
}

void set_session_cookie(const Request& request, Response& response, std::string_view value,
                        bool clear) {
  std::string cookie(kSessionCookie);
  cookie += '=';
  cookie += value;
  cookie += "; HttpOnly; SameSite=Strict; Path=/";
  if (clear)
    cookie += "; Max-Age=0";
  else
    cookie += "; Max-Age=" + std::to_string(SessionTable::kLifetimeSeconds);
  if (request.secure) cookie += "; Secure";
  response.add_header("Set-Cookie", cookie);
}

void serve_login(const Context& context, const Request& request, Response& response) {
  const Options& options = context.config.admin;
  if (refused_before_credentials(context, request, response)) return;
  if (options.auth == Auth::kNone) {
    response.set_status(204);
    return;
  }
  const std::string client = client_address(request);
  const int64_t now = monotonic_seconds();
  if (int64_t wait = login_limiter().retry_after(client, now)) {
    response.add_header("Retry-After", std::to_string(wait));
    return refuse(request, response, 429, "too many failed logins from this address; wait");
  }
  std::optional<std::string> password = json_string_member(request.body, "password");
  std::optional<std::string> token = json_string_member(request.body, "token");
  if (!password && !token)
    return refuse(request, response, 400,
                  "the body must be {\"password\": \"...\"} or {\"token\": \"...\"}");
  bool ok = false;
  if (password && !options.password_hash.empty()) {
    auth::HashKind kind;
    ok = auth::hash_kind(options.password_hash, &kind) &&
         auth::verify_hash(options.password_hash, kind, *password);
  }
  if (token && !ok) ok = bearer_matches("Bearer " + *token, options.token);
  if (!ok) {
    login_limiter().failed(client, now);
    return refuse(request, response, 401, "failed login: wrong password or token");
  }
  login_limiter().succeeded(client);
  std::string id = sessions().create(now);
  if (id.empty()) return refuse(request, response, 500, "no random session id could be made");
  LOG_INFO("admin: login from %s", client.c_str());
  set_session_cookie(request, response, id, false);
  response.set_status(204);
}

void serve_logout(const Context& context, const Request& request, Response& response) {
  if (refused_before_credentials(context, request, response)) return;
  if (std::optional<std::string_view> cookie = request.header("Cookie")) {
    std::string_view id = cookie_value(*cookie, kSessionCookie);
    if (!id.empty()) sessions().remove(id);
  }
  set_session_cookie(request, response, "", true);
  response.set_status(204);
}

}  // namespace

const std::vector<Endpoint>& endpoints() {
  static const std::vector<Endpoint> table = {
      {"GET", "/metrics", false, serve_metrics},
      {"GET", "/api/stats", false, serve_stats},
      {"GET", "/api/status", false, serve_status},
      {"POST", "/api/login", true, serve_login},
      {"POST", "/api/logout", true, serve_logout},
      {"GET", "/api/config", false, serve_get_config},
      {"PUT", "/api/config", false, serve_put_config},
      {"POST", "/api/config/validate", false, serve_validate},
      {"GET", "/api/config/history", false, serve_history},
      {"GET", "/api/config/history/", false, serve_version},
      {"POST", "/api/config/rollback", false, serve_rollback},
      {"POST", "/api/reload", false, serve_reload},
  };
  return table;
}

void refuse(const Request& request, Response& response, int status, std::string_view why) {
  const AddressText peer(request.peer);
  LOG_WARN("admin: %d for \"%.*s %.*s\" from %.*s: %.*s", status,
           static_cast<int>(request.method_text.size()), request.method_text.data(),
           static_cast<int>(request.target.size()), request.target.data(),
           static_cast<int>(peer.ip_length), peer.ip, static_cast<int>(why.size()), why.data());
  if (status == 401) response.add_header("WWW-Authenticate", "Bearer realm=\"peregrine admin\"");
  std::string body = "{\"error\":";
  metrics::append_json_string(body, why);
  body += "}\n";
  send_json(response, body, status);
}

void send_json(Response& response, std::string_view body, int status) {
  response.set_status(status);
  response.set_content_type("application/json");
  response.add_header("Cache-Control", "no-store");
  response.set_body(body);
}

AdminHandler::AdminHandler(std::shared_ptr<const config::Config> config)
    : config_(std::move(config)) {}

bool AdminHandler::admit(const Request& request, Response& response) const {
  Access access = authorize(request, config_->admin);
  if (access.status == 0) return true;
  refuse(request, response, access.status, access.why);
  return false;
}

void AdminHandler::handle(const Request& request, Response& response) {
  // The page and its files hold no secret (every figure comes from the API, which asks for
  // credentials), but DNS rebinding must not reach them either.
  if (find_ui_asset(request.path)) {
    if (!host_allowed(request.host, config_->admin.hosts))
      return refuse(request, response, 403,
                    "Host not allowed (add it to [admin] hosts if the admin is reached by that "
                    "name)");
    if (serve_ui(request, response)) return;
  }
  auto path_matches = [&](const Endpoint& e) {
    return e.path.ends_with('/')
               ? request.path.starts_with(e.path) && request.path.size() > e.path.size()
               : request.path == e.path;
  };
  std::string_view method = request.method_text;
  if (request.method == Method::kHead) method = "GET";
  const Endpoint* found = nullptr;
  std::string allow;
  for (const Endpoint& e : endpoints()) {
    if (!path_matches(e)) continue;
    if (!allow.empty()) allow += ", ";
    allow += e.method;
    if (e.method == "GET") allow += ", HEAD";
    if (e.method == method) found = &e;
  }
  // Credentials first: without them, which paths exist is nobody's business.
  if (!found || !found->open) {
    if (!admit(request, response)) return;
  }
  if (!found && allow.empty()) {
    std::string body = "{\"error\":\"no such endpoint\",\"endpoints\":[";
    bool first = true;
    for (const Endpoint& e : endpoints()) {
      if (!first) body += ',';
      first = false;
      metrics::append_json_string(body, std::string(e.method) + " " + std::string(e.path));
    }
    body += "]}\n";
    return send_json(response, body, 404);
  }
  if (!found) {
    response.add_header("Allow", allow);
    return refuse(request, response, 405, "this endpoint only answers " + allow);
  }
  found->serve(Context{*config_}, request, response);
}

}  // namespace peregrine::admin
