#include "access/config.h"

#include <gtest/gtest.h>

#include "access/limit_table.h"
#include "unit/config/config_test_support.h"

namespace peregrine::access {
namespace {

using config::test_support::ConfigTest;

class AccessConfigTest : public ConfigTest {};

TEST_F(AccessConfigTest, LimitsAreDefinedOnceAndReferenced) {
  auto config = load_ok(R"([[limit]]
name = "login"
rate = "5r/s"
burst = 10
mode = "delay"
key = "$http_x_api_key"
size = "64k"
log_interval = "2s"

[[limit]]
name = "perip"
connections = 4

[[site]]
root = "www"
limit = ["perip"]
access = [ { deny = "192.0.2.0/24" }, { allow = "all" } ]

[[site.route]]
exact = "/wp-login.php"
limit = ["login", "perip"]

[[site.route]]
prefix = "/wp-admin/"
access = [ { allow = "10.0.0.0/8" }, { allow = "::1" }, { deny = "all" } ]
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->access.limits.size(), 2u);
  const Limit& login = *config->access.limits[0];
  EXPECT_EQ(login.interval_us, 200'000);
  EXPECT_EQ(login.burst, 10u);
  EXPECT_TRUE(login.delay);
  EXPECT_EQ(login.key, KeyKind::kHeader);
  EXPECT_EQ(login.key_name, "x-api-key");
  EXPECT_EQ(login.status, 429);
  EXPECT_EQ(login.slots, 2048u);
  EXPECT_EQ(login.table->capacity(), 2048u);
  EXPECT_EQ(login.log_interval_ms, 2000);
  const Limit& perip = *config->access.limits[1];
  EXPECT_TRUE(perip.connections_limit);
  EXPECT_EQ(perip.max_connections, 4u);
  EXPECT_EQ(perip.status, 503);

  const auto& site = config->sites[0];
  EXPECT_EQ(site.access.rules.size(), 2u);
  ASSERT_EQ(site.access.limits.size(), 1u);
  const auto& routes = site.routes;
  ASSERT_EQ(routes.size(), 3u);  // and the implicit "/" route
  EXPECT_EQ(routes[0].access.limits.size(), 2u);
  EXPECT_EQ(routes[0].access.rules.size(), 2u) << "rules inherited from the site";
  EXPECT_EQ(routes[1].access.rules.size(), 3u) << "rules replaced";
  EXPECT_EQ(routes[1].access.limits.size(), 1u) << "limits inherited";
  EXPECT_EQ(routes[2].access.rules.size(), 2u);
  EXPECT_EQ(routes[0].access.limits[0].get(), &login) << "one table, shared";
}

TEST_F(AccessConfigTest, ErrorsSayWhereAndHow) {
  auto errors = this->errors(R"([[limit]]
name = "a"
rate = "5/s"

[[limit]]
name = "a"
rate = "1r/s"

[[limit]]
name = "c"
connections = 2
key = "$http_x"
burst = 3

[[limit]]
name = "d"

[[site]]
root = "www"
limit = ["nope"]
access = [ { allow = "10.0.0.1/8" }, { deny = "all", allow = "all" }, "x" ]
)");
  ASSERT_EQ(errors.size(), 9u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0],
            "3:8: invalid rate \"5/s\" (hint: write requests per second or minute, e.g. "
            "\"5r/s\" or \"30r/m\")");
  EXPECT_TRUE(errors[1].starts_with("6:8: limit \"a\" is defined twice (hint: first at line 2"))
      << errors[1];
  EXPECT_TRUE(errors[2].starts_with("12:7: connections are counted by client address only"))
      << errors[2];
  EXPECT_TRUE(errors[3].starts_with("13:9: 'burst' applies to a rate limit")) << errors[3];
  EXPECT_TRUE(errors[4].starts_with("15:1: limit \"d\" has neither")) << errors[4];
  EXPECT_TRUE(
      errors[5].starts_with("20:10: no [[limit]] named \"nope\" (hint: defined limits: "
                            "\"a\", \"c\")"))
      << errors[5];
  EXPECT_TRUE(errors[6].starts_with("21:22: invalid network \"10.0.0.1/8\"")) << errors[6];
  EXPECT_TRUE(errors[7].starts_with("21:38: an access rule has exactly one of 'allow' and 'deny'"))
      << errors[7];
  EXPECT_TRUE(errors[8].starts_with("21:71: 'site.access' must be a table such as")) << errors[8];
}

}  // namespace
}  // namespace peregrine::access
