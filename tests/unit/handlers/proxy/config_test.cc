// The keys of a proxy route (handlers/proxy/config.cc): defaults, every key (proxy_host into
// its mode), header rules, and each class of error at its line:col.
#include "config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handlers/proxy/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::proxy {
namespace {

using namespace config;

class ProxyConfigTest : public config::test_support::ConfigTest {};

TEST_F(ProxyConfigTest, ProxyRouteDefaults) {
  auto config = load_ok(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[site]]
[[site.route]]
prefix = "/api/"
proxy = "http://app"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  ASSERT_EQ(route.type->name, "proxy");
  const proxy::ProxyOptions& p = *route.options_as<proxy::ProxyOptions>();
  EXPECT_EQ(p.upstream, "app");
  EXPECT_EQ(p.scheme, "http");
  EXPECT_EQ(p.path_prefix, "/api/");
  EXPECT_EQ(p.path, "");
  EXPECT_FALSE(p.strip_prefix);
  EXPECT_EQ(p.host_mode, proxy::ProxyHostMode::kPass);
  EXPECT_EQ(p.fixed_host, "");
  EXPECT_TRUE(p.x_forwarded_for && p.x_forwarded_proto && p.x_forwarded_host && p.x_real_ip);
  EXPECT_FALSE(p.forwarded);
  EXPECT_TRUE(p.request_set.empty() && p.request_add.empty() && p.request_remove.empty());
  EXPECT_TRUE(p.rewrite_location);
  EXPECT_FALSE(p.intercept_errors);
  EXPECT_EQ(p.buffer_bytes, 64u * 1024);
  EXPECT_EQ(p.max_temp_file_bytes, 1u << 30);
  EXPECT_TRUE(p.websocket);
  EXPECT_EQ(p.tunnel_idle_timeout, Millis(300'000));
  EXPECT_EQ(config->upstreams.size(), 1u);
}

TEST_F(ProxyConfigTest, ProxyEveryKeyLoads) {
  auto config = load_ok(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[site]]
root = "www"
[[site.route]]
prefix = "/api/"
proxy = "http://app/v1/"
proxy_host = "upstream"
x_forwarded = false
forwarded = true
request_headers = { set = { "X-B" = "1", "X-A" = "2" }, add = { Via = "p" }, remove = ["X-C", "Cookie"] }
response_headers = { set = { "X-Frame-Options" = "DENY" }, add = { "X-D" = "d" }, remove = ["Server"] }
rewrite_location = false
intercept_errors = true
proxy_buffer = "1m"
proxy_temp_file_max = 0
websocket = false
tunnel_timeout = "10m"
methods = ["GET", "POST"]
[[site.route]]
prefix = "/other/"
proxy = "http://localhost:8081"
strip_prefix = true
proxy_host = "backend.internal:8081"
[[site.route]]
exact = "/status"
proxy = "http://127.0.0.1/index.html"
[[site.route]]
regex = '^/ws/'
proxy = "http://unix:/run/ws.sock:"
)");
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 5u);  // and the site's static catch-all
  const proxy::ProxyOptions& p = *routes[0].options_as<proxy::ProxyOptions>();
  EXPECT_EQ(p.upstream, "app");
  EXPECT_EQ(p.path_prefix, "/api/");
  EXPECT_EQ(p.path, "/v1/");
  EXPECT_EQ(p.host_mode, proxy::ProxyHostMode::kUpstream);
  EXPECT_FALSE(p.x_forwarded_for || p.x_forwarded_proto || p.x_forwarded_host || p.x_real_ip);
  EXPECT_TRUE(p.forwarded);
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.request_set, (Pairs{{"X-B", "1"}, {"X-A", "2"}}));  // as written
  EXPECT_EQ(p.request_add, (Pairs{{"Via", "p"}}));
  EXPECT_EQ(p.request_remove, (std::vector<std::string>{"X-C", "Cookie"}));
  EXPECT_EQ(p.response_set, (Pairs{{"X-Frame-Options", "DENY"}}));
  EXPECT_EQ(p.response_add, (Pairs{{"X-D", "d"}}));
  EXPECT_EQ(p.response_remove, (std::vector<std::string>{"Server"}));
  EXPECT_FALSE(p.rewrite_location);
  EXPECT_TRUE(p.intercept_errors);
  EXPECT_EQ(p.buffer_bytes, 1u << 20);
  EXPECT_EQ(p.max_temp_file_bytes, 0u);
  EXPECT_FALSE(p.websocket);
  EXPECT_EQ(p.tunnel_idle_timeout, Millis(600'000));
  EXPECT_EQ(routes[0].methods, (std::vector<std::string>{"GET", "POST"}));

  EXPECT_EQ(routes[1].options_as<proxy::ProxyOptions>()->upstream, "127.0.0.1:8081");
  EXPECT_TRUE(routes[1].options_as<proxy::ProxyOptions>()->strip_prefix);
  EXPECT_EQ(routes[1].options_as<proxy::ProxyOptions>()->path_prefix, "/other/");
  EXPECT_EQ(routes[1].options_as<proxy::ProxyOptions>()->host_mode, proxy::ProxyHostMode::kFixed);
  EXPECT_EQ(routes[1].options_as<proxy::ProxyOptions>()->fixed_host, "backend.internal:8081");
  EXPECT_EQ(routes[2].options_as<proxy::ProxyOptions>()->upstream,
            "127.0.0.1:80");  // an IP without a port is port 80
  EXPECT_EQ(routes[2].options_as<proxy::ProxyOptions>()->path_prefix,
            "/status");  // an exact route's path
  EXPECT_EQ(routes[2].options_as<proxy::ProxyOptions>()->path,
            "/index.html");  // replaced by the URL's path
  EXPECT_EQ(routes[3].options_as<proxy::ProxyOptions>()->path_prefix,
            "");  // a regex route has no prefix
  EXPECT_EQ(routes[3].options_as<proxy::ProxyOptions>()->upstream, "unix:/run/ws.sock");
  EXPECT_EQ(routes[4].type->name, "static");
  ASSERT_EQ(config->upstreams.size(), 4u);
  EXPECT_EQ(config->upstreams[1].name, "127.0.0.1:8081");
  EXPECT_EQ(config->upstreams[2].name, "127.0.0.1:80");
  EXPECT_EQ(config->upstreams[3].name, "unix:/run/ws.sock");
}

TEST_F(ProxyConfigTest, ProxyErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[site]]
root = "www"
[[site.route]]
exact = "/b"
proxy = "https://app"
[[site.route]]
regex = "^/c"
proxy = "http://127.0.0.1:8080/v1/"
strip_prefix = true
[[site.route]]
prefix = "/d/"
proxy = "http://apq/v1/"
strip_prefix = true
proxy_host = "a b"
root = "www"
[[site.route]]
prefix = "/e/"
proxy = "http://app/v1/"
strip_prefix = true
x_forwarded = "yes"
proxy_buffer = "1g"
tunnel_timeout = 0
)"),
            (std::vector<std::string>{
                "8:9: proxy URL 'https://app' names upstream 'app', which speaks plain HTTP "
                "(hint: add tls = true to the [[upstream]] at line 1, or write \"http://app\")",
                "11:9: a path in 'proxy' needs a prefix or exact route (hint: the path replaces "
                "the matched prefix (or exact path); use prefix = \"/dir/\", or drop the path to "
                "pass the request path unchanged)",
                "12:16: 'strip_prefix' needs a prefix route (hint: it removes the matched "
                "prefix, e.g. with prefix = \"/api/\")",
                "15:9: no upstream group named 'apq' (hint: did you mean 'app'? declared groups: "
                "app; or write an address: \"http://127.0.0.1:8080\", "
                "\"http://unix:/run/app.sock:\")",
                "16:16: 'strip_prefix' cannot be combined with a path in 'proxy' (hint: the path "
                "in the URL already replaces the prefix; remove one of them)",
                "17:14: invalid proxy_host \"a b\" (hint: \"pass\" (the client's Host), "
                "\"upstream\" (the server's address) or a fixed host name such as "
                "\"app.internal\")",
                "18:8: 'root' does not apply to a 'proxy' route (hint: the back end serves the "
                "content; static options go on static (or application) routes)",
                "22:16: 'strip_prefix' cannot be combined with a path in 'proxy' (hint: the path "
                "in the URL already replaces the prefix; remove one of them)",
                "23:15: 'site.route.x_forwarded' must be a boolean, not a string (\"yes\")",
                "24:16: 'site.route.proxy_buffer' is 1g; it must be between 0 and 64m",
                "25:18: 'site.route.tunnel_timeout' is 0s; it must be between 1ms and 24h",
            }));
}

