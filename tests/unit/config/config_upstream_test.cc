// [[upstream]] groups, fastcgi and proxy routes (issues 3 and 4): every key loads into the
// snapshot, the defaults, each class of error at its line:col, implicit groups and their sharing,
// and the --fastcgi / --proxy quick modes.
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

namespace peregrine::config {
namespace {

namespace fs = std::filesystem;

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
  EXPECT_EQ(fails("https://app"),
            "proxying to https:// back ends is not supported ('https://app') (hint: TLS to "
            "upstreams is not supported yet; reach the back end over http:// on a trusted network "
            "or a unix socket)");
  EXPECT_EQ(fails("127.0.0.1:8080"),
            "proxy target '127.0.0.1:8080' is not an http:// URL (hint: write "
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

// ---------------------------------------------------------------- the TOML loader

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/peregrine-upstream-test-XXXXXX";
    const char* made = mkdtemp(pattern);
    path_ = made != nullptr ? fs::canonical(made).string() : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string path(std::string_view sub) const { return path_ + "/" + std::string(sub); }

 private:
  std::string path_;
};

std::string describe(const ConfigError& e) {
  std::string out =
      std::to_string(e.pos.line) + ":" + std::to_string(e.pos.column) + ": " + e.message;
  if (!e.hint.empty()) out += " (hint: " + e.hint + ")";
  return out;
}

class UpstreamConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.path("www"));
    fs::create_directories(dir_.path("wp"));
  }

  std::shared_ptr<const Config> load_ok(std::string_view toml) {
    LoadResult result = load_string(toml, dir_.path("test.toml"));
    for (const ConfigError& e : result.errors) ADD_FAILURE() << e.to_string();
    EXPECT_NE(result.config, nullptr);
    return result.config;
  }

  std::vector<std::string> errors(std::string_view toml) {
    LoadResult result = load_string(toml, dir_.path("test.toml"));
    EXPECT_EQ(result.config, nullptr);
    std::vector<std::string> out;
    for (const ConfigError& e : result.errors) out.push_back(describe(e));
    return out;
  }

  std::string error(std::string_view toml) {
    std::vector<std::string> all = errors(toml);
    EXPECT_EQ(all.size(), 1u) << ::testing::PrintToString(all);
    return all.empty() ? "" : all.front();
  }

  static const UpstreamGroup* group(const Config& config, std::string_view name) {
    for (const UpstreamGroup& g : config.upstreams) {
      if (g.name == name) return &g;
    }
    return nullptr;
  }

  std::string www() const { return dir_.path("www"); }

  TempDir dir_;
};

