// The keys of an ajp route (handlers/ajp/config.cc), the per-server route key, and the sticky
// session route a request names (handlers/ajp/ajp_handler.h).
#include "config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handlers/ajp/ajp_handler.h"
#include "handlers/ajp/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::ajp {
namespace {

using namespace config;

class AjpConfigTest : public config::test_support::ConfigTest {};

TEST_F(AjpConfigTest, Defaults) {
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/app/"
ajp = "ajp://127.0.0.1:8009"
ajp_secret = "s3cret"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_EQ(route.type->name, "ajp");
  EXPECT_EQ(route.options_as<ajp::AjpOptions>()->upstream, "127.0.0.1:8009");
  EXPECT_EQ(route.options_as<ajp::AjpOptions>()->secret, "s3cret");
  EXPECT_EQ(route.options_as<ajp::AjpOptions>()->packet_size, 8192u);
  EXPECT_EQ(route.options_as<ajp::AjpOptions>()->buffer_bytes, 64u * 1024);
  EXPECT_EQ(route.options_as<ajp::AjpOptions>()->cping_after.count(), 5000);
  ASSERT_NE(group(*config, "127.0.0.1:8009"), nullptr);
}

TEST_F(AjpConfigTest, EveryKeyAndAGroupWithRoutes) {
  dir_.write("ajp.secret", "from-a-file\n");
  auto config = load_ok(R"([[upstream]]
name = "tomcats"
[[upstream.server]]
address = "127.0.0.1:8009"
route = "node1"
[[upstream.server]]
address = "127.0.0.1:8010"
route = "node2"
[[site]]
root = "www"
[[site.route]]
prefix = "/"
ajp = "tomcats"
ajp_secret_file = "ajp.secret"
ajp_packet_size = "64k"
ajp_buffer = "1m"
ajp_cping_after = "10s"
)");
  ASSERT_NE(config, nullptr);
  const ajp::AjpOptions& a = *config->sites[0].routes[0].options_as<ajp::AjpOptions>();
  EXPECT_EQ(a.upstream, "tomcats");
  EXPECT_EQ(a.secret, "from-a-file");
  EXPECT_EQ(a.packet_size, 65536u);
  EXPECT_EQ(a.buffer_bytes, 1024u * 1024);
  EXPECT_EQ(a.cping_after.count(), 10000);
  const UpstreamGroup* g = group(*config, "tomcats");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->servers[0].route, "node1");
  EXPECT_EQ(g->servers[1].route, "node2");
}

TEST_F(AjpConfigTest, SecretRequiredByDefault) {
  std::string e = error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
ajp = "ajp://127.0.0.1:8009"
)");
  EXPECT_NE(e.find("5:7: ajp route has no secret"), std::string::npos) << e;
  EXPECT_NE(e.find("ajp_secret_required = false"), std::string::npos) << e;
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
ajp = "ajp://127.0.0.1:8009"
ajp_secret_required = false
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].routes[0].options_as<ajp::AjpOptions>()->secret, "");
}

TEST_F(AjpConfigTest, Errors) {
  auto one = [&](std::string_view keys) {
    return error(std::string("[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\n") +
                 std::string(keys));
  };
  EXPECT_NE(one("ajp = \"http://127.0.0.1:8009\"\najp_secret = \"s\"\n").find("ajp://HOST:PORT"),
            std::string::npos);
  EXPECT_NE(one("ajp = \"nogroup\"\najp_secret = \"s\"\n").find("no upstream group named"),
            std::string::npos);
  EXPECT_NE(one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret = \"s\"\najp_packet_size = 4096\n")
                .find("ajp_packet_size"),
            std::string::npos);
  EXPECT_NE(one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret = \"s\"\najp_packet_size = \"128k\"\n")
                .find("ajp_packet_size"),
            std::string::npos);
  EXPECT_NE(
      one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret = \"a\\nb\"\n").find("invalid ajp_secret"),
      std::string::npos);
  EXPECT_NE(one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret_file = \"missing.secret\"\n")
                .find("cannot read ajp_secret_file"),
            std::string::npos);
  EXPECT_NE(one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret = \"s\"\najp_secret_file = \"x\"\n")
                .find("both ajp_secret and ajp_secret_file"),
            std::string::npos);
  EXPECT_NE(one("ajp = \"ajp://127.0.0.1:8009\"\najp_secret = \"s\"\nindex = [\"a\"]\n")
                .find("Tomcat serves"),
            std::string::npos);
}

TEST_F(AjpConfigTest, GroupSharedWithProxyOrInvalidRoute) {
  std::string e = error(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8009"]
[[site]]
root = "www"
[[site.route]]
prefix = "/a/"
ajp = "app"
ajp_secret = "s"
[[site.route]]
prefix = "/b/"
proxy = "http://app"
)");
  EXPECT_NE(e.find("used by both proxy and ajp routes"), std::string::npos) << e;
  e = error(R"([[upstream]]
name = "app"
[[upstream.server]]
address = "127.0.0.1:8009"
route = "node 1"
[[site]]
root = "www"
)");
  EXPECT_NE(e.find("invalid route"), std::string::npos) << e;
}

Request with(std::string_view raw_path, std::string_view cookie) {
  Request r;
  r.raw_path = raw_path;
  if (!cookie.empty()) {
    r.headers[0] = Header{"Cookie", cookie};
    r.header_count = 1;
  }
  return r;
}

TEST(AjpSessionRoute, CookieAndPathParameter) {
  EXPECT_EQ(session_route(with("/x", "JSESSIONID=ABC.node1")), "node1");
  EXPECT_EQ(session_route(with("/x", "a=1; JSESSIONID=ABC.node2; b=2")), "node2");
  EXPECT_EQ(session_route(with("/x;jsessionid=ABC.node3", "")), "node3");
  EXPECT_EQ(session_route(with("/x;jsessionid=ABC.node3/y?q", "")), "node3");
  EXPECT_EQ(session_route(with("/x", "JSESSIONID=ABC")), "");
  EXPECT_EQ(session_route(with("/x", "XJSESSIONID=ABC.node1")), "");
  EXPECT_EQ(session_route(with("/x", "")), "");
  EXPECT_EQ(session_route(with("/x;jsessionid=", "")), "");
}

}  // namespace
}  // namespace peregrine::ajp
