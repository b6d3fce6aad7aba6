#include "admin/live_api.h"

#include "core/log.h"
#include "http/path.h"
#include "metrics/render.h"
#include "upstream/operator_state.h"

namespace peregrine::admin {

namespace {

constexpr std::string_view kServersPrefix = "/api/upstreams/";

void send_json(Response& response, int status, const std::string& body) {
  response.set_status(status);
  response.set_content_type("application/json");
  response.add_header("Cache-Control", "no-store");
  response.set_body(body);
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  metrics::append_json_string(out, key);
  out += ':';
  metrics::append_json_string(out, value);
}

void append_list(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    metrics::append_json_string(out, items[i]);
  }
  out += ']';
}

const metrics::UpstreamServerFigures* find_figures(const metrics::Snapshot& s,
                                                   std::string_view group,
                                                   std::string_view server) {
  for (const auto& f : s.upstream_servers)
    if (f.group == group && f.server == server) return &f;
  return nullptr;
}

int64_t queue_of(const metrics::Snapshot& s, std::string_view group) {
  for (const auto& g : s.upstream_groups)
    if (g.group == group) return g.queue_length;
  return 0;
}

}  // namespace

AdminPart admin_part(std::string_view path) {
  if (path == "/api/logs") return AdminPart::kLogs;
  if (path == "/api/upstreams" || path.starts_with(kServersPrefix) || path == "/api/routes" ||
      path == "/api/route-test")
    return AdminPart::kLive;
  return AdminPart::kRouter;
}

RouteDescription describe_route(const config::Route& route) {
  RouteDescription d;
  switch (route.match) {
    case config::MatchKind::kExact:
      d.match = "exact " + route.pattern;
      break;
    case config::MatchKind::kPrefix:
      d.match = "prefix " + route.pattern;
      break;
    case config::MatchKind::kExtension:
      d.match = "extension " + route.pattern;
      break;
    case config::MatchKind::kRegex:
      d.match = "regex " + route.pattern;
      break;
  }
  // What the route's registration says about it (config/handler_type.h).
  // A route without one (made in code) serves static files, as one in a file does.
  if (route.type != nullptr) {
    d.handler = std::string(route.type->name);
    d.target = route.type->describe(route);
  } else {
    d.handler = "static";
    d.target = route.static_files.root;
  }
  return d;
}

std::optional<ServerAction> parse_server_action(std::string_view raw_path) {
  if (!raw_path.starts_with(kServersPrefix)) return std::nullopt;
  std::string_view rest = raw_path.substr(kServersPrefix.size());
  std::string_view parts[4];
  for (int i = 0; i < 4; ++i) {
    const size_t slash = rest.find('/');
    if ((slash == std::string_view::npos) != (i == 3)) return std::nullopt;
    parts[i] = rest.substr(0, slash);
    if (parts[i].empty()) return std::nullopt;
    rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
  }
  if (parts[1] != "servers") return std::nullopt;
  std::optional<std::string> group = http::percent_decode(parts[0], false);
  std::optional<std::string> server = http::percent_decode(parts[2], false);
  if (!group || !server) return std::nullopt;
  return ServerAction{std::move(*group), std::move(*server), std::string(parts[3])};
}

std::optional<std::string> query_value(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    if (eq == std::string_view::npos) return std::string();
    return http::percent_decode(pair.substr(eq + 1), true);
  }
  return std::nullopt;
}

