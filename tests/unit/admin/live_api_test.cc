#include "admin/live_api.h"

#include <gtest/gtest.h>

#include "admin/log_tail.h"
#include "handlers/fastcgi/config.h"
#include "handlers/fastcgi/options.h"
#include "handlers/proxy/config.h"
#include "handlers/proxy/options.h"
#include "handlers/return/config.h"
#include "handlers/return/options.h"

namespace peregrine::admin {
namespace {

TEST(AdminLiveApi, PartsByPath) {
  EXPECT_EQ(admin_part("/api/logs"), AdminPart::kLogs);
  EXPECT_EQ(admin_part("/api/upstreams"), AdminPart::kLive);
  EXPECT_EQ(admin_part("/api/upstreams/app/servers/1.2.3.4:80/drain"), AdminPart::kLive);
  EXPECT_EQ(admin_part("/api/routes"), AdminPart::kLive);
  EXPECT_EQ(admin_part("/api/route-test"), AdminPart::kLive);
  EXPECT_EQ(admin_part("/metrics"), AdminPart::kRouter);
  EXPECT_EQ(admin_part("/api/logsx"), AdminPart::kRouter);
  EXPECT_EQ(admin_part("/api/upstreamsx"), AdminPart::kRouter);
}

TEST(AdminLiveApi, ServerActionPaths) {
  auto a = parse_server_action("/api/upstreams/app/servers/127.0.0.1:9000/drain");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->group, "app");
  EXPECT_EQ(a->server, "127.0.0.1:9000");
  EXPECT_EQ(a->action, "drain");
  // A unix socket's slashes are escaped; brackets of an IPv6 address may be too.
  a = parse_server_action("/api/upstreams/php/servers/unix:%2Frun%2Fphp.sock/disable");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->server, "unix:/run/php.sock");
  a = parse_server_action("/api/upstreams/g/servers/%5B::1%5D:80/enable");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->server, "[::1]:80");
  EXPECT_FALSE(parse_server_action("/api/upstreams/app/servers/x"));
  EXPECT_FALSE(parse_server_action("/api/upstreams/app/hosts/x/drain"));
  EXPECT_FALSE(parse_server_action("/api/upstreams/app/servers/x/drain/more"));
  EXPECT_FALSE(parse_server_action("/api/upstreams//servers/x/drain"));
  EXPECT_FALSE(parse_server_action("/api/upstreams/app/servers/%zz/drain"));
  EXPECT_FALSE(parse_server_action("/api/upstreams/app/servers/a%2/drain"));
}

TEST(AdminLiveApi, QueryValues) {
  EXPECT_EQ(query_value("host=a.test&path=%2Fx%3Fy&method=POST", "path"), "/x?y");
  EXPECT_EQ(query_value("host=a.test&path=/", "host"), "a.test");
  EXPECT_EQ(query_value("filter=GET+%2Fapp", "filter"), "GET /app");
  EXPECT_EQ(query_value("flag&x=1", "flag"), "");
  EXPECT_FALSE(query_value("host=a", "path"));
  EXPECT_FALSE(query_value("", "path"));
  EXPECT_FALSE(query_value("path=%g0", "path"));
}

TEST(AdminLiveApi, DescribesRoutes) {
  config::Route r;
  r.match = config::MatchKind::kPrefix;
  r.pattern = "/app/";
  auto proxy = std::make_shared<proxy::ProxyOptions>();
  proxy->upstream = "app";
  r.type = &proxy::handler_type();
  r.options = proxy;
  RouteDescription d = describe_route(r);
  EXPECT_EQ(d.match, "prefix /app/");
  EXPECT_EQ(d.handler, "proxy");
  EXPECT_EQ(d.target, "http://app");

  r.match = config::MatchKind::kExact;
  r.pattern = "/old";
  auto redirect = std::make_shared<return_route::ReturnOptions>();
  redirect->status = 301;
  redirect->location = "/new";
  r.type = &return_route::handler_type();
  r.options = redirect;
  d = describe_route(r);
  EXPECT_EQ(d.match, "exact /old");
  EXPECT_EQ(d.handler, "return");
  EXPECT_EQ(d.target, "301 /new");

  r.match = config::MatchKind::kExtension;
  r.pattern = "php";
  auto fastcgi = std::make_shared<fastcgi::FastcgiOptions>();
  fastcgi->upstream = "php";
  r.type = &fastcgi::handler_type();
  r.options = fastcgi;
  d = describe_route(r);
  EXPECT_EQ(d.match, "extension php");
  EXPECT_EQ(d.target, "php");
}

TEST(AdminLiveApi, ServerJson) {
  config::UpstreamServer server;
  server.address = "127.0.0.1:1";
  metrics::UpstreamServerFigures f;
  f.state = "down";
  f.requests = 7;
  f.failures[0] = 2;
  f.failures[1] = 1;
  f.in_flight = 3;
  f.last_check_seconds = 1000;
  f.last_check_ok = false;
  f.history = {{1000, false}, {990, true}};
  std::string out;
  append_server_json(out, server, &f, 4, "");
  EXPECT_NE(out.find("\"state\":\"down\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"requests\":7,\"failures\":3"), std::string::npos) << out;
  EXPECT_NE(out.find("\"in_flight\":3,\"queue\":4"), std::string::npos) << out;
  EXPECT_NE(out.find("\"last_check\":{\"ok\":false,\"time\":1000"), std::string::npos) << out;
  EXPECT_NE(out.find("\"history\":[{\"time\":1000,\"ok\":false},{\"time\":990,\"ok\":true}]"),
            std::string::npos)
      << out;
  // What the admin set wins over the workers' figures, which follow it within an event.
  out.clear();
  append_server_json(out, server, &f, 0, "drained");
  EXPECT_NE(out.find("\"state\":\"drained\""), std::string::npos) << out;
  f.state = "disabled";
  out.clear();
  append_server_json(out, server, &f, 0, "");
  EXPECT_NE(out.find("\"state\":\"up\""), std::string::npos) << out;
  out.clear();
  append_server_json(out, server, nullptr, 0, "");
  EXPECT_NE(out.find("\"last_check\":null"), std::string::npos) << out;
}

TEST(AdminLogTail, Events) {
  std::string out;
  append_event(out, "access", "GET / 200");
  append_event(out, "error", "a\rb");
  EXPECT_EQ(out, "event: access\ndata: GET / 200\n\nevent: error\ndata: a b\n\n");
}

}  // namespace
}  // namespace peregrine::admin
