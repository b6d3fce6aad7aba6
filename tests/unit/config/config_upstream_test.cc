// Upstream addresses and proxy URLs, the rules for the handler keys of one route (one handler
// per route, no keys of another handler), and the --fastcgi / --proxy quick modes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/un.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "config/cli.h"
#include "config/config.h"
#include "config/listen_address.h"
#include "config/upstream_address.h"
#include "handlers/fastcgi/options.h"
#include "handlers/proxy/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::config {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

// ---------------------------------------------------------------- addresses and URLs

UpstreamServer address_ok(std::string_view text) {
  UpstreamServer server;
  std::string error, hint;
  EXPECT_TRUE(parse_upstream_address(text, &server, &error, &hint)) << text << ": " << error;
  return server;
}

std::string address_error(std::string_view text) {
  UpstreamServer server;
  std::string error, hint;
  EXPECT_FALSE(parse_upstream_address(text, &server, &error, &hint)) << text;
  return hint.empty() ? error : error + " (hint: " + hint + ")";
}

TEST(UpstreamAddress, InetForms) {
  UpstreamServer v4 = address_ok("127.0.0.1:9000");
  EXPECT_EQ(v4.addr.ss_family, AF_INET);
  EXPECT_EQ(v4.addr_len, sizeof(sockaddr_in));
  EXPECT_EQ(format_endpoint(v4.addr), "127.0.0.1:9000");
  EXPECT_EQ(v4.address, "127.0.0.1:9000");

  UpstreamServer v6 = address_ok("[::1]:8080");
  EXPECT_EQ(v6.addr.ss_family, AF_INET6);
  EXPECT_EQ(format_endpoint(v6.addr), "[::1]:8080");

  UpstreamServer local = address_ok("localhost:8080");
  EXPECT_EQ(format_endpoint(local.addr), "127.0.0.1:8080");
  EXPECT_EQ(local.address, "localhost:8080");  // as written
  EXPECT_EQ(canonical_upstream_address(local), "127.0.0.1:8080");
}

TEST(UpstreamAddress, UnixSocket) {
  UpstreamServer server = address_ok("unix:/run/php/php8.2-fpm.sock");
  ASSERT_EQ(server.addr.ss_family, AF_UNIX);
  const auto& un = reinterpret_cast<const sockaddr_un&>(server.addr);
  EXPECT_STREQ(un.sun_path, "/run/php/php8.2-fpm.sock");
  EXPECT_EQ(server.addr_len, offsetof(sockaddr_un, sun_path) + 25);
  EXPECT_EQ(canonical_upstream_address(server), "unix:/run/php/php8.2-fpm.sock");

  // The longest path that fits sun_path with its terminator, and one byte more.
  std::string longest = "/" + std::string(sizeof(un.sun_path) - 2, 'a');
  address_ok("unix:" + longest);
  EXPECT_EQ(
      address_error("unix:" + longest + "a"),
      "unix socket path in 'unix:" + longest +
          "a' is too long (108 bytes) (hint: the "
          "kernel limit is 107 bytes; use a shorter path or a symbolic link to the directory)");
}

TEST(UpstreamAddress, Errors) {
  EXPECT_EQ(address_error("unix:run/fpm.sock"),
            "unix socket path in 'unix:run/fpm.sock' is not absolute (hint: write unix: followed "
            "by an absolute path, e.g. \"unix:/run/php/php8.2-fpm.sock\")");
  EXPECT_EQ(address_error("127.0.0.1"),
            "upstream address '127.0.0.1' has no port (hint: valid forms: \"127.0.0.1:9000\", "
            "\"[::1]:9000\", \"localhost:9000\", \"unix:/run/php/php-fpm.sock\")");
  EXPECT_EQ(address_error("127.0.0.1:0"),
            "invalid port '0' in upstream address '127.0.0.1:0' (hint: a port is an integer "
            "1..65535)");
  EXPECT_EQ(address_error("127.0.0.1:65536"),
            "invalid port '65536' in upstream address '127.0.0.1:65536' (hint: a port is an "
            "integer 1..65535)");
  EXPECT_EQ(address_error("*:80"),
            "upstream address '*:80' has no host (hint: name the back end, e.g. "
            "\"127.0.0.1:80\")");
  EXPECT_EQ(address_error("0.0.0.0:80"),
            "upstream address '0.0.0.0:80' is the unspecified address 0.0.0.0 (hint: name the "
            "back end's own address, e.g. \"127.0.0.1:80\")");
  EXPECT_EQ(address_error("app.internal:80"),
            "upstream address 'app.internal:80' names a host; only IP addresses and 'localhost' "
            "are accepted (hint: host names are not resolved (starting must not depend on DNS); "
            "write the back end's IP address)");
  EXPECT_EQ(address_error("::1:80"),
            "upstream address '::1:80' looks like an IPv6 address without brackets (hint: write "
            "IPv6 addresses in brackets: \"[::1]:8080\")");
  EXPECT_EQ(address_error("http://127.0.0.1:80"),
            "upstream address 'http://127.0.0.1:80' is a URL (hint: write the address alone, "
            "without a scheme: valid forms: \"127.0.0.1:9000\", \"[::1]:9000\", "
            "\"localhost:9000\", \"unix:/run/php/php-fpm.sock\")");
  EXPECT_EQ(address_error("300.1.1.1:80"),
            "invalid IPv4 address '300.1.1.1' in upstream address '300.1.1.1:80' (hint: an IPv4 "
            "address is four numbers 0..255, e.g. \"192.168.1.10:8080\")");
}