TEST_F(UpstreamConfigTest, GroupDefaults) {
  auto config = load_ok(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->upstreams.size(), 1u);
  const UpstreamGroup& g = config->upstreams[0];
  EXPECT_EQ(g.name, "app");
  EXPECT_EQ(g.pos.line, 1u);
  EXPECT_EQ(g.balance, Balance::kRoundRobin);
  EXPECT_EQ(g.hash_key, "");
  EXPECT_EQ(g.max_fails, 1u);
  EXPECT_EQ(g.fail_timeout, Millis(10'000));
  EXPECT_EQ(g.keepalive, 1024u);
  EXPECT_EQ(g.keepalive_timeout, Millis(60'000));
  EXPECT_EQ(g.keepalive_requests, 1000u);
  EXPECT_EQ(g.queue, 1024u);
  EXPECT_EQ(g.queue_timeout, Millis(30'000));
  EXPECT_EQ(g.connect_timeout, Millis(5'000));
  EXPECT_EQ(g.send_timeout, Millis(60'000));
  EXPECT_EQ(g.read_timeout, Millis(60'000));
  EXPECT_EQ(g.tries, 3u);
  EXPECT_EQ(g.try_timeout, Millis(0));
  EXPECT_FALSE(g.health_check.enabled);
  ASSERT_EQ(g.servers.size(), 1u);
  EXPECT_EQ(g.servers[0].address, "127.0.0.1:8080");
  EXPECT_EQ(format_endpoint(g.servers[0].addr), "127.0.0.1:8080");
  EXPECT_EQ(g.servers[0].weight, 1u);
  EXPECT_FALSE(g.servers[0].backup);
  EXPECT_EQ(g.servers[0].max_conns, 0u);
  EXPECT_EQ(g.servers[0].pos.line, 3u);
  EXPECT_EQ(g.servers[0].pos.column, 12u);
}

TEST_F(UpstreamConfigTest, EveryGroupKeyLoads) {
  auto config = load_ok(R"([[upstream]]
name = "app"
balance = "hash"
hash_key = "$http_X_User_Id"
max_fails = 2
fail_timeout = "20s"
keepalive = 16
keepalive_timeout = "30s"
keepalive_requests = 500
queue = 10
queue_timeout = "3s"
connect_timeout = "1s"
send_timeout = "2s"
read_timeout = "4s"
tries = 2
try_timeout = "9s"
servers = ["127.0.0.1:8080", "unix:/run/app.sock"]
[[upstream.server]]
address = "[::1]:8081"
weight = 2
backup = true
max_conns = 8
[upstream.health_check]
path = "/health"
host = "app.internal"
interval = "7s"
timeout = "1500ms"
status = [200, 299]
rise = 4
fall = 5

[[upstream]]
name = "b"
balance = "least_conn"
servers = "127.0.0.1:1"
[upstream.health_check]
status = 204

[[upstream]]
name = "c"
balance = "ip_hash"
servers = ["127.0.0.1:2"]

[[upstream]]
name = "d"
balance = "hash"
hash_key = "$cookie_Session"
servers = ["127.0.0.1:3"]

[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->upstreams.size(), 4u);
  const UpstreamGroup& g = config->upstreams[0];
  EXPECT_EQ(g.balance, Balance::kHash);
  EXPECT_EQ(g.hash_key, "$http_x-user-id");  // lower-case, '_' read as '-'
  EXPECT_EQ(g.max_fails, 2u);
  EXPECT_EQ(g.fail_timeout, Millis(20'000));
  EXPECT_EQ(g.keepalive, 16u);
  EXPECT_EQ(g.keepalive_timeout, Millis(30'000));
  EXPECT_EQ(g.keepalive_requests, 500u);
  EXPECT_EQ(g.queue, 10u);
  EXPECT_EQ(g.queue_timeout, Millis(3'000));
  EXPECT_EQ(g.connect_timeout, Millis(1'000));
  EXPECT_EQ(g.send_timeout, Millis(2'000));
  EXPECT_EQ(g.read_timeout, Millis(4'000));
  EXPECT_EQ(g.tries, 2u);
  EXPECT_EQ(g.try_timeout, Millis(9'000));
  ASSERT_EQ(g.servers.size(), 3u);
  EXPECT_EQ(g.servers[0].address, "127.0.0.1:8080");
  EXPECT_EQ(g.servers[1].address, "unix:/run/app.sock");
  EXPECT_EQ(g.servers[1].addr.ss_family, AF_UNIX);
  EXPECT_EQ(g.servers[2].address, "[::1]:8081");
  EXPECT_EQ(g.servers[2].weight, 2u);
  EXPECT_TRUE(g.servers[2].backup);
  EXPECT_EQ(g.servers[2].max_conns, 8u);
  EXPECT_TRUE(g.health_check.enabled);
  EXPECT_EQ(g.health_check.path, "/health");
  EXPECT_EQ(g.health_check.host, "app.internal");
  EXPECT_EQ(g.health_check.interval, Millis(7'000));
  EXPECT_EQ(g.health_check.timeout, Millis(1'500));
  EXPECT_EQ(g.health_check.expect_status_min, 200);
  EXPECT_EQ(g.health_check.expect_status_max, 299);
  EXPECT_EQ(g.health_check.rise, 4u);
  EXPECT_EQ(g.health_check.fall, 5u);

  const UpstreamGroup& b = config->upstreams[1];
  EXPECT_EQ(b.balance, Balance::kLeastConn);
  ASSERT_EQ(b.servers.size(), 1u);  // a single string is a one-entry list
  EXPECT_TRUE(b.health_check.enabled);
  EXPECT_EQ(b.health_check.path, "/");  // defaults of an enabled check
  EXPECT_EQ(b.health_check.expect_status_min, 204);
  EXPECT_EQ(b.health_check.expect_status_max, 204);
  EXPECT_EQ(b.health_check.rise, 2u);
  EXPECT_EQ(b.health_check.fall, 3u);
  EXPECT_EQ(config->upstreams[2].balance, Balance::kIpHash);
  EXPECT_EQ(config->upstreams[3].hash_key, "$cookie_Session");  // cookie names keep their case
}

TEST_F(UpstreamConfigTest, GroupErrorsAtTheirPositions) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "app one"
balance = "round_robbin"
servers = ["127.0.0.1", "example.com:80", "unix:rel.sock"]
tries = 0
keepalive = -1
fail_timeout = "10 s"
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "2:8: invalid upstream name \"app one\" (hint: names use letters, digits, '_', "
                "'.' and '-', e.g. \"app\" or \"php-fpm\")",
                "3:11: unknown balance \"round_robbin\" (hint: did you mean 'round_robin'?)",
                "4:12: upstream address '127.0.0.1' has no port (hint: valid forms: "
                "\"127.0.0.1:9000\", \"[::1]:9000\", \"localhost:9000\", "
                "\"unix:/run/php/php-fpm.sock\")",
                "4:25: upstream address 'example.com:80' names a host; only IP addresses and "
                "'localhost' are accepted (hint: host names are not resolved (starting must not "
                "depend on DNS); write the back end's IP address)",
                "4:43: unix socket path in 'unix:rel.sock' is not absolute (hint: write unix: "
                "followed by an absolute path, e.g. \"unix:/run/php/php8.2-fpm.sock\")",
                "5:9: 'upstream.tries' is 0; it must be between 1 and 100",
                "6:13: 'upstream.keepalive' is -1; it must be between 0 and 65536",
                "7:16: invalid duration \"10 s\" for 'upstream.fail_timeout' (hint: write a "
                "duration as \"500ms\", \"20s\", \"5m\", \"1h\" or an integer number of seconds)",
            }));
}

TEST_F(UpstreamConfigTest, MissingNameAndServers) {
  EXPECT_EQ(errors(R"([[upstream]]
balance = "least_conn"

[[upstream]]
name = "x"
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "1:1: [[upstream]] has no 'name' (hint: routes refer to the group by name: name = "
                "\"app\")",
                "1:1: [[upstream]] has no servers (hint: add servers = [\"127.0.0.1:8080\"] or "
                "[[upstream.server]] tables with an address)",
                "4:1: [[upstream]] has no servers (hint: add servers = [\"127.0.0.1:8080\"] or "
                "[[upstream.server]] tables with an address)",
            }));
}

TEST_F(UpstreamConfigTest, DuplicateNamesAndServers) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080", "localhost:8080"]
[[upstream]]
name = "app"
servers = ["127.0.0.1:8081"]
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "3:30: server 'localhost:8080' is listed twice in upstream 'app' (hint: first at "
                "line 3; to send it more requests, give it a weight)",
                "5:8: upstream name 'app' is used twice (hint: first at line 1)",
            }));
}

TEST_F(UpstreamConfigTest, HashKeyRules) {
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
balance = "hash"
servers = ["127.0.0.1:1"]
[[site]]
root = "www"
)"),
            "3:11: balance = \"hash\" needs a 'hash_key' (hint: e.g. hash_key = \"$uri\", "
            "\"$http_x_user_id\" or \"$cookie_session\")");
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
hash_key = "$uri"
servers = ["127.0.0.1:1"]
[[site]]
root = "www"
)"),
            "3:12: 'hash_key' needs balance = \"hash\" (hint: remove it, or set balance = "
            "\"hash\")");
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
balance = "hash"
hash_key = "$host"
servers = ["127.0.0.1:1"]
[[site]]
root = "www"
)"),
            "4:12: unknown hash_key \"$host\" (hint: hash_key is \"$uri\", \"$http_NAME\" (a "
            "request header) or \"$cookie_NAME\")");
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
balance = "hash"
hash_key = "$http_"
servers = ["127.0.0.1:1"]
[[site]]
root = "www"
)"),
            "4:12: invalid header name in hash_key \"$http_\" (hint: hash_key is \"$uri\", "
            "\"$http_NAME\" (a request header) or \"$cookie_NAME\")");
}

TEST_F(UpstreamConfigTest, ServerTableErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "a"
[[upstream.server]]
weight = 2000
[[upstream.server]]
address = "127.0.0.1:9000"
backup = "yes"
max_conns = -1
colour = 1
[[upstream.server]]
address = "127.0.0.1:9001"
backup = true
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "3:1: [[upstream.server]] has no 'address' (hint: e.g. address = "
                "\"127.0.0.1:8080\" or \"unix:/run/app.sock\")",
                "4:10: 'upstream.server.weight' is 2000; it must be between 1 and 1000",
                "7:10: 'upstream.server.backup' must be a boolean, not a string (\"yes\")",
                "8:13: 'upstream.server.max_conns' is -1; it must be between 0 and 1048576",
                "9:1: unknown key 'colour' in [[upstream.server]] (hint: valid keys: address, "
                "weight, backup, max_conns)",
            }));
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
[[upstream.server]]
address = "127.0.0.1:9001"
backup = true
[[site]]
root = "www"
)"),
            "1:1: every server of upstream 'a' is a backup (hint: backup servers are used only "
            "when no primary server is up; make at least one server a primary (backup = false))");
}

TEST_F(UpstreamConfigTest, HealthCheckErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "a"
servers = ["127.0.0.1:1"]
[upstream.health_check]
path = "health"
host = "bad host"
interval = "10ms"
status = [399, 200]
rise = 0
fal = 2
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "5:8: invalid health check path \"health\" (hint: a request target starting with "
                "'/', e.g. \"/health\")",
                "6:8: invalid health check host \"bad host\" (hint: a Host header value such as "
                "\"app.internal\" or \"app.internal:8080\")",
                "7:12: 'upstream.health_check.interval' is 10ms; it must be between 100ms and 24h",
                "8:10: health check status range [399, 200] is empty (hint: write the lower "
                "status first, e.g. [200, 399])",
                "9:8: 'upstream.health_check.rise' is 0; it must be between 1 and 1000",
                "10:1: unknown key 'fal' in [upstream.health_check] (hint: did you mean "
                "'fall'?)",
            }));
  EXPECT_EQ(error(R"([[upstream]]
name = "a"
servers = ["127.0.0.1:1"]
health_check = true
[[site]]
root = "www"
)"),
            "4:16: 'upstream.health_check' must be a table, not a boolean (hint: write an "
            "[upstream.health_check] section below the [[upstream]])");
}

TEST_F(UpstreamConfigTest, UpstreamWrittenWithSingleBrackets) {
  EXPECT_EQ(error(R"([upstream]
name = "a"
servers = ["127.0.0.1:1"]
[[site]]
root = "www"
)"),
            "1:1: 'upstream' must be an array of tables, not a table (hint: write each group as "
            "an [[upstream]] table (double brackets))");
}

// ---------------------------------------------------------------- fastcgi routes

TEST_F(UpstreamConfigTest, FastcgiRouteDefaults) {
  auto config = load_ok(R"([[site]]
root = "www"
index = ["index.html"]
[[site.route]]
extension = "php"
fastcgi = "unix:/run/php/php8.2-fpm.sock"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_EQ(route.handler, HandlerKind::kFastcgi);
  const FastcgiOptions& f = route.fastcgi;
  EXPECT_EQ(f.upstream, "unix:/run/php/php8.2-fpm.sock");
  EXPECT_EQ(f.root, www());                                   // the site's root
  EXPECT_EQ(f.index, std::vector<std::string>{"index.php"});  // not the site's index.html
  ASSERT_NE(f.split_path, nullptr);
  EXPECT_EQ(f.split_path->pattern(), std::string(kDefaultSplitPath));
  Regex::Captures captures;
  ASSERT_TRUE(f.split_path->match("/blog/index.php/2024/post", &captures));
  EXPECT_EQ(captures.group[1], "/blog/index.php");
  EXPECT_EQ(captures.group[2], "/2024/post");
  EXPECT_TRUE(f.try_files.empty());
  EXPECT_TRUE(f.params.empty());
  EXPECT_EQ(f.buffer_bytes, 64u * 1024);
  EXPECT_TRUE(f.check_script);
  EXPECT_TRUE(f.pipelining);

  // The implicit group: one server, default settings, at the route's value.
  ASSERT_EQ(config->upstreams.size(), 1u);
  const UpstreamGroup& g = config->upstreams[0];
  EXPECT_EQ(g.name, "unix:/run/php/php8.2-fpm.sock");
  ASSERT_EQ(g.servers.size(), 1u);
  EXPECT_EQ(g.servers[0].addr.ss_family, AF_UNIX);
  EXPECT_EQ(g.keepalive, 1024u);
  EXPECT_EQ(g.queue, 1024u);
  EXPECT_EQ(g.pos.line, 6u);
  EXPECT_EQ(g.pos.column, 11u);
  // The site's root still serves everything else.
  ASSERT_EQ(config->sites[0].routes.size(), 2u);
  EXPECT_EQ(config->sites[0].routes[1].handler, HandlerKind::kStatic);
}

TEST_F(UpstreamConfigTest, FastcgiEveryKeyLoads) {
  auto config = load_ok(R"([[upstream]]
name = "php"
servers = ["unix:/run/php/a.sock", "unix:/run/php/b.sock"]

[[site]]
[[site.route]]
prefix = "/"
fastcgi = "php"
root = "wp"
index = ["index.php", "index.html"]
split_path = '^(.+\.php)(/.*)$'
try_files = ["$uri", "$uri/", "/index.php?$args"]
fastcgi_params = { ZZ = "last", APP_ENV = "production", HTTPS = "on" }
fastcgi_buffer = "128k"
check_script = false
fastcgi_pipelining = false
etag = false
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  ASSERT_EQ(route.handler, HandlerKind::kFastcgi);
  const FastcgiOptions& f = route.fastcgi;
  EXPECT_EQ(f.upstream, "php");
  EXPECT_EQ(f.root, dir_.path("wp"));
  EXPECT_EQ(f.index, (std::vector<std::string>{"index.php", "index.html"}));
  EXPECT_EQ(route.static_files.index, f.index);
  EXPECT_FALSE(route.static_files.etag);  // static options serve the fallback files
  EXPECT_EQ(f.split_path->pattern(), R"(^(.+\.php)(/.*)$)");
  EXPECT_EQ(f.try_files, (std::vector<std::string>{"$uri", "$uri/", "/index.php?$args"}));
  using Params = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(f.params, (Params{{"ZZ", "last"}, {"APP_ENV", "production"}, {"HTTPS", "on"}}));
  EXPECT_EQ(f.buffer_bytes, 128u * 1024);
  EXPECT_FALSE(f.check_script);
  EXPECT_FALSE(f.pipelining);
  EXPECT_EQ(config->upstreams.size(), 1u);  // no implicit group for a named one
  EXPECT_EQ(config->sites[0].routes.size(), 1u);
}

TEST_F(UpstreamConfigTest, ImplicitGroupsAreSharedBySameAddress) {
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "127.0.0.1:9000"
[[site.route]]
prefix = "/admin/"
fastcgi = "localhost:9000"
[[site.route]]
prefix = "/other/"
fastcgi = "127.0.0.1:9001"

[[site]]
hosts = ["b.example"]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "127.0.0.1:9000"
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->upstreams.size(), 2u);
  EXPECT_EQ(config->upstreams[0].name, "127.0.0.1:9000");
  EXPECT_EQ(config->upstreams[1].name, "127.0.0.1:9001");
  EXPECT_EQ(config->sites[0].routes[0].fastcgi.upstream, "127.0.0.1:9000");
  EXPECT_EQ(config->sites[0].routes[1].fastcgi.upstream, "127.0.0.1:9000");
  EXPECT_EQ(config->sites[0].routes[2].fastcgi.upstream, "127.0.0.1:9001");
  EXPECT_EQ(config->sites[1].routes[0].fastcgi.upstream, "127.0.0.1:9000");
}

TEST_F(UpstreamConfigTest, FastcgiErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "php"
servers = ["unix:/run/php.sock"]
[[site]]
[[site.route]]
prefix = "/"
fastcgi = "phpp"
split_path = '^(.+\.php)$'
try_files = ["$uri"]
fastcgi_params = { "APP-ENV" = "x", OK = 1 }
fastcgi_buffer = "1g"
directory_listing = true
alias = "www"
fastcgi_pipelining = "yes"
)"),
            (std::vector<std::string>{
                "5:1: fastcgi route has no root (hint: set root on the route or on its [[site]]: "
                "SCRIPT_FILENAME is the root followed by the script's path)",
                "7:11: no upstream group named 'phpp' (hint: did you mean 'php'? declared "
                "groups: php; or write an address: \"unix:/run/php/php8.2-fpm.sock\", "
                "\"127.0.0.1:9000\")",
                "8:14: 'split_path' must have 2 capture groups (SCRIPT_NAME, PATH_INFO), not 1 "
                "(hint: e.g. '^(.+?\\.php)(/.*)?$'; write other groups as (?:...))",
                "9:13: 'try_files' needs at least two entries (hint: files to try, then the "
                "fallback: [\"$uri\", \"$uri/\", \"/index.php?$args\"] or [\"$uri\", \"=404\"])",
                "10:20: invalid FastCGI parameter name 'APP-ENV' (hint: parameter names use "
                "letters, digits and '_', e.g. APP_ENV)",
                "10:42: 'site.route.fastcgi_params.OK' must be a string, not an integer",
                "11:18: 'site.route.fastcgi_buffer' is 1g; it must be between 0 and 64m",
                "12:21: 'directory_listing' does not apply to a 'fastcgi' route (hint: a "
                "directory is answered by its index script (index = [\"index.php\"]) or by "
                "try_files)",
                "13:9: 'alias' does not apply to a 'fastcgi' route (hint: set root: "
                "SCRIPT_FILENAME is the root followed by the script's path)",
                "14:22: 'site.route.fastcgi_pipelining' must be a boolean, not a string "
                "(\"yes\")",
            }));
}

TEST_F(UpstreamConfigTest, TryFilesErrors) {
  EXPECT_EQ(
      errors(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
fastcgi = "127.0.0.1:9000"
try_files = ["=404", "index.php", "$uri?x", "/x/$request_uri", "=99"]
)"),
      (std::vector<std::string>{
          "6:14: \"=404\" can only be the last entry of 'try_files' (hint: a status ends the "
          "list: nothing after it would be tried)",
          "6:22: try_files entry \"index.php\" must start with '/' or $uri (hint: e.g. "
          "\"$uri\", \"$uri/\", \"/index.php?$args\")",
          "6:35: only the last try_files entry may have a query (hint: files are tried by "
          "path; the fallback URI may carry \"?$args\")",
          "6:45: unknown variable in try_files entry \"/x/$request_uri\" (hint: try_files may "
          "use $uri (the request path) and $args (the query string))",
          "6:64: invalid try_files status \"=99\" (hint: write a status 400..599, e.g. "
          "\"=404\")",
      }));
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
fastcgi = "127.0.0.1:9000"
try_files = ["$uri", "=404"]
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].routes[0].fastcgi.try_files,
            (std::vector<std::string>{"$uri", "=404"}));
}

TEST_F(UpstreamConfigTest, SplitPathMustCompile) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "127.0.0.1:9000"
split_path = '^(.+\.php'
)"),
            "6:14: invalid regex \"^(.+\\.php\": missing closing parenthesis at offset 9 (hint: "
            "PCRE2 syntax, e.g. split_path = '^(.+?\\.php)(/.*)?$')");
}