void append_server_json(std::string& out, const config::UpstreamServer& server,
                        const metrics::UpstreamServerFigures* f, int64_t queue,
                        const char* operator_state) {
  // The operator's table is the intent; the workers' figures follow it within an event.
  const char* state = f ? f->state : "up";
  if (*operator_state)
    state = operator_state;
  else if (std::string_view(state) == "drained" || std::string_view(state) == "disabled")
    state = server.backup ? "backup" : "up";
  out += '{';
  append_field(out, "address", server.address);
  out += ",\"backup\":";
  out += server.backup ? "true" : "false";
  out += ',';
  append_field(out, "state", state);
  uint64_t failures = 0;
  if (f)
    for (uint64_t n : f->failures) failures += n;
  out += ",\"in_flight\":" + std::to_string(f ? f->in_flight : 0);
  out += ",\"queue\":" + std::to_string(queue);
  out += ",\"requests\":" + std::to_string(f ? f->requests : 0);
  out += ",\"failures\":" + std::to_string(failures);
  out += ",\"failures_by_kind\":{";
  for (int k = 0; k < metrics::kFailureKinds; ++k) {
    if (k) out += ',';
    metrics::append_json_string(out, metrics::failure_kind_name(k));
    out += ':' + std::to_string(f ? f->failures[k] : 0);
  }
  out += "},\"idle\":" + std::to_string(f ? f->idle : 0);
  out += ",\"last_check\":";
  if (f && f->last_check_seconds > 0) {
    out += "{\"ok\":";
    out += f->last_check_ok ? "true" : "false";
    out += ",\"time\":" + std::to_string(f->last_check_seconds) + ',';
    append_field(out, "detail", f->last_check_ok ? "passed" : "failed (the error log says why)");
    out += '}';
  } else {
    out += "null";
  }
  out += ",\"history\":[";
  if (f)
    for (size_t i = 0; i < f->history.size(); ++i) {
      if (i) out += ',';
      out += "{\"time\":" + std::to_string(f->history[i].seconds) + ",\"ok\":";
      out += f->history[i].ok ? "true}" : "false}";
    }
  out += "]}";
}

void LiveHandler::handle(const Request& request, Response& response) {
  if (!router_->admit(request, response)) return;
  const bool read = request.method == Method::kGet || request.method == Method::kHead;
  if (request.path.starts_with(kServersPrefix)) {
    if (request.method != Method::kPost) {
      response.add_header("Allow", "POST");
      refuse(request, response, 405, "a server's drain, disable and enable are POSTs");
      return;
    }
    serve_server_action(request, response);
    return;
  }
  if (!read) {
    response.add_header("Allow", "GET, HEAD");
    refuse(request, response, 405, "this endpoint only answers GET");
    return;
  }
  if (request.path == "/api/upstreams")
    serve_upstreams(response);
  else if (request.path == "/api/routes")
    serve_routes(response);
  else
    serve_route_test(request, response);
}

void LiveHandler::serve_upstreams(Response& response) {
  const metrics::Snapshot s = metrics::gather_now(metrics::registry());
  std::string out = "{\"upstreams\":[";
  for (size_t g = 0; g < config_->upstreams.size(); ++g) {
    const config::UpstreamGroup& group = config_->upstreams[g];
    if (g) out += ',';
    out += '{';
    append_field(out, "name", group.name);
    const int64_t queue = queue_of(s, group.name);
    out += ",\"queue\":" + std::to_string(queue);
    out += ",\"health_check\":";
    out += group.health_check.enabled ? "true" : "false";
    out += ",\"servers\":[";
    for (size_t i = 0; i < group.servers.size(); ++i) {
      if (i) out += ',';
      const config::UpstreamServer& server = group.servers[i];
      append_server_json(
          out, server, find_figures(s, group.name, server.address), queue,
          upstream::to_string(upstream::operator_states().get(group.name, server.address)));
    }
    out += "]}";
  }
  out += "]}\n";
  send_json(response, 200, out);
}

void LiveHandler::serve_server_action(const Request& request, Response& response) {
  std::optional<ServerAction> a = parse_server_action(request.raw_path);
  if (!a) {
    refuse(request, response, 404,
           "expected /api/upstreams/GROUP/servers/ADDRESS/{drain,disable,enable} "
           "(an address with '/' as %2F)");
    return;
  }
  const std::optional<upstream::OperatorState> state = upstream::operator_action(a->action);
  if (!state) {
    refuse(request, response, 404, "the action is drain, disable or enable");
    return;
  }
  for (const config::UpstreamGroup& group : config_->upstreams) {
    if (group.name != a->group) continue;
    for (const config::UpstreamServer& server : group.servers) {
      if (server.address != a->server) continue;
      upstream::operator_states().set(group.name, server.address, *state);
      LOG_INFO("admin: upstream %s: server %s %s", group.name.c_str(), server.address.c_str(),
               *state == upstream::OperatorState::kNone ? "enabled" : upstream::to_string(*state));
      const metrics::Snapshot s = metrics::gather_now(metrics::registry());
      std::string out;
      append_server_json(out, server, find_figures(s, group.name, server.address),
                         queue_of(s, group.name), upstream::to_string(*state));
      out += '\n';
      send_json(response, 200, out);
      return;
    }
    refuse(request, response, 404,
           "group \"" + a->group + "\" has no server \"" + a->server + "\"");
    return;
  }
  refuse(request, response, 404, "no upstream group \"" + a->group + "\"");
}

