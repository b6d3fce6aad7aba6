// The admin API's router: a Handler that the admin listener's connections reach for every
// request (server/route_table.cc builds one per worker and snapshot). It checks the Host (DNS
// rebinding) and the credentials, then dispatches on the path to a small table of endpoints.
//
// Read-only endpoints now: GET /metrics (Prometheus text 0.0.4), GET /api/stats (the same
// figures as JSON), GET /api/status. Figures are read from every worker's single-writer
// counters directly (metrics::gather): a read never waits for a worker or interrupts one, and
// it is as fresh as the workers' last store. Endpoints that change state (config, reload,
// drain) will go through the workers' mailboxes instead.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "peregrine/handler.h"

namespace peregrine::admin {

// True when `host` (a Host header value, with or without a port) may reach the admin: an IP
// literal (a DNS-rebinding attack needs a name the attacker controls), "localhost", or one of
// `names` (lower-case). An empty Host (HTTP/1.0) is accepted: browsers always send one.
bool host_allowed(std::string_view host, const std::vector<std::string>& names);

// True when `authorization` is "Bearer <token>" with exactly `token`; the comparison of the
// token's bytes takes the same time wherever they differ.
bool bearer_matches(std::string_view authorization, std::string_view token);

class AdminHandler final : public Handler {
 public:
  explicit AdminHandler(std::shared_ptr<const config::Config> config);
  void handle(const Request& request, Response& response) override;
  // The Host check and the credentials, for every admin handler (live_api.h, log_tail.h): true
  // when the request may go on, else `response` holds the refusal.
  bool admit(const Request& request, Response& response);
  // An error answer {"error": why} with a log line.
  void refuse(const Request& request, Response& response, int status, std::string_view why);

  struct Endpoint {
    std::string_view path;
    void (AdminHandler::*serve)(const Request&, Response&);
  };

 private:
  void serve_metrics(const Request& request, Response& response);
  void serve_stats(const Request& request, Response& response);
  void serve_status(const Request& request, Response& response);

  std::shared_ptr<const config::Config> config_;
};

}  // namespace peregrine::admin
