// The keys of a return route (handlers/return/config.cc): status, location with its
// substitutions, body and content type, each error at its line:col.
#include "config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handlers/return/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::return_route {
namespace {

using namespace config;

class ReturnConfigTest : public config::test_support::ConfigTest {};

TEST_F(ReturnConfigTest, HelloWorldReturnRoute) {
  auto config = load_ok(R"(listen = "127.0.0.1:0"
[[site]]
[[site.route]]
prefix = "/"
return = 200
body = "hello world"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_EQ(route.type->name, "return");
  EXPECT_EQ(route.options_as<return_route::ReturnOptions>()->status, 200);
  EXPECT_EQ(route.options_as<return_route::ReturnOptions>()->body, "hello world");
  EXPECT_EQ(route.options_as<return_route::ReturnOptions>()->content_type, "text/plain");
  EXPECT_TRUE(route.options_as<return_route::ReturnOptions>()->location.empty());
}

TEST_F(ReturnConfigTest, RedirectsWithCaptures) {
  auto config = load_ok(R"([[site]]
hosts = ["old.example.com"]

[[site.route]]
exact = "/"
return = 301
location = "/index.html"

[[site.route]]
regex = '^/blog/(\d+)/([a-z-]+)$'
return = 308
location = "https://new.example.com/posts/$1/$2"

[[site.route]]
prefix = "/"
return = 302
location = "https://example.com$uri"
)");
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].match, MatchKind::kExact);
  EXPECT_EQ(routes[0].type->name, "return");
  EXPECT_EQ(routes[0].options_as<return_route::ReturnOptions>()->status, 301);
  EXPECT_EQ(routes[0].options_as<return_route::ReturnOptions>()->location, "/index.html");

  EXPECT_EQ(routes[1].match, MatchKind::kRegex);
  ASSERT_NE(routes[1].regex, nullptr);
  Regex::Captures captures;
  ASSERT_TRUE(routes[1].regex->match("/blog/42/hello-world", &captures));
  EXPECT_EQ(captures.group[1], "42");
  EXPECT_EQ(captures.group[2], "hello-world");
  EXPECT_EQ(routes[1].options_as<return_route::ReturnOptions>()->location,
            "https://new.example.com/posts/$1/$2");
  EXPECT_EQ(routes[2].options_as<return_route::ReturnOptions>()->status, 302);
}

TEST_F(ReturnConfigTest, LocationOnANonRedirectStatus) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 200
location = "/x"
)"),
            "5:12: 'location' is only for redirects (301, 302, 303, 307, 308), not 200 (hint: "
            "remove it, or return a redirect status)");
}

TEST_F(ReturnConfigTest, RedirectWithoutLocation) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 301
)"),
            "2:1: 'return = 301' needs a 'location' (hint: e.g. location = \"/new/path\" or "
            "\"https://example.com$uri\")");
}

TEST_F(ReturnConfigTest, CaptureInLocationNeedsARegexRoute) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/old/"
return = 301
location = "/new/$1"
)"),
            "5:12: 'location' uses $1 but the route is not a regex route (hint: captures come "
            "from regex = \"...\" groups; $uri is the request path)");
}

TEST_F(ReturnConfigTest, UnknownVariableInLocation) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 302
location = "https://$server_name$uri"
)"),
            "5:12: unknown variable in 'location' (\"https://$server_name$uri\") (hint: location "
            "may use $1..$9 (regex captures, $0 the whole match), $uri (the request path), "
            "$request_uri (the path and query as sent) and $host)");
}

TEST_F(ReturnConfigTest, HostAndRequestUriAreKnown) {
  auto config = load_ok(R"([[site]]
[[site.route]]
prefix = "/"
return = 301
location = "https://$host$request_uri"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].routes[0].options_as<return_route::ReturnOptions>()->location,
            "https://$host$request_uri");
}

TEST_F(ReturnConfigTest, ReturnStatusOutOfRange) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 600
)"),
            "4:10: 'site.route.return' is 600; it must be between 100 and 599");
}

TEST_F(ReturnConfigTest, BodyOnNoContentStatus) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 204
body = "x"
)"),
            "5:8: status 204 cannot have a body");
}

TEST_F(ReturnConfigTest, HandlerAndReturnAreExclusive) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
handler = "api"
return = 200
)"),
            "4:11: 'handler' cannot be combined with 'return' (hint: 'return' already selects the "
            "return handler; remove 'handler')");
}

TEST_F(ReturnConfigTest, StaticOptionsOnAReturnRoute) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
return = 200
directory_listing = true
)"),
            "5:21: 'directory_listing' does not apply to a 'return' route (hint: static options "
            "go on static (or application) routes)");
}

TEST_F(ReturnConfigTest, ReturnOptionsWithoutReturn) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/"
body = "hi"
)"),
            "5:8: 'body' needs a 'return' route (hint: add return = STATUS, e.g. return = 301 with "
            "location)");
}

}  // namespace
}  // namespace peregrine::return_route