void LiveHandler::serve_routes(Response& response) {
  std::string out = "{\"sites\":[";
  std::vector<std::string> listen;
  for (const config::ListenAddress& l : config_->listen)
    if (!l.admin) listen.push_back(l.text);
  for (size_t i = 0; i < config_->sites.size(); ++i) {
    const config::Site& site = config_->sites[i];
    if (i) out += ',';
    out += "{\"index\":" + std::to_string(i) + ",\"names\":";
    append_list(out, site.hosts);
    out += ",\"default\":";
    out += i == config_->default_site ? "true" : "false";
    out += ",\"listen\":";
    append_list(out, listen);
    out += ",\"routes\":[";
    for (size_t r = 0; r < site.routes.size(); ++r) {
      const config::Route& route = site.routes[r];
      const RouteDescription d = describe_route(route);
      if (r) out += ',';
      out += "{\"index\":" + std::to_string(r) + ',';
      append_field(out, "match", d.match);
      out += ",\"methods\":";
      append_list(out, route.methods);
      out += ',';
      append_field(out, "handler", d.handler);
      out += ',';
      append_field(out, "target", d.target);
      out += '}';
    }
    out += "]}";
  }
  out += "]}\n";
  send_json(response, 200, out);
}

void LiveHandler::serve_route_test(const Request& request, Response& response) {
  const std::optional<std::string> host = query_value(request.query, "host");
  const std::optional<std::string> path = query_value(request.query, "path");
  std::optional<std::string> method = query_value(request.query, "method");
  if (!host || !path || path->empty() || (*path)[0] != '/') {
    refuse(request, response, 400,
           "expected ?host=H&path=/P[&method=M] (host and an absolute path)");
    return;
  }
  if (!method || method->empty()) method = "GET";
  const RouteAnswer answer = probe_({*host, *path, *method, &request});
  std::string out = "{";
  if (answer.site >= 0) {
    const config::Site& site = config_->sites[static_cast<size_t>(answer.site)];
    out += "\"site\":" + std::to_string(answer.site) + ",\"site_names\":";
    append_list(out, site.hosts);
  } else {
    out += "\"site\":null";
  }
  if (answer.route >= 0 && answer.site >= 0) {
    const config::Route& route =
        config_->sites[static_cast<size_t>(answer.site)].routes[static_cast<size_t>(answer.route)];
    const RouteDescription d = describe_route(route);
    out += ",\"route\":" + std::to_string(answer.route) + ',';
    append_field(out, "match", d.match);
    out += ',';
    append_field(out, "handler", d.handler);
    out += ',';
    append_field(out, "target", d.target);
    // A return route's status is known now (fixed_status); other handlers decide when they run.
    out += ",\"status\":";
    if (answer.status != 0)  // refused on this route (405, 401, 403, 429)
      out += std::to_string(answer.status);
    else if (std::optional<int> status =
                 route.type != nullptr ? route.type->fixed_status(route) : std::nullopt)
      out += std::to_string(*status);
    else
      out += "null";
  } else {
    out += ",\"route\":null,\"match\":null,\"handler\":null,\"target\":null,\"status\":" +
           std::to_string(answer.status);
  }
  if (!answer.allow.empty()) {
    out += ',';
    append_field(out, "allow", answer.allow);
  }
  out += "}\n";
  send_json(response, 200, out);
}

}  // namespace peregrine::admin
