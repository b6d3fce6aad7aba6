// `headers` on a site and a route (config/header_rules.cc via config/load.cc): compiled edits,
// inheritance by routes, and each error at its line:col with its hint.
#include "config/header_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/config/config_test_support.h"

namespace peregrine::config {
namespace {

class ResponseHeadersConfigTest : public test_support::ConfigTest {};

TEST_F(ResponseHeadersConfigTest, NoRulesNoEdits) {
  auto config = load_ok("[[site]]\nroot = \"www\"\n");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].headers.edits, nullptr);
  EXPECT_EQ(config->sites[0].routes[0].headers.edits, nullptr);
}

TEST_F(ResponseHeadersConfigTest, SiteRulesReachEveryRouteAndRouteRulesFollow) {
  auto config = load_ok(R"([[site]]
root = "www"
headers = { set = { "X-Content-Type-Options" = "nosniff" }, always = true }
[[site.route]]
prefix = "/api/"
return = 200
headers = { set = { "Cache-Control" = "no-store" }, remove = ["X-Content-Type-Options"] }
[[site.route]]
prefix = "/plain/"
return = 200
)");
  ASSERT_NE(config, nullptr);
  const Site& site = config->sites[0];
  ASSERT_NE(site.headers.edits, nullptr);
  EXPECT_TRUE(site.headers.rules.always);
  EXPECT_EQ(site.headers.edits->success.lines, "X-Content-Type-Options: nosniff\r\n");
  EXPECT_EQ(site.headers.edits->always.lines, "X-Content-Type-Options: nosniff\r\n");
  const Route& api = site.routes[0];
  ASSERT_NE(api.headers.edits, nullptr);
  EXPECT_EQ(api.headers.edits->success.lines, "Cache-Control: no-store\r\n");
  // The route's rules are not `always`: an error response keeps the site's.
  EXPECT_EQ(api.headers.edits->always.lines, "X-Content-Type-Options: nosniff\r\n");
  EXPECT_EQ(site.routes[1].headers.edits, site.headers.edits) << "inherited, not copied";
  EXPECT_EQ(site.routes[2].headers.edits, site.headers.edits) << "the implicit catch-all too";
}

TEST_F(ResponseHeadersConfigTest, Errors) {
  EXPECT_EQ(errors(R"([[site]]
root = "www"
headers = { remove = ["Content-Length"], set = { "Strict-Transport-Security" = "max-age=1" } }
[[site.route]]
prefix = "/"
headers = { add = { "Transfer-Encoding" = "gzip", "X-A" = "1\n" }, always = "yes", keep = 1 }
)"),
            (std::vector<std::string>{
                "3:23: header 'Content-Length' is managed by the server (hint: framing and "
                "connection headers (Connection, Keep-Alive, Transfer-Encoding, Content-Length, "
                "TE, Trailer, Upgrade) cannot be changed per route)",
                "3:50: Strict-Transport-Security is the site's tls setting, not in "
                "'site.headers.set' (hint: [[site]] tls = { hsts = \"max-age=31536000\" } (sent "
                "only over TLS))",
                "6:21: header 'Transfer-Encoding' is managed by the server (hint: framing and "
                "connection headers (Connection, Keep-Alive, Transfer-Encoding, Content-Length, "
                "TE, Trailer, Upgrade) cannot be changed per route)",
                "6:59: the value of header 'X-A' contains control characters",
                "6:77: 'site.route.headers.always' must be a boolean, not a string (\"yes\")",
                "6:84: unknown key 'keep' in 'site.route.headers' (hint: valid keys: set, add, "
                "remove, always)",
            }));
}

}  // namespace
}  // namespace peregrine::config
