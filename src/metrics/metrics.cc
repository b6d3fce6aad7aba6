#include "metrics/metrics.h"

namespace peregrine::metrics {

WorkerMetrics g_unread;

const char* to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::kHttp10:
      return "HTTP/1.0";
    case Protocol::kHttp11:
      return "HTTP/1.1";
    case Protocol::kHttp2:
      return "HTTP/2";
  }
  return "HTTP/1.1";
}

const char* failure_kind_name(int kind) {
  static constexpr const char* kNames[kFailureKinds] = {"refused", "connect_timeout", "reset",
                                                        "timeout", "timeout_in_body", "malformed"};
  return kind >= 0 && kind < kFailureKinds ? kNames[kind] : "other";
}

RouteCounters* WorkerMetrics::route(std::string_view site, std::string_view route) {
  return routes.find_or_add(
      [&](const RouteCounters& c) { return c.site == site && c.route == route; },
      [&](RouteCounters& c) {
        c.site = site;
        c.route = route;
      });
}

UpstreamServerCounters* WorkerMetrics::upstream_server(std::string_view group,
                                                       std::string_view server, bool backup) {
  return upstream_servers.find_or_add(
      [&](const UpstreamServerCounters& c) { return c.group == group && c.server == server; },
      [&](UpstreamServerCounters& c) {
        c.group = group;
        c.server = server;
        c.backup = backup;
      });
}

UpstreamGroupCounters* WorkerMetrics::upstream_group(std::string_view group) {
  return upstream_groups.find_or_add(
      [&](const UpstreamGroupCounters& c) { return c.group == group; },
      [&](UpstreamGroupCounters& c) { c.group = group; });
}

WorkerMetrics& Registry::add_worker() {
  return *workers_.find_or_add([](const WorkerMetrics&) { return false; }, [](WorkerMetrics&) {});
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: worker threads may outlive main's exit
  return *r;
}

}  // namespace peregrine::metrics
