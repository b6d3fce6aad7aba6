// https back ends in the configuration (upstream/config.cc, handlers/proxy/config.cc): implicit
// groups of https:// routes and their route keys, [[upstream]] tls = true with its keys, the
// names verified by default, and each error at its line:col.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "handlers/proxy/options.h"
#include "unit/config/config_test_support.h"
#include "unit/tls/client_test_pki.h"

namespace peregrine::upstream {
namespace {

using namespace config;

class UpstreamTlsConfigTest : public config::test_support::ConfigTest {
 protected:
  void SetUp() override {
    ConfigTest::SetUp();
    ASSERT_TRUE(pki_.write_ca(dir_.path("ca.pem")));
    ASSERT_TRUE(pki_.write_server_cert(dir_.path("client.pem")));
    ASSERT_TRUE(pki_.write_server_key(dir_.path("client.key")));
  }
  tls::test::TestPki pki_;
};

TEST_F(UpstreamTlsConfigTest, HttpsRouteMakesAnImplicitTlsGroupVerifyingItsHost) {
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "https://127.0.0.1:8443"
[[site.route]]
prefix = "/b/"
proxy = "https://localhost"
[[site.route]]
prefix = "/c/"
proxy = "http://127.0.0.1:8443"
)");
  ASSERT_NE(config, nullptr);
  const UpstreamGroup* a = group(*config, "https://127.0.0.1:8443");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->tls.enabled);
  EXPECT_TRUE(a->tls.verify);
  EXPECT_EQ(a->tls.ca_file, "");  // the system store
  EXPECT_EQ(a->tls.server_name, "127.0.0.1");
  EXPECT_EQ(config->sites[0].routes[0].options_as<proxy::ProxyOptions>()->upstream,
            "https://127.0.0.1:8443");
  EXPECT_EQ(config->sites[0].routes[0].options_as<proxy::ProxyOptions>()->scheme, "https");
  const UpstreamGroup* b = group(*config, "https://127.0.0.1:443");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->servers[0].address, "localhost:443");
  EXPECT_EQ(b->tls.server_name, "localhost");
  // The same port over plain HTTP is another group (another pool).
  const UpstreamGroup* c = group(*config, "127.0.0.1:8443");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->tls.enabled);
}

TEST_F(UpstreamTlsConfigTest, RouteKeysConfigureTheImplicitGroup) {
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "https://[::1]:8443"
tls_ca = "ca.pem"
tls_server_name = "api.internal"
tls_certificate = "client.pem"
tls_key = "client.key"
[[site.route]]
prefix = "/b/"
proxy = "https://127.0.0.1:9443"
tls_verify = false
)");
  ASSERT_NE(config, nullptr);
  const UpstreamGroup* a = group(*config, "https://[::1]:8443");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->tls.ca_file, dir_.path("ca.pem"));  // relative to the config file
  EXPECT_EQ(a->tls.server_name, "api.internal");
  EXPECT_EQ(a->tls.certificate, dir_.path("client.pem"));
  EXPECT_EQ(a->tls.key, dir_.path("client.key"));
  const UpstreamGroup* b = group(*config, "https://127.0.0.1:9443");
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->tls.verify);
}

TEST_F(UpstreamTlsConfigTest, DeclaredGroupWithTlsVerifiesItsNameByDefault) {
  auto config = load_ok(R"([[upstream]]
name = "api.internal"
servers = ["127.0.0.1:8443", "127.0.0.2:8443"]
tls = true
tls_ca = "ca.pem"
[[upstream]]
name = "plain"
servers = ["127.0.0.1:8080"]
[[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "https://api.internal/v1/"
[[site.route]]
prefix = "/b/"
proxy = "http://plain"
)");
  ASSERT_NE(config, nullptr);
  const UpstreamGroup* g = group(*config, "api.internal");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->tls.enabled);
  EXPECT_EQ(g->tls.server_name, "api.internal");  // as nginx's proxy_ssl_name: $proxy_host
  EXPECT_EQ(g->tls.ca_file, dir_.path("ca.pem"));
  EXPECT_FALSE(group(*config, "plain")->tls.enabled);
}

TEST_F(UpstreamTlsConfigTest, GroupErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "a"
servers = ["127.0.0.1:8443"]
tls_ca = "ca.pem"
[[upstream]]
name = "b"
servers = ["unix:/run/b.sock"]
tls = true
[[upstream]]
name = "c"
servers = ["127.0.0.1:8443"]
tls = true
tls_ca = "missing.pem"
tls_certificate = "client.pem"
[[upstream]]
name = "d"
servers = ["127.0.0.1:8443"]
tls = true
tls_server_name = "d.internal:8443"
tls_verify = false
tls_ca = "ca.pem"
[[site]]
root = "www"
)"),
            (std::vector<std::string>{
                "4:10: 'tls_ca' needs tls = true (hint: add tls = true to the [[upstream]] (its "
                "servers then speak https), or remove 'tls_ca')",
                "7:12: upstream 'b' has tls = true and a unix socket (hint: TLS is for back ends "
                "reached over TCP; speak plain HTTP to 'unix:/run/b.sock' in a group without "
                "tls)",
                "14:19: 'tls_certificate' needs a 'tls_key' (hint: the client certificate's "
                "private key, e.g. tls_key = \"/etc/peregrine/client.key\")",
                "19:19: invalid tls_server_name \"d.internal:8443\" (hint: the name the back "
                "end's certificate shows, without a port: \"app.internal\" or an IP address)",
                "21:10: 'tls_ca' is ignored with tls_verify = false (hint: remove one of them: "
                "verification needs the CA, the CA needs verification)",
            }));
}

