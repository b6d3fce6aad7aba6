// The admin API's router: a Handler that the admin listener's connections reach for every
// request (server/route_table.cc builds one per worker and snapshot). It finds the endpoint in
// one table (method, path), asks authorize() (admin/session.h: Host, credentials, Origin)
// unless the endpoint is public, and calls it. See docs/admin.md.
//
// Figures are read from every worker's single-writer counters directly (metrics::gather): a
// read never waits for a worker. Configuration changes go through admin/config_api.h, which
// hands the reload to the process (admin/control.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "admin/session.h"
#include "config/config.h"
#include "peregrine/handler.h"

namespace peregrine::admin {

// What an endpoint gets besides the request: the snapshot this worker's admin was built from.
struct Context {
  const config::Config& config;
};

struct Endpoint {
  std::string_view method;  // "GET" (which also answers HEAD), "POST", "PUT", "DELETE"
  std::string_view path;    // exact, or every path below it when it ends with '/'
  bool open;                // true: no authorize() (the UI page, its assets, login, logout)
  void (*serve)(const Context&, const Request&, Response&);
};

// The endpoint table (handler.cc). To add an endpoint, add a line there calling a function
// with the `serve` signature, declared in the endpoint's own header.
const std::vector<Endpoint>& endpoints();

// Answers `status` with {"error": why} (401: with WWW-Authenticate) and logs a warning naming
// the client's address.
void refuse(const Request& request, Response& response, int status, std::string_view why);
// 200 (unless set otherwise before), application/json, Cache-Control: no-store.
void send_json(Response& response, std::string_view body, int status = 200);

class AdminHandler final : public Handler {
 public:
  explicit AdminHandler(std::shared_ptr<const config::Config> config);
  void handle(const Request& request, Response& response) override;
  bool wants_body() const override { return true; }  // PUT /api/config, POST /api/login
  // For the admin's handlers outside this table (live_api.h, log_tail.h): authorize() with its
  // refusal written into `response`; true when the request may go on.
  bool admit(const Request& request, Response& response) const;

 private:
  std::shared_ptr<const config::Config> config_;
};

}  // namespace peregrine::admin