// ---------------------------------------------------------------- proxy routes

TEST_F(UpstreamConfigTest, ProxyRouteDefaults) {
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
  ASSERT_EQ(route.handler, HandlerKind::kProxy);
  const ProxyOptions& p = route.proxy;
  EXPECT_EQ(p.upstream, "app");
  EXPECT_EQ(p.scheme, "http");
  EXPECT_EQ(p.path_prefix, "/api/");
  EXPECT_EQ(p.path, "");
  EXPECT_FALSE(p.strip_prefix);
  EXPECT_EQ(p.host_mode, "pass");
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

TEST_F(UpstreamConfigTest, ProxyEveryKeyLoads) {
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
  const ProxyOptions& p = routes[0].proxy;
  EXPECT_EQ(p.upstream, "app");
  EXPECT_EQ(p.path_prefix, "/api/");
  EXPECT_EQ(p.path, "/v1/");
  EXPECT_EQ(p.host_mode, "upstream");
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

  EXPECT_EQ(routes[1].proxy.upstream, "127.0.0.1:8081");
  EXPECT_TRUE(routes[1].proxy.strip_prefix);
  EXPECT_EQ(routes[1].proxy.path_prefix, "/other/");
  EXPECT_EQ(routes[1].proxy.host_mode, "backend.internal:8081");
  EXPECT_EQ(routes[2].proxy.upstream, "127.0.0.1:80");  // an IP without a port is port 80
  EXPECT_EQ(routes[2].proxy.path_prefix, "/status");    // an exact route's path
  EXPECT_EQ(routes[2].proxy.path, "/index.html");       // replaced by the URL's path
  EXPECT_EQ(routes[3].proxy.path_prefix, "");           // a regex route has no prefix
  EXPECT_EQ(routes[3].proxy.upstream, "unix:/run/ws.sock");
  EXPECT_EQ(routes[4].handler, HandlerKind::kStatic);
  ASSERT_EQ(config->upstreams.size(), 4u);
  EXPECT_EQ(config->upstreams[1].name, "127.0.0.1:8081");
  EXPECT_EQ(config->upstreams[2].name, "127.0.0.1:80");
  EXPECT_EQ(config->upstreams[3].name, "unix:/run/ws.sock");
}

TEST_F(UpstreamConfigTest, ProxyErrors) {
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
                "8:9: proxying to https:// back ends is not supported ('https://app') (hint: TLS "
                "to upstreams is not supported yet; reach the back end over http:// on a trusted "
                "network or a unix socket)",
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

TEST_F(UpstreamConfigTest, HeaderRuleErrors) {
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

// ---------------------------------------------------------------- handlers on one route

TEST_F(UpstreamConfigTest, OneHandlerPerRoute) {
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

TEST_F(UpstreamConfigTest, KeysOfAnotherHandlerAreRejected) {
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

TEST_F(UpstreamConfigTest, GroupUsesAreChecked) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[upstream.health_check]
path = "/health"
[[site]]
root = "www"
[[site.route]]
prefix = "/api/"
proxy = "http://app"
[[site.route]]
extension = "php"
fastcgi = "app"
)"),
            (std::vector<std::string>{
                "13:11: upstream 'app' has a health_check, which probes over HTTP; a fastcgi "
                "route cannot use it (hint: remove [upstream.health_check] from the group at "
                "line 1 (passive health still applies))",
                "13:11: upstream 'app' is used by both fastcgi and proxy routes (hint: first used "
                "by a proxy route at line 10; a group speaks one protocol, so declare one group "
                "for each)",
            }));
}

TEST_F(UpstreamConfigTest, UnknownGroupWithNoGroupsDeclared) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "php"
)"),
            "5:11: no upstream group named 'php' (hint: no [[upstream]] group is declared; or "
            "write an address: \"unix:/run/php/php8.2-fpm.sock\", \"127.0.0.1:9000\")");
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "unix:php.sock"
)"),
            "5:11: unix socket path in 'unix:php.sock' is not absolute (hint: write unix: "
            "followed by an absolute path, e.g. \"unix:/run/php/php8.2-fpm.sock\")");
}