TEST(ProxyUrl, Forms) {
  ProxyUrl url;
  std::string error, hint;
  ASSERT_TRUE(parse_proxy_url("http://app", &url, &error, &hint)) << error;
  EXPECT_EQ(url.name, "app");
  EXPECT_EQ(url.address, "");
  EXPECT_EQ(url.default_port_address, "");
  EXPECT_EQ(url.path, "");

  ASSERT_TRUE(parse_proxy_url("http://app/v1/", &url, &error, &hint)) << error;
  EXPECT_EQ(url.name, "app");
  EXPECT_EQ(url.path, "/v1/");

  ASSERT_TRUE(parse_proxy_url("http://127.0.0.1:8080/x", &url, &error, &hint)) << error;
  EXPECT_EQ(url.name, "");
  EXPECT_EQ(url.address, "127.0.0.1:8080");
  EXPECT_EQ(url.path, "/x");

  ASSERT_TRUE(parse_proxy_url("http://127.0.0.1", &url, &error, &hint)) << error;
  EXPECT_EQ(url.name, "127.0.0.1");
  EXPECT_EQ(url.default_port_address, "127.0.0.1:80");

  ASSERT_TRUE(parse_proxy_url("http://[::1]/", &url, &error, &hint)) << error;
  EXPECT_EQ(url.address, "[::1]:80");
  EXPECT_EQ(url.path, "/");

  ASSERT_TRUE(parse_proxy_url("http://unix:/run/app.sock:", &url, &error, &hint)) << error;
  EXPECT_EQ(url.address, "unix:/run/app.sock");
  EXPECT_EQ(url.path, "");
  ASSERT_TRUE(parse_proxy_url("http://unix:/run/app.sock:/v2/", &url, &error, &hint)) << error;
  EXPECT_EQ(url.address, "unix:/run/app.sock");
  EXPECT_EQ(url.path, "/v2/");
}

TEST(ProxyUrl, Errors) {
  auto fails = [](std::string_view text) {
    ProxyUrl url;
    std::string error, hint;
    EXPECT_FALSE(parse_proxy_url(text, &url, &error, &hint)) << text;
    return error + " (hint: " + hint + ")";
  };
  EXPECT_EQ(fails("https://unix:/run/app.sock:"),
            "proxy URL 'https://unix:/run/app.sock:' asks for TLS over a unix socket (hint: a "
            "unix socket is local: write \"http://unix:...\"; https:// is for back ends reached "
            "over TCP)");
  EXPECT_EQ(fails("127.0.0.1:8080"),
            "proxy target '127.0.0.1:8080' is not an http:// or https:// URL (hint: write "
            "\"http://127.0.0.1:8080\")");
  EXPECT_EQ(fails("http://unix:/run/app.sock"),
            "unix socket in proxy URL 'http://unix:/run/app.sock' is not followed by ':' (hint: "
            "end the socket path with ':', e.g. \"http://unix:/run/app.sock:\" or "
            "\"http://unix:/run/app.sock:/v1/\")");
  EXPECT_EQ(fails("http://app/x?y=1"),
            "proxy URL 'http://app/x?y=1' has a query or fragment (hint: the request's own query "
            "string is passed on; a proxy URL has at most a path)");
  EXPECT_EQ(fails("http://user:pw@app"),
            "proxy URL 'http://user:pw@app' contains user information (hint: credentials for the "
            "back end go in a request header, e.g. request_headers = { set = { Authorization = "
            "\"...\" } })");
  EXPECT_NE(fails("http:///x").find("has no host"), std::string::npos);
}

// ---------------------------------------------------------------- handlers on one route
// (Upstream groups are tested in tests/unit/upstream/config_test.cc, fastcgi and proxy routes
// beside their handlers, in tests/unit/handlers/NAME/config_test.cc.)

