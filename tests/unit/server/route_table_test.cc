// Tests for RouteTable::select (src/server/route_table.h): the one question a client connection
// asks about a request. Site by Host, the request path, 413, OPTIONS *, first match in declared
// order, 404, 405 with the route's methods in Allow, and where an unknown method token goes.
#include "server/route_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "auth/htpasswd.h"
#include "config/config.h"
#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/application/config.h"
#include "handlers/return/config.h"
#include "handlers/return/options.h"
#include "peregrine/request.h"

namespace peregrine::server {
namespace {

class NamedHandler : public Handler {
 public:
  void handle(const Request&, Response& response) override { response.set_status(200); }
};

config::Route app_route(config::MatchKind match, std::string pattern,
                        std::vector<std::string> methods = {}) {
  config::Route route;
  route.match = match;
  route.pattern = std::move(pattern);
  route.type = &application::handler_type();
  route.options = application::options_for("app");
  route.methods = std::move(methods);
  return route;
}

config::Site site(std::vector<std::string> hosts) {
  config::Site s;
  s.hosts = std::move(hosts);
  s.access_log.format = config::AccessLogFormat::kOff;
  return s;
}

class RouteTableSelect : public ::testing::Test {
 protected:
  RouteTableSelect() : poller_(event::make_epoll_poller()), env_{*poller_, timers_, clock_, 1} {
    registry_["app"].sync = [] { return std::make_shared<NamedHandler>(); };
  }

  // Sites: "www.example.com" (routes in this order: /api/ listing GET and POST; the exact
  // /api/ping; .txt; everything under /) and "*.example.org" (only /org/), the default.
  void build(uint64_t max_body_bytes = 1 << 20) {
    auto cfg = std::make_shared<config::Config>();
    cfg->limits.max_body_bytes = max_body_bytes;
    config::Site www = site({"www.example.com"});
    www.routes.push_back(app_route(config::MatchKind::kPrefix, "/api/", {"GET", "POST"}));
    www.routes.push_back(app_route(config::MatchKind::kExact, "/api/ping"));  // shadowed
    www.routes.push_back(app_route(config::MatchKind::kExtension, "txt"));
    www.routes.push_back(app_route(config::MatchKind::kPrefix, "/"));
    config::Site org = site({"*.example.org"});
    org.routes.push_back(app_route(config::MatchKind::kPrefix, "/org/"));
    cfg->sites = {www, org};
    cfg->default_site = 1;
    config_ = cfg;
    std::string error;
    table_ = RouteTable::build(cfg, env_, registry_, log_writer_, &error);
    ASSERT_TRUE(table_) << error;
  }

  Request& request(std::string_view method, std::string_view target,
                   std::string_view host = "www.example.com") {
    request_.clear();
    request_.method_text = method;
    request_.method = method == "GET"       ? Method::kGet
                      : method == "HEAD"    ? Method::kHead
                      : method == "POST"    ? Method::kPost
                      : method == "PUT"     ? Method::kPut
                      : method == "DELETE"  ? Method::kDelete
                      : method == "OPTIONS" ? Method::kOptions
                                            : Method::kUnknown;
    request_.target = target;
    request_.raw_path = target.substr(0, target.find('?'));
    request_.host = host;
    return request_;
  }

  const config::Route* route(size_t site, size_t index) const {
    return &config_->sites[site].routes[index];
  }