TEST_F(UpstreamConfigTest, UpstreamKeyOnARouteSaysWhereItBelongs) {
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
  ASSERT_EQ(route.handler, HandlerKind::kFastcgi);
  EXPECT_EQ(route.fastcgi.upstream, "unix:/run/php/php8.2-fpm.sock");
  EXPECT_EQ(route.fastcgi.root, dir_.path("site"));
  EXPECT_EQ(route.fastcgi.try_files,
            (std::vector<std::string>{"$uri", "$uri/", "/index.php?$args"}));
  EXPECT_EQ(route.fastcgi.index, (std::vector<std::string>{"index.php", "index.html"}));
  ASSERT_NE(route.fastcgi.split_path, nullptr);
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
  ASSERT_EQ(routes[0].handler, HandlerKind::kProxy);
  EXPECT_EQ(routes[0].proxy.upstream, "127.0.0.1:8080");
  EXPECT_EQ(routes[0].proxy.path_prefix, "/");
  EXPECT_FALSE(routes[0].proxy.strip_prefix);
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
  EXPECT_EQ(routes[0].proxy.upstream, "proxy");
}

TEST_F(QuickModeTest, PrefixProxiesComeBeforeTheRoot) {
  auto config = build_ok({"--root", "site", "--proxy", "/api/=http://127.0.0.1:8080", "--proxy",
                          "/v2/=http://127.0.0.1:8081/new/"});
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].pattern, "/api/");
  ASSERT_EQ(routes[0].handler, HandlerKind::kProxy);
  EXPECT_EQ(routes[0].proxy.upstream, "127.0.0.1:8080");
  EXPECT_EQ(routes[0].proxy.path_prefix, "/api/");
  EXPECT_TRUE(routes[0].proxy.strip_prefix);
  EXPECT_EQ(routes[1].pattern, "/v2/");
  EXPECT_EQ(routes[1].proxy.path, "/new/");  // the URL's path replaces the prefix
  EXPECT_FALSE(routes[1].proxy.strip_prefix);
  EXPECT_EQ(routes[2].pattern, "/");
  EXPECT_EQ(routes[2].handler, HandlerKind::kStatic);
  EXPECT_EQ(routes[2].static_files.root, dir_.path("site"));
}

TEST_F(QuickModeTest, PrefixProxyBesideFastcgi) {
  auto config = build_ok(
      {"--root", "site", "--fastcgi", "127.0.0.1:9000", "--proxy", "/api/=http://127.0.0.1:8080"});
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].handler, HandlerKind::kProxy);
  EXPECT_EQ(routes[1].handler, HandlerKind::kFastcgi);
  EXPECT_EQ(config->upstreams.size(), 2u);
}

TEST_F(QuickModeTest, ProxyErrorsNameTheFlag) {
  EXPECT_EQ(build_errors({"--proxy", "https://127.0.0.1:8443"}),
            (std::vector<std::string>{
                "<command line>: error: --proxy: proxying to https:// back ends is not supported "
                "('https://127.0.0.1:8443') (hint: TLS to upstreams is not supported yet; reach "
                "the back end over http:// on a trusted network or a unix socket)"}));
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