class RouteHandlersTest : public test_support::ConfigTest {};

TEST_F(RouteHandlersTest, OneHandlerPerRoute) {
  EXPECT_EQ(errors(R"([[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "http://127.0.0.1:8080"
fastcgi = "127.0.0.1:9000"
[[site.route]]
prefix = "/b/"
return = 200
proxy = "http://127.0.0.1:8080"
[[site.route]]
prefix = "/c/"
handler = "api"
fastcgi = "127.0.0.1:9000"
[[site.route]]
prefix = "/d/"
handler = "proxy"
)"),
            (std::vector<std::string>{
                "6:11: 'fastcgi' and 'proxy' cannot both be set on a route (hint: a route has "
                "exactly one handler; add another [[site.route]] for the other)",
                "10:9: 'proxy' cannot be combined with 'return' (hint: a route has exactly one "
                "handler; remove one of them)",
                "13:11: 'handler' cannot be combined with 'fastcgi' (hint: 'fastcgi' already "
                "selects the fastcgi handler; remove 'handler')",
                "17:11: handler \"proxy\" is chosen with 'proxy' (hint: write proxy = \"URL\", "
                "e.g. proxy = \"http://127.0.0.1:8080\", and remove 'handler')",
            }));
}

TEST_F(RouteHandlersTest, KeysOfAnotherHandlerAreRejected) {
  EXPECT_EQ(errors(R"([[site]]
root = "www"
[[site.route]]
prefix = "/a/"
try_files = ["$uri", "=404"]
websocket = true
[[site.route]]
prefix = "/b/"
fastcgi = "127.0.0.1:9000"
strip_prefix = true
[[site.route]]
prefix = "/c/"
proxy = "http://127.0.0.1:8080"
check_script = false
[[site.route]]
prefix = "/d/"
return = 204
fastcgi_buffer = "1k"
)"),
            (std::vector<std::string>{
                "5:13: 'try_files' needs a 'fastcgi' route (hint: add fastcgi = \"GROUP or "
                "ADDRESS\" to send the route to a FastCGI back end such as php-fpm)",
                "6:13: 'websocket' needs a 'proxy' route (hint: add proxy = \"http://...\" to "
                "send the route to an HTTP back end)",
                "10:16: 'strip_prefix' needs a 'proxy' route (hint: add proxy = \"http://...\" to "
                "send the route to an HTTP back end)",
                "14:16: 'check_script' needs a 'fastcgi' route (hint: add fastcgi = \"GROUP or "
                "ADDRESS\" to send the route to a FastCGI back end such as php-fpm)",
                "18:18: 'fastcgi_buffer' needs a 'fastcgi' route (hint: add fastcgi = \"GROUP or "
                "ADDRESS\" to send the route to a FastCGI back end such as php-fpm)",
            }));
}

TEST_F(RouteHandlersTest, UpstreamKeyOnARouteSaysWhereItBelongs) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
proxy = "http://127.0.0.1:8080"
keepalive = 8
)"),
            "6:1: unknown key 'keepalive' in [[site.route]] (hint: 'keepalive' is set on an "
            "[[upstream]] group; name the group in the route's fastcgi or proxy)");
}

// ---------------------------------------------------------------- command line

CommandLineResult parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"peregrine"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

class QuickModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_cwd_ = fs::current_path();
    fs::current_path(dir_.path());
    fs::create_directories(dir_.path("site"));
  }
  void TearDown() override { fs::current_path(old_cwd_); }

  std::shared_ptr<const Config> build_ok(std::initializer_list<const char*> args) {
    CommandLineResult parsed = parse(args);
    EXPECT_EQ(parsed.error, "");
    LoadResult result = build_config(parsed.cli);
    for (const ConfigError& e : result.errors) ADD_FAILURE() << e.to_string();
    EXPECT_NE(result.config, nullptr);
    return result.config;
  }

  std::vector<std::string> build_errors(std::initializer_list<const char*> args) {
    CommandLineResult parsed = parse(args);
    EXPECT_EQ(parsed.error, "");
    LoadResult result = build_config(parsed.cli);
    EXPECT_EQ(result.config, nullptr);
    std::vector<std::string> out;
    for (const ConfigError& e : result.errors) out.push_back(e.to_string());
    return out;
  }

  TempDir dir_;
  fs::path old_cwd_;
};