  std::unique_ptr<event::Poller> poller_;
  event::TimerSet timers_;
  Clock clock_;
  handlers::WorkerEnv env_;
  HandlerRegistry registry_;
  AccessLogWriter log_writer_;
  std::shared_ptr<const config::Config> config_;
  Ref<RouteTable> table_;
  Request request_;
};

TEST_F(RouteTableSelect, FirstMatchInDeclaredOrder) {
  build();
  Selection s = table_->select(request("GET", "/api/ping"));
  ASSERT_NE(s.route, nullptr);
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(s.route->config, route(0, 0)) << "/api/ comes before the exact /api/ping";
  s = table_->select(request("GET", "/notes/a.txt"));
  ASSERT_NE(s.route, nullptr);
  EXPECT_EQ(s.route->config, route(0, 2));
  s = table_->select(request("GET", "/index.html"));
  ASSERT_NE(s.route, nullptr);
  EXPECT_EQ(s.route->config, route(0, 3));
  EXPECT_NE(s.route->handler, nullptr);
  EXPECT_EQ(s.route->stream, nullptr);
}

TEST_F(RouteTableSelect, HostChoosesTheSite) {
  build();
  Selection s = table_->select(request("GET", "/org/x", "www.example.com:8080"));
  EXPECT_EQ(s.site->config, &config_->sites[0]);
  EXPECT_EQ(s.route->config, route(0, 3)) << "www has no /org/ route: its catch-all answers";
  s = table_->select(request("GET", "/org/x", "a.example.org"));
  EXPECT_EQ(s.site->config, &config_->sites[1]);
  EXPECT_EQ(s.route->config, route(1, 0));
  s = table_->select(request("GET", "/org/x", "unknown.net"));
  EXPECT_EQ(s.site->config, &config_->sites[1]) << "the default site";
  s = table_->select(request("GET", "/org/x", ""));
  EXPECT_EQ(s.site->config, &config_->sites[1]);
}

TEST_F(RouteTableSelect, NoRouteIs404WithTheSite) {
  build();
  Selection s = table_->select(request("GET", "/elsewhere", "b.example.org"));
  EXPECT_EQ(s.status, 404);
  EXPECT_EQ(s.route, nullptr);
  EXPECT_EQ(s.site->config, &config_->sites[1]) << "the site's error pages and log apply";
  EXPECT_FALSE(s.refused()) << "a 404 is answered after the body, like a handler's answer";
}

TEST_F(RouteTableSelect, MethodNotListedIs405WithAllow) {
  build();
  for (const char* method : {"PUT", "DELETE", "HEAD", "OPTIONS"}) {
    Selection s = table_->select(request(method, "/api/users"));
    EXPECT_EQ(s.status, 405) << method;
    EXPECT_EQ(s.route, nullptr) << method;
    EXPECT_EQ(s.allow, "GET, POST") << method;
    EXPECT_FALSE(s.refused());
  }
  for (const char* method : {"GET", "POST"}) {
    Selection s = table_->select(request(method, "/api/users"));
    EXPECT_EQ(s.status, 0) << method;
    EXPECT_EQ(s.route->config, route(0, 0)) << method;
  }
  // A route without `methods` takes any method its handler knows what to do with.
  Selection s = table_->select(request("DELETE", "/index.html"));
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(s.route->config, route(0, 3));
}

TEST_F(RouteTableSelect, OptionsAsteriskIs204WithTheServersMethods) {
  build();
  Selection s = table_->select(request("OPTIONS", "*"));
  EXPECT_EQ(s.status, 204);
  EXPECT_EQ(s.route, nullptr);
  EXPECT_EQ(request_.path, "*");
  EXPECT_EQ(s.allow, "GET, HEAD, POST, PUT, DELETE, OPTIONS");
  EXPECT_FALSE(s.refused());
}

TEST_F(RouteTableSelect, SetsTheNormalizedPath) {
  build();
  Selection s = table_->select(request("GET", "/api/v1/../users%2Fx?q=1"));
  EXPECT_EQ(request_.path, "/api/users/x");
  EXPECT_EQ(s.route->config, route(0, 0));
  table_->select(request("GET", "/plain/path?q=1"));
  EXPECT_EQ(request_.path, "/plain/path");
  EXPECT_EQ(request_.path.data(), request_.raw_path.data()) << "a normal path is not copied";
}

TEST_F(RouteTableSelect, RefusesABadPathAndAnOversizedBody) {
  build(/*max_body_bytes=*/1000);
  Selection s = table_->select(request("GET", "/a/%00/b"));
  EXPECT_EQ(s.status, 400);
  EXPECT_TRUE(s.refused());
  EXPECT_EQ(s.site->config, &config_->sites[0]);

  // A method token the server has no name for is routed: an application route takes it.
  s = table_->select(request("BREW", "/index.html"));
  EXPECT_EQ(s.status, 0);
  EXPECT_FALSE(s.refused());
  ASSERT_NE(s.route, nullptr);
  EXPECT_EQ(s.route->config, route(0, 3));

  Request& big = request("POST", "/api/upload");
  big.content_length = 1001;
  s = table_->select(big);
  EXPECT_EQ(s.status, 413);
  EXPECT_TRUE(s.refused());
  Request& fits = request("POST", "/api/upload");
  fits.content_length = 1000;
  EXPECT_EQ(table_->select(fits).status, 0);
  // 413 comes before routing: a body too large is refused whatever the route says of it.
  Request& big_put = request("PUT", "/api/upload");
  big_put.content_length = 5000;
  EXPECT_EQ(table_->select(big_put).status, 413);
}

TEST_F(RouteTableSelect, UnknownMethodOnAReturnRouteIs405UnlessListed) {
  auto cfg = std::make_shared<config::Config>();
  config::Site only = site({"www.example.com"});
  config::Route listed;
  listed.match = config::MatchKind::kPrefix;
  listed.pattern = "/dav/";
  listed.type = &return_route::handler_type();
  listed.options = std::make_shared<return_route::ReturnOptions>();
  listed.methods = {"PROPFIND"};
  config::Route plain = listed;
  plain.pattern = "/";
  plain.methods.clear();
  only.routes = {listed, plain};
  cfg->sites = {only};
  config_ = cfg;
  std::string error;
  table_ = RouteTable::build(cfg, env_, registry_, log_writer_, &error);
  ASSERT_TRUE(table_) << error;

  Selection s = table_->select(request("PURGE", "/page"));
  EXPECT_EQ(s.status, 405);
  EXPECT_FALSE(s.refused());
  EXPECT_NE(s.allow.find("GET"), std::string_view::npos);
  EXPECT_EQ(s.allow.find("PURGE"), std::string_view::npos);
  s = table_->select(request("GET", "/page"));
  EXPECT_EQ(s.status, 0);
  // A route that names the token takes it, whatever its handler.
  s = table_->select(request("PROPFIND", "/dav/x"));
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(s.route->config, route(0, 0));
  s = table_->select(request("MKCOL", "/dav/x"));
  EXPECT_EQ(s.status, 405);
  EXPECT_EQ(s.allow, "PROPFIND");
}

TEST_F(RouteTableSelect, BasicAuthAfterTheMethodSetsTheUserOr401) {
  auto cfg = std::make_shared<config::Config>();
  config::Site only = site({"www.example.com"});
  config::Route locked = app_route(config::MatchKind::kPrefix, "/admin/", {"GET"});
  std::vector<auth::HtpasswdProblem> problems;
  // openssl passwd -apr1 -salt abcdefgh secret
  locked.auth.users = std::make_shared<auth::Htpasswd>(
      auth::Htpasswd::parse("alice:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/\n", &problems));
  locked.auth.challenge = "Basic realm=\"Admins\", charset=\"UTF-8\"";
  only.routes = {locked, app_route(config::MatchKind::kPrefix, "/")};
  cfg->sites = {only};
  config_ = cfg;
  std::string error;
  table_ = RouteTable::build(cfg, env_, registry_, log_writer_, &error);
  ASSERT_TRUE(table_) << error;

  Selection s = table_->select(request("GET", "/admin/x"));
  EXPECT_EQ(s.status, 401);
  EXPECT_EQ(s.route, nullptr);
  EXPECT_FALSE(s.refused()) << "a 401 is an answer; the body is read and dropped";
  EXPECT_EQ(s.challenge, "Basic realm=\"Admins\", charset=\"UTF-8\"");
  EXPECT_EQ(request_.remote_user, "");

  Request& good = request("GET", "/admin/x");
  good.headers[0] = {"Authorization", "Basic YWxpY2U6c2VjcmV0"};  // alice:secret
  good.header_count = 1;
  s = table_->select(good);
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(s.route->config, route(0, 0));
  EXPECT_EQ(request_.remote_user, "alice");

  // The method is checked first: 405 says nothing about the credentials.
  EXPECT_EQ(table_->select(request("POST", "/admin/x")).status, 405);
  // Other routes are open.
  s = table_->select(request("GET", "/open"));
  EXPECT_EQ(s.status, 0);
  EXPECT_EQ(request_.remote_user, "");
}

TEST_F(RouteTableSelect, ErrorBodyWithoutErrorPagesIsTheDefaultPage) {
  build();
  Selection s = table_->select(request("GET", "/nowhere", "x.example.org"));
  Response response;
  response.set_status(s.status);
  s.site->fill_error_body(request_, response);
  EXPECT_GT(response.body_length(), 0u);
  EXPECT_NE(response.owned_bytes(response.segments().at(0)).find("<h1>404 Not Found</h1>"),
            std::string_view::npos);
  EXPECT_NE(response.extra_headers().find("Content-Type: text/html"), std::string_view::npos);
}

}  // namespace
}  // namespace peregrine::server