TEST_F(UpstreamTlsConfigTest, UnreadableOrBrokenFilesAreReportedAtTheirKey) {
  dir_.write("junk.pem", "not PEM\n");
  std::vector<std::string> found = errors(R"([[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "https://127.0.0.1:8443"
tls_ca = "missing.pem"
[[site.route]]
prefix = "/b/"
proxy = "https://127.0.0.1:8444"
tls_ca = "junk.pem"
[[site.route]]
prefix = "/c/"
proxy = "https://127.0.0.1:8445"
tls_certificate = "client.pem"
tls_key = "ca.pem"
)");
  ASSERT_EQ(found.size(), 3u) << ::testing::PrintToString(found);
  EXPECT_EQ(found[0], "6:10: cannot read the CA file '" + dir_.path("missing.pem") +
                          "': No such file or directory (hint: a PEM file readable by the "
                          "server's user)");
  EXPECT_EQ(
      found[1].rfind(
          "10:10: the CA file '" + dir_.path("junk.pem") + "' holds no usable PEM certificate", 0),
      0u)
      << found[1];
  EXPECT_EQ(found[2].rfind(
                "15:11: the client key '" + dir_.path("ca.pem") + "' holds no usable PEM key", 0),
            0u)
      << found[2];
}

TEST_F(UpstreamTlsConfigTest, RouteErrors) {
  EXPECT_EQ(errors(R"([[upstream]]
name = "app"
servers = ["127.0.0.1:8080"]
[[upstream]]
name = "secure"
servers = ["127.0.0.1:8443"]
tls = true
[[site]]
root = "www"
[[site.route]]
prefix = "/a/"
proxy = "https://app"
[[site.route]]
prefix = "/b/"
proxy = "http://secure"
[[site.route]]
prefix = "/c/"
proxy = "https://secure"
tls_verify = false
[[site.route]]
prefix = "/d/"
proxy = "http://127.0.0.1:8080"
tls_ca = "ca.pem"
[[site.route]]
prefix = "/e/"
proxy = "https://unix:/run/e.sock:"
[[site.route]]
prefix = "/f/"
fastcgi = "secure"
[[site.route]]
prefix = "/g/"
proxy = "https://127.0.0.1:9443"
[[site.route]]
prefix = "/h/"
proxy = "https://127.0.0.1:9443"
tls_ca = "ca.pem"
)"),
            (std::vector<std::string>{
                "12:9: proxy URL 'https://app' names upstream 'app', which speaks plain HTTP "
                "(hint: add tls = true to the [[upstream]] at line 1, or write \"http://app\")",
                "15:9: upstream 'secure' has tls = true (hint: write \"https://secure\": the "
                "scheme says how the back end is reached)",
                "19:14: TLS settings for upstream 'secure' belong to its [[upstream]] (hint: move "
                "the tls_* keys to the [[upstream]] named 'secure')",
                "23:10: TLS settings on a route that proxies to http:// (hint: write proxy = "
                "\"https://...\" to reach the back end over TLS)",
                "26:9: proxy URL 'https://unix:/run/e.sock:' asks for TLS over a unix socket "
                "(hint: a unix socket is local: write \"http://unix:...\"; https:// is for back "
                "ends reached over TCP)",
                "29:11: upstream 'secure' has tls = true; FastCGI speaks plain (hint: declare a "
                "group without tls for the fastcgi route)",
                "29:11: upstream 'secure' is used by both fastcgi and proxy routes (hint: first "
                "used by a proxy route at line 15; a group speaks one protocol, so declare one "
                "group for each)",
                "35:9: another route reaches '127.0.0.1:9443' over https with other tls_* "
                "settings (hint: declare one [[upstream]] with tls = true and its tls_* keys, and "
                "name it in both routes)",
            }));
}

}  // namespace
}  // namespace peregrine::upstream