TEST_F(QuickModeTest, ParsesTheNewOptions) {
  CommandLineResult r = parse({"--fastcgi", "unix:/run/php.sock", "--proxy=/api/=http://a:1",
                               "--proxy", "http://127.0.0.1:2"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cli.fastcgi, "unix:/run/php.sock");
  EXPECT_EQ(r.cli.proxy, (std::vector<std::string>{"/api/=http://a:1", "http://127.0.0.1:2"}));
  EXPECT_EQ(parse({"--fastcgi"}).error, "option '--fastcgi' needs a value");
  EXPECT_EQ(parse({"--proxi", "x"}).error, "unknown option '--proxi' (did you mean '--proxy'?)");
  std::string help = usage();
  EXPECT_NE(help.find("--fastcgi ADDR"), std::string::npos);
  EXPECT_NE(help.find("--proxy URL"), std::string::npos);
  EXPECT_NE(help.find("--proxy /PREFIX/=URL"), std::string::npos);
}

TEST_F(QuickModeTest, FastcgiServesRootThroughAFrontController) {
  auto config = build_ok({"--root", "site", "--fastcgi", "unix:/run/php/php8.2-fpm.sock"});
  ASSERT_NE(config, nullptr);
  const Site& site = config->sites[0];
  EXPECT_EQ(site.static_files.root, dir_.path("site"));
  ASSERT_EQ(site.routes.size(), 1u);
  const Route& route = site.routes[0];
  EXPECT_EQ(route.match, MatchKind::kPrefix);
  EXPECT_EQ(route.pattern, "/");
  ASSERT_EQ(route.type->name, "fastcgi");
  EXPECT_EQ(route.options_as<fastcgi::FastcgiOptions>()->upstream,
            "php");  // a group with a cap (cli_test.cc)
  EXPECT_EQ(route.options_as<fastcgi::FastcgiOptions>()->root, dir_.path("site"));
  EXPECT_EQ(route.options_as<fastcgi::FastcgiOptions>()->try_files,
            (std::vector<std::string>{"$uri", "$uri/", "/index.php?$args"}));
  EXPECT_EQ(route.options_as<fastcgi::FastcgiOptions>()->index,
            (std::vector<std::string>{"index.php", "index.html"}));
  ASSERT_NE(route.options_as<fastcgi::FastcgiOptions>()->split_path, nullptr);
  EXPECT_EQ(route.static_files.root, dir_.path("site"));
  ASSERT_EQ(config->upstreams.size(), 1u);
  EXPECT_EQ(config->upstreams[0].servers[0].addr.ss_family, AF_UNIX);
}

TEST_F(QuickModeTest, FastcgiErrors) {
  EXPECT_EQ(build_errors({"--fastcgi", "127.0.0.1:9000"}),
            (std::vector<std::string>{
                "<command line>: error: --fastcgi needs --root DIR (hint: DIR is the directory "
                "of the PHP scripts, as php-fpm sees it (SCRIPT_FILENAME is DIR followed by the "
                "path))"}));
  EXPECT_EQ(build_errors({"--root", "site", "--fastcgi", "php-fpm.sock"}),
            (std::vector<std::string>{
                "<command line>: error: --fastcgi: upstream address 'php-fpm.sock' has no port "
                "(hint: valid forms: \"127.0.0.1:9000\", \"[::1]:9000\", \"localhost:9000\", "
                "\"unix:/run/php/php-fpm.sock\")"}));
  EXPECT_EQ(build_errors({"-c", "x.toml", "--fastcgi", "127.0.0.1:9000"}),
            (std::vector<std::string>{
                "<command line>: error: --fastcgi cannot be combined with -c (hint: add a route "
                "with fastcgi = \"127.0.0.1:9000\" to a [[site]] of x.toml)"}));
}

TEST_F(QuickModeTest, OneProxyUrlProxiesEverything) {
  auto config = build_ok({"--proxy", "http://127.0.0.1:8080"});
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].pattern, "/");
  ASSERT_EQ(routes[0].type->name, "proxy");
  EXPECT_EQ(routes[0].options_as<proxy::ProxyOptions>()->upstream, "127.0.0.1:8080");
  EXPECT_EQ(routes[0].options_as<proxy::ProxyOptions>()->path_prefix, "/");
  EXPECT_FALSE(routes[0].options_as<proxy::ProxyOptions>()->strip_prefix);
  ASSERT_EQ(config->upstreams.size(), 1u);
  EXPECT_EQ(config->upstreams[0].balance, Balance::kRoundRobin);
}