namespace peregrine::server {
namespace {

class NoopAsync final : public AsyncHandler {
 public:
  void handle(const Request&, AsyncResponse) override {}
};

// A registered name is built as what it was registered as: a sync Handler, or an
// AsyncHandler behind a StreamHandler; an unknown name, or a factory returning null, is an error.
TEST_F(RouteTableSelect, RegisteredNamesBuildSyncOrAsyncRoutes) {
  registry_["events"].async = [] { return std::make_shared<NoopAsync>(); };
  registry_["null"].async = [] { return std::shared_ptr<AsyncHandler>(); };
  auto cfg = std::make_shared<config::Config>();
  config::Site only = site({"x"});
  only.routes.push_back(app_route(config::MatchKind::kPrefix, "/sync/"));
  only.routes.push_back(app_route(config::MatchKind::kPrefix, "/"));
  only.routes.back().options = application::options_for("events");
  cfg->sites = {only};
  std::string error;
  table_ = RouteTable::build(cfg, env_, registry_, log_writer_, &error);
  ASSERT_TRUE(table_) << error;
  Selection s = table_->select(request("GET", "/sync/a", "x"));
  ASSERT_EQ(s.status, 0);
  EXPECT_TRUE(s.route->handler);
  EXPECT_FALSE(s.route->stream);
  s = table_->select(request("GET", "/b", "x"));
  ASSERT_EQ(s.status, 0);
  EXPECT_FALSE(s.route->handler);
  EXPECT_TRUE(s.route->stream);

  for (const char* name : {"null", "unknown"}) {
    cfg->sites[0].routes.back().options = application::options_for(name);
    error.clear();
    EXPECT_FALSE(RouteTable::build(cfg, env_, registry_, log_writer_, &error));
    EXPECT_NE(error.find(std::string("no handler named '") + name + "' is registered"),
              std::string::npos)
        << error;
  }
}

}  // namespace
}  // namespace peregrine::server
