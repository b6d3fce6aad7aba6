// The steps of docs/architecture.md's "Adding a handler", proved with a handler that exists only
// here (echo_handler.h): once registered in one place (with_echo()), the configuration reads its
// keys and checks them against the other handlers', quick mode reads it from --route, a worker's
// route table runs it, and the admin API describes it; the server's own set (handlers::builtin())
// does not know it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "admin/handler.h"
#include "admin/live_api.h"
#include "config/cli.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "handlers/builtin.h"
#include "server/route_table.h"
#include "unit/config/config_test_support.h"
#include "unit/handlers/echo/echo_handler.h"

namespace peregrine::echo {
namespace {

using config::test_support::describe;

constexpr std::string_view kDocument = R"([[site]]
hosts = ["echo.test"]
access_log = "off"
[[site.route]]
prefix = "/hi/"
echo = "hello"
echo_status = 202
)";

std::vector<std::string> errors_of(const config::LoadResult& result) {
  std::vector<std::string> out;
  for (const config::ConfigError& e : result.errors) out.push_back(describe(e));
  return out;
}

std::string body_of(const Response& r) {
  std::string out;
  for (const Response::Segment& s : r.segments())
    if (s.kind == Response::Segment::Kind::kOwned) out += r.owned_bytes(s);
  return out;
}

TEST(EchoHandler, TheConfigurationReadsItsKeys) {
  config::LoadResult result = config::load_string(kDocument, "echo.toml", with_echo());
  ASSERT_NE(result.config, nullptr) << ::testing::PrintToString(errors_of(result));
  const config::Route& route = result.config->sites[0].routes[0];
  ASSERT_EQ(route.type, &echo_type());
  ASSERT_NE(route.options_as<EchoOptions>(), nullptr);
  EXPECT_EQ(route.options_as<EchoOptions>()->text, "hello");
  EXPECT_EQ(route.options_as<EchoOptions>()->status, 202);
}

TEST(EchoHandler, ItsKeysAreCheckedLikeABuiltInHandlers) {
  config::LoadResult result = config::load_string(R"([[site]]
hosts = ["echo.test"]
[[site.route]]
prefix = "/a/"
return = 204
echo_status = 201
[[site.route]]
prefix = "/b/"
echo = "x"
proxy = "http://127.0.0.1:8080"
[[site.route]]
prefix = "/c/"
echo = "x"
echo_stats = 201
[[site.route]]
prefix = "/d/"
echo = "x"
echo_status = 99
)",
                                                  "echo.toml", with_echo());
  EXPECT_EQ(result.config, nullptr);
  EXPECT_EQ(errors_of(result),
            (std::vector<std::string>{
                "6:15: 'echo_status' needs a 'echo' route (hint: add echo = \"TEXT\" to answer "
                "with TEXT)",
                "10:9: 'proxy' and 'echo' cannot both be set on a route (hint: a route has "
                "exactly one handler; add another [[site.route]] for the other)",
                "14:1: unknown key 'echo_stats' in [[site.route]] (hint: did you mean 'echo'?)",
                "18:15: 'site.route.echo_status' is 99; it must be between 200 and 599",
            }));
}

// Contains: an error of `result` has `text` in it.
bool has_error(const config::LoadResult& result, std::string_view text) {
  for (const config::ConfigError& e : result.errors)
    if (e.to_string().find(text) != std::string::npos) return true;
  return false;
}

TEST(EchoHandler, TheServersOwnSetDoesNotKnowIt) {
  config::LoadResult result = config::load_string(kDocument, "echo.toml", handlers::builtin());
  EXPECT_EQ(result.config, nullptr);
  EXPECT_TRUE(has_error(result, "6:1: error: unknown key 'echo' in [[site.route]]"))
      << ::testing::PrintToString(errors_of(result));
  EXPECT_TRUE(has_error(result, "7:1: error: unknown key 'echo_status' in [[site.route]]"))
      << ::testing::PrintToString(errors_of(result));
}

