// [[upstream]] groups (upstream/config.cc): defaults, every key (hash_key parsed into its
// source), servers, health checks, implicit groups and their sharing, each error at its
// line:col.
#include "config/config.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <string>
#include <vector>

#include "config/listen_address.h"
#include "handlers/fastcgi/options.h"
#include "unit/config/config_test_support.h"
#include "upstream/config.h"

namespace peregrine::upstream {
namespace {

using namespace config;

class UpstreamConfigTest : public config::test_support::ConfigTest {};

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
  EXPECT_EQ(g.hash_key.source, HashKey::Source::kNone);
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
  EXPECT_EQ(g.hash_key.source, HashKey::Source::kHeader);
  EXPECT_EQ(g.hash_key.name, "x-user-id");  // lower-case, '_' read as '-'
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
  EXPECT_EQ(config->upstreams[3].hash_key.source, HashKey::Source::kCookie);
  EXPECT_EQ(config->upstreams[3].hash_key.name, "Session");  // cookie names keep their case
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
                "weight, backup, max_conns, route)",
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
  EXPECT_EQ(config->sites[0].routes[0].options_as<fastcgi::FastcgiOptions>()->upstream,
            "127.0.0.1:9000");
  EXPECT_EQ(config->sites[0].routes[1].options_as<fastcgi::FastcgiOptions>()->upstream,
            "127.0.0.1:9000");
  EXPECT_EQ(config->sites[0].routes[2].options_as<fastcgi::FastcgiOptions>()->upstream,
            "127.0.0.1:9001");
  EXPECT_EQ(config->sites[1].routes[0].options_as<fastcgi::FastcgiOptions>()->upstream,
            "127.0.0.1:9000");
}

// A php-fpm child stays with a kept connection: a group fastcgi routes use closes idle ones
// after 2 s and leaves children to the pool's other clients, unless the file says otherwise.
TEST_F(UpstreamConfigTest, FastcgiGroupsGetShortIdleDefaults) {
  auto config = load_ok(R"([[upstream]]
name = "php"
servers = ["127.0.0.1:9000"]
[[upstream]]
name = "php-tuned"
keepalive = 8
keepalive_timeout = "30s"
servers = ["127.0.0.1:9001"]
[[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[site]]
root = "www"
[[site.route]]
extension = "php"
fastcgi = "php"
[[site.route]]
prefix = "/tuned/"
fastcgi = "php-tuned"
[[site.route]]
prefix = "/api/"
proxy = "http://app"
)");
  ASSERT_NE(config, nullptr);
  const UpstreamGroup* php = group(*config, "php");
  ASSERT_NE(php, nullptr);
  EXPECT_EQ(php->keepalive_timeout, kFastcgiKeepaliveTimeout);
  EXPECT_EQ(php->keepalive_timeout, Millis(2'000));
  EXPECT_TRUE(php->keepalive_leaves_children);
  const UpstreamGroup* tuned = group(*config, "php-tuned");
  ASSERT_NE(tuned, nullptr);
  EXPECT_EQ(tuned->keepalive_timeout, Millis(30'000));
  EXPECT_EQ(tuned->keepalive, 8u);
  EXPECT_FALSE(tuned->keepalive_leaves_children);
  const UpstreamGroup* app = group(*config, "app");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->keepalive_timeout, Millis(60'000));
  EXPECT_FALSE(app->keepalive_leaves_children);
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

// The handler receives the key already interpreted: where it comes from, and the name to look up.
TEST(HashKey, ParsedIntoItsSource) {
  HashKey key;
  EXPECT_EQ(parse_hash_key("$uri", &key), "");
  EXPECT_EQ(key.source, HashKey::Source::kUri);
  EXPECT_EQ(key.name, "");
  EXPECT_EQ(parse_hash_key("$http_X_Tenant", &key), "");
  EXPECT_EQ(key.source, HashKey::Source::kHeader);
  EXPECT_EQ(key.name, "x-tenant");
  EXPECT_EQ(parse_hash_key("$cookie_sid", &key), "");
  EXPECT_EQ(key.source, HashKey::Source::kCookie);
  EXPECT_EQ(key.name, "sid");
  HashKey unchanged{HashKey::Source::kUri, ""};
  EXPECT_EQ(parse_hash_key("$cookie_a;b", &unchanged),
            "invalid cookie name in hash_key \"$cookie_a;b\"");
  EXPECT_EQ(parse_hash_key("$args", &unchanged), "unknown hash_key \"$args\"");
  EXPECT_EQ(unchanged.source, HashKey::Source::kUri);
}

}  // namespace
}  // namespace peregrine::upstream