TEST_F(ProxyConfigTest, HeaderRuleErrors) {
  EXPECT_EQ(
      errors(R"([[site]]
[[site.route]]
prefix = "/"
proxy = "http://127.0.0.1:8080"
request_headers = { set = { Host = "x", "Content-Length" = "3", "Bad Name" = "1" }, drop = [] }
response_headers = { add = { "X-A" = "1", "x-a" = "2" }, remove = "Connection", set = [] }
)"),
      (std::vector<std::string>{
          "5:29: the Host header is set with 'proxy_host', not in "
          "'site.route.request_headers.set' (hint: proxy_host = \"pass\", \"upstream\" or a "
          "fixed name)",
          "5:41: header 'Content-Length' is managed by the proxy (hint: framing and connection "
          "headers (Connection, Keep-Alive, Transfer-Encoding, Content-Length, TE, Trailer, "
          "Upgrade) cannot be changed per route)",
          "5:65: invalid header name 'Bad Name' in 'site.route.request_headers.set' (hint: "
          "header names are tokens such as X-Request-Id)",
          "5:85: unknown key 'drop' in 'site.route.request_headers' (hint: valid keys: set, add, "
          "remove)",
          "6:43: header 'x-a' is listed twice in 'site.route.response_headers.add' (hint: first "
          "at line 6 (names are case-insensitive))",
          "6:67: header 'Connection' is managed by the proxy (hint: framing and connection "
          "headers (Connection, Keep-Alive, Transfer-Encoding, Content-Length, TE, Trailer, "
          "Upgrade) cannot be changed per route)",
          "6:87: 'site.route.response_headers.set' must be a table of header names and values, "
          "not an array (hint: e.g. set = { \"X-Env\" = \"production\" })",
      }));
}

}  // namespace
}  // namespace peregrine::proxy
