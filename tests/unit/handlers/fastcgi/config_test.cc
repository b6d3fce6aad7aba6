// The keys of a fastcgi route (handlers/fastcgi/config.cc): defaults, every key, and each
// class of error at its line:col.
#include "config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/upstream_address.h"
#include "handlers/fastcgi/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::fastcgi {
namespace {

using namespace config;

class FastcgiConfigTest : public config::test_support::ConfigTest {};

TEST_F(FastcgiConfigTest, FastcgiRouteDefaults) {
  auto config = load_ok(R"([[site]]
root = "www"
index = ["index.html"]
[[site.route]]
extension = "php"
fastcgi = "unix:/run/php/php8.2-fpm.sock"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_EQ(route.type->name, "fastcgi");
  const fastcgi::FastcgiOptions& f = *route.options_as<fastcgi::FastcgiOptions>();
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
  EXPECT_EQ(config->sites[0].routes[1].type->name, "static");
}

TEST_F(FastcgiConfigTest, FastcgiEveryKeyLoads) {
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
  ASSERT_EQ(route.type->name, "fastcgi");
  const fastcgi::FastcgiOptions& f = *route.options_as<fastcgi::FastcgiOptions>();
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

TEST_F(FastcgiConfigTest, FastcgiErrors) {
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

TEST_F(FastcgiConfigTest, TryFilesErrors) {
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
  EXPECT_EQ(config->sites[0].routes[0].options_as<fastcgi::FastcgiOptions>()->try_files,
            (std::vector<std::string>{"$uri", "=404"}));
}

TEST_F(FastcgiConfigTest, SplitPathMustCompile) {
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

}  // namespace
}  // namespace peregrine::fastcgi