TEST(EchoHandler, QuickModeReadsItFromRoute) {
  config::CommandLine cli;
  cli.routes = {R"(prefix = "/hi/", echo = "hello", echo_status = 202)"};
  config::LoadResult result = config::build_config(cli, with_echo());
  ASSERT_NE(result.config, nullptr) << ::testing::PrintToString(errors_of(result));
  const config::Route& route = result.config->sites[0].routes[0];
  EXPECT_EQ(route.type, &echo_type());
  EXPECT_EQ(route.options_as<EchoOptions>()->text, "hello");

  result = config::build_config(cli, handlers::builtin());
  EXPECT_EQ(result.config, nullptr);
  EXPECT_TRUE(has_error(result,
                        "<command line>: error: --route: unknown key 'echo' in "
                        "[[site.route]]"))
      << ::testing::PrintToString(errors_of(result));
}

class EchoRuntime : public ::testing::Test {
 protected:
  EchoRuntime() : poller_(event::make_epoll_poller()), env_{*poller_, timers_, clock_, 1} {
    config::LoadResult result = config::load_string(kDocument, "echo.toml", with_echo());
    if (result.config) {
      auto config = std::make_shared<config::Config>(*result.config);
      config->admin.auth = admin::Auth::kNone;  // for the admin API's endpoints below
      config_ = config;
      table_ = server::RouteTable::build(config_, env_, registry_, log_writer_, &error_);
    }
  }

  Request& request(std::string_view method, std::string_view target) {
    request_.clear();
    request_.method_text = method;
    request_.method = method == "GET" ? Method::kGet : Method::kUnknown;
    request_.target = target;
    const size_t mark = target.find('?');
    request_.raw_path = target.substr(0, mark);
    if (mark != std::string_view::npos) request_.query = target.substr(mark + 1);
    request_.host = "echo.test";
    return request_;
  }

  std::unique_ptr<event::Poller> poller_;
  event::TimerSet timers_;
  Clock clock_;
  handlers::WorkerEnv env_;
  server::HandlerRegistry registry_;
  server::AccessLogWriter log_writer_;
  std::shared_ptr<const config::Config> config_;
  std::string error_;
  Ref<server::RouteTable> table_;
  Request request_;
};

TEST_F(EchoRuntime, AWorkersRouteTableRunsIt) {
  ASSERT_TRUE(table_) << error_;
  server::Selection s = table_->select(request("GET", "/hi/there"));
  ASSERT_EQ(s.status, 0);
  ASSERT_NE(s.route, nullptr);
  ASSERT_TRUE(s.route->handler);
  EXPECT_FALSE(s.route->stream);
  Response response;
  s.route->handler->handle(request_, response);
  EXPECT_EQ(response.status(), 202);
  EXPECT_EQ(body_of(response), "hello");

  // Its default methods: a method token outside them is answered 405 with them.
  s = table_->select(request("PROPFIND", "/hi/there"));
  EXPECT_EQ(s.status, 405);
  EXPECT_EQ(s.allow, "GET, HEAD");
}

TEST_F(EchoRuntime, TheAdminApiDescribesIt) {
  ASSERT_TRUE(table_) << error_;
  admin::RouteDescription d = admin::describe_route(config_->sites[0].routes[0]);
  EXPECT_EQ(d.match, "prefix /hi/");
  EXPECT_EQ(d.handler, "echo");
  EXPECT_EQ(d.target, "\"hello\"");

  auto router = std::make_shared<admin::AdminHandler>(config_);
  admin::LiveHandler live(config_, router,
                          [this](const admin::RouteQuestion& q) { return table_->test_route(q); });
  Request admin_request;
  auto get = [&](std::string_view target) {
    admin_request.clear();
    admin_request.method = Method::kGet;
    admin_request.method_text = "GET";
    admin_request.host = "127.0.0.1";
    admin_request.target = target;
    const size_t mark = target.find('?');
    admin_request.raw_path = admin_request.path = target.substr(0, mark);
    if (mark != std::string_view::npos) admin_request.query = target.substr(mark + 1);
    Response response;
    live.handle(admin_request, response);
    EXPECT_EQ(response.status(), 200) << body_of(response);
    return body_of(response);
  };
  const std::string routes = get("/api/routes");
  EXPECT_NE(routes.find(R"("handler":"echo","target":"\"hello\"")"), std::string::npos) << routes;
  const std::string answer = get("/api/route-test?host=echo.test&path=/hi/x");
  EXPECT_NE(answer.find(R"("handler":"echo")"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"("status":202)"), std::string::npos) << answer;
}

}  // namespace
}  // namespace peregrine::echo