TEST_F(QuickModeTest, SeveralProxyUrlsFormOneRoundRobinGroup) {
  auto config = build_ok({"--proxy", "http://127.0.0.1:8081", "--proxy", "http://127.0.0.1:8082",
                          "--proxy", "http://unix:/run/app.sock:"});
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->upstreams.size(), 1u);
  const UpstreamGroup& g = config->upstreams[0];
  EXPECT_EQ(g.name, "proxy");
  EXPECT_EQ(g.balance, Balance::kRoundRobin);
  ASSERT_EQ(g.servers.size(), 3u);
  EXPECT_EQ(format_endpoint(g.servers[0].addr), "127.0.0.1:8081");
  EXPECT_EQ(format_endpoint(g.servers[1].addr), "127.0.0.1:8082");
  EXPECT_EQ(g.servers[2].addr.ss_family, AF_UNIX);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].options_as<proxy::ProxyOptions>()->upstream, "proxy");
}

TEST_F(QuickModeTest, PrefixProxiesComeBeforeTheRoot) {
  auto config = build_ok({"--root", "site", "--proxy", "/api/=http://127.0.0.1:8080", "--proxy",
                          "/v2/=http://127.0.0.1:8081/new/"});
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].pattern, "/api/");
  ASSERT_EQ(routes[0].type->name, "proxy");
  EXPECT_EQ(routes[0].options_as<proxy::ProxyOptions>()->upstream, "127.0.0.1:8080");
  EXPECT_EQ(routes[0].options_as<proxy::ProxyOptions>()->path_prefix, "/api/");
  EXPECT_TRUE(routes[0].options_as<proxy::ProxyOptions>()->strip_prefix);
  EXPECT_EQ(routes[1].pattern, "/v2/");
  EXPECT_EQ(routes[1].options_as<proxy::ProxyOptions>()->path,
            "/new/");  // the URL's path replaces the prefix
  EXPECT_FALSE(routes[1].options_as<proxy::ProxyOptions>()->strip_prefix);
  EXPECT_EQ(routes[2].pattern, "/");
  EXPECT_EQ(routes[2].type->name, "static");
  EXPECT_EQ(routes[2].static_files.root, dir_.path("site"));
}

TEST_F(QuickModeTest, PrefixProxyBesideFastcgi) {
  auto config = build_ok(
      {"--root", "site", "--fastcgi", "127.0.0.1:9000", "--proxy", "/api/=http://127.0.0.1:8080"});
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].type->name, "proxy");
  EXPECT_EQ(routes[1].type->name, "fastcgi");
  EXPECT_EQ(config->upstreams.size(), 2u);
}

TEST_F(QuickModeTest, ProxyErrorsNameTheFlag) {
  EXPECT_EQ(build_errors({"--proxy", "https://unix:/run/app.sock:"}),
            (std::vector<std::string>{
                "<command line>: error: --proxy: proxy URL 'https://unix:/run/app.sock:' asks for "
                "TLS over a unix socket (hint: a unix socket is local: write \"http://unix:...\"; "
                "https:// is for back ends reached over TCP)"}));
  EXPECT_EQ(build_errors({"--proxy", "http://app"}),
            (std::vector<std::string>{
                "<command line>: error: --proxy: 'http://app' names the group 'app', but groups "
                "are declared only in a configuration file (hint: write the back end's address, "
                "e.g. http://127.0.0.1:8080, or declare an [[upstream]] in a file (-c))"}));
  EXPECT_EQ(build_errors({"--proxy", "/api/"}),
            (std::vector<std::string>{"<command line>: error: --proxy: '/api/' has a prefix but "
                                      "no URL (hint: write --proxy /api/=http://127.0.0.1:8080)"}));
  EXPECT_EQ(build_errors({"--proxy", "http://127.0.0.1:1/a", "--proxy", "http://127.0.0.1:2"}),
            (std::vector<std::string>{
                "<command line>: error: --proxy: several URLs form one group, so '/a' cannot be "
                "added to one of them (hint: give the URLs without a path)"}));
  EXPECT_EQ(build_errors({"--proxy", "http://127.0.0.1:1", "--proxy", "http://localhost:1"}),
            (std::vector<std::string>{
                "<command line>: error: --proxy: back end 127.0.0.1:1 is given twice"}));
  EXPECT_EQ(build_errors({"--root", "site", "--proxy", "http://127.0.0.1:1"}),
            (std::vector<std::string>{
                "<command line>: error: --root is not used: a --proxy URL without a prefix "
                "proxies every path (hint: to serve --root and proxy one prefix, write --proxy "
                "/PREFIX/=URL)"}));
  EXPECT_EQ(
      build_errors({"--proxy", "/a/=http://127.0.0.1:1", "--proxy", "/a/=http://127.0.0.1:2"}),
      (std::vector<std::string>{"<command line>: error: --proxy: prefix '/a/' is given twice"}));
}

}  // namespace
}  // namespace peregrine::config
