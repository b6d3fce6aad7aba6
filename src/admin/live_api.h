// The admin's run-time endpoints (issue 14, item 3; docs/metrics.md, "Upstreams, routes, logs"):
//
//   GET  /api/upstreams                                   every group and server, live
//   POST /api/upstreams/GROUP/servers/ADDRESS/ACTION       drain, disable or enable a server
//   GET  /api/routes                                      the running snapshot's sites and routes
//   GET  /api/route-test?host=H&path=P&method=M           what the route table does with that
//   GET  /api/logs?stream=...&filter=...                  (log_tail.h: server-sent events)
//
// The admin site has one route per part (RouteTable::select_admin asks admin_part()): the router
// of admin/handler.h, this handler, and the log tail, which must answer asynchronously. Each
// checks the credentials with AdminHandler::admit() first.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "admin/handler.h"
#include "config/config.h"
#include "metrics/snapshot.h"
#include "peregrine/handler.h"

namespace peregrine::admin {

enum class AdminPart { kRouter, kLive, kLogs };
// Which of the admin's handlers answers `path` (normalized).
AdminPart admin_part(std::string_view path);

// A request the route table is asked about (GET /api/route-test), and its answer.
struct RouteQuestion {
  std::string_view host;
  std::string_view target;  // path and query, as a client would send it
  std::string_view method;
  const Request* asker = nullptr;  // the admin request: its client address judges allow/deny
};
struct RouteAnswer {
  int site = -1;   // index into Config::sites
  int route = -1;  // index into that site's routes; -1 when the route table answers itself
  int status = 0;  // the route table's own answer (400, 404, 405, 401, 403...); 0 with a route
  std::string allow;
};
// RouteTable::test_route, the real selection (server/route_table.cc).
using RouteProbe = std::function<RouteAnswer(const RouteQuestion&)>;

// What a route says about itself: "prefix /app/", its handler's name and target.
struct RouteDescription {
  std::string match;
  std::string handler;  // "static", "return", "fastcgi", "proxy", "ajp", "application"
  std::string target;   // the root, the upstream group, the return's status and location...
};
RouteDescription describe_route(const config::Route& route);

// POST /api/upstreams/GROUP/servers/ADDRESS/ACTION, from the raw (percent-encoded) path: an
// address with '/' (unix:/run/x.sock) is sent as %2F. Nullopt when the path is not of that shape.
struct ServerAction {
  std::string group;
  std::string server;
  std::string action;
};
std::optional<ServerAction> parse_server_action(std::string_view raw_path);
// A query parameter's value, percent-decoded ('+' is a space); nullopt when absent.
std::optional<std::string> query_value(std::string_view query, std::string_view name);

// The JSON of one server of GET /api/upstreams. `figures` may be null (no worker has built the
// group yet); `queue` is the group's wait queue; `operator_state` what the admin set ("" none).
void append_server_json(std::string& out, const config::UpstreamServer& server,
                        const metrics::UpstreamServerFigures* figures, int64_t queue,
                        const char* operator_state);

class LiveHandler final : public Handler {
 public:
  LiveHandler(std::shared_ptr<const config::Config> config, std::shared_ptr<AdminHandler> router,
              RouteProbe probe)
      : config_(std::move(config)), router_(std::move(router)), probe_(std::move(probe)) {}
  void handle(const Request& request, Response& response) override;

 private:
  void serve_upstreams(Response& response);
  void serve_server_action(const Request& request, Response& response);
  void serve_routes(Response& response);
  void serve_route_test(const Request& request, Response& response);

  std::shared_ptr<const config::Config> config_;
  std::shared_ptr<AdminHandler> router_;
  RouteProbe probe_;
};

}  // namespace peregrine::admin
