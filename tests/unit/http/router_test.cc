#include "http/router.h"

#include <gtest/gtest.h>

namespace peregrine::http {
namespace {

config::Route make_route(config::MatchKind kind, std::string pattern) {
  config::Route route;
  route.match = kind;
  route.pattern = std::move(pattern);
  if (kind == config::MatchKind::kRegex) {
    std::string error;
    size_t offset = 0;
    route.regex = Regex::compile(route.pattern, &error, &offset);
  }
  return route;
}

TEST(Router, HostWithoutPort) {
  EXPECT_EQ(host_without_port("example.com:8080"), "example.com");
  EXPECT_EQ(host_without_port("example.com"), "example.com");
  EXPECT_EQ(host_without_port("[::1]:80"), "[::1]");
  EXPECT_EQ(host_without_port("[::1]"), "[::1]");
  EXPECT_EQ(host_without_port(""), "");
}

TEST(Router, HostMatching) {
  EXPECT_TRUE(host_matches("example.com", "EXAMPLE.com"));
  EXPECT_TRUE(host_matches("example.com", "example.com."));
  EXPECT_FALSE(host_matches("example.com", "www.example.com"));
  EXPECT_TRUE(host_matches("*.example.com", "www.example.com"));
  EXPECT_TRUE(host_matches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "example.com"));
  EXPECT_FALSE(host_matches("*.example.com", "badexample.com"));
}

TEST(Router, SelectSitePrefersExactOverWildcardAndFallsBackToDefault) {
  config::Config cfg;
  cfg.sites.resize(3);
  cfg.sites[0].hosts = {"*.example.com"};
  cfg.sites[1].hosts = {"www.example.com"};
  cfg.sites[2].hosts = {"other.org"};
  cfg.default_site = 2;
  EXPECT_EQ(select_site(cfg, "www.example.com:8080"), 1u);
  EXPECT_EQ(select_site(cfg, "api.example.com"), 0u);
  EXPECT_EQ(select_site(cfg, "OTHER.ORG"), 2u);
  EXPECT_EQ(select_site(cfg, "unknown.net"), 2u);
  EXPECT_EQ(select_site(cfg, ""), 2u);
}

TEST(Router, RouteKinds) {
  EXPECT_TRUE(route_matches(make_route(config::MatchKind::kExact, "/"), "/"));
  EXPECT_FALSE(route_matches(make_route(config::MatchKind::kExact, "/"), "/index.html"));
  EXPECT_TRUE(route_matches(make_route(config::MatchKind::kPrefix, "/static/"), "/static/a.css"));
  EXPECT_FALSE(route_matches(make_route(config::MatchKind::kPrefix, "/static/"), "/static"));
  EXPECT_TRUE(route_matches(make_route(config::MatchKind::kExtension, "php"), "/a/index.php"));
  EXPECT_TRUE(route_matches(make_route(config::MatchKind::kExtension, "php"), "/a/INDEX.PHP"));
  EXPECT_FALSE(route_matches(make_route(config::MatchKind::kExtension, "php"), "/a/index.phps"));
  EXPECT_FALSE(route_matches(make_route(config::MatchKind::kExtension, "php"), "/php/"));
  EXPECT_TRUE(route_matches(make_route(config::MatchKind::kRegex, "^/old/(.*)$"), "/old/x"));
  EXPECT_FALSE(route_matches(make_route(config::MatchKind::kRegex, "^/old/(.*)$"), "/new/x"));
}

TEST(Router, MethodAllowed) {
  config::Route any = make_route(config::MatchKind::kPrefix, "/");
  EXPECT_TRUE(method_allowed(any, "GET"));
  EXPECT_TRUE(method_allowed(any, "PROPFIND"));
  config::Route listed = any;
  listed.methods = {"GET", "POST"};
  EXPECT_TRUE(method_allowed(listed, "GET"));
  EXPECT_TRUE(method_allowed(listed, "POST"));
  EXPECT_FALSE(method_allowed(listed, "HEAD"));
  EXPECT_FALSE(method_allowed(listed, "get"));  // methods are case-sensitive (RFC 9110 9.1)
  EXPECT_FALSE(method_allowed(listed, "GETX"));
}

}  // namespace
}  // namespace peregrine::http
