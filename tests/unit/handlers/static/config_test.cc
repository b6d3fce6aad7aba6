// The static options of a route (handlers/static/config.cc): inherited from the site,
// overridden by the route, alias, and their errors at their line:col.
#include "config/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handlers/application/options.h"
#include "unit/config/config_test_support.h"

namespace peregrine::static_files {
namespace {

using namespace config;
using test_support::TempDir;
namespace fs = std::filesystem;

class StaticConfigTest : public config::test_support::ConfigTest {};

TEST_F(StaticConfigTest, RouteOverridesWinOverSiteDefaults) {
  auto config = load_ok(R"([[site]]
root = "www"
dotfiles = true
etag = false
cache_valid = "5s"

[[site.route]]
prefix = "/static/"
root = "www/static"
etag = true
precompressed = false
symlinks_outside_root = true
cache_valid = 60
index = []
)");
  ASSERT_NE(config, nullptr);
  const StaticOptions& route = config->sites[0].routes[0].static_files;
  EXPECT_EQ(route.root, www() + "/static");
  EXPECT_FALSE(route.alias);
  EXPECT_TRUE(route.dotfiles);        // inherited
  EXPECT_TRUE(route.etag);            // overridden
  EXPECT_FALSE(route.precompressed);  // overridden
  EXPECT_TRUE(route.symlinks_outside_root);
  EXPECT_EQ(route.cache_valid, Millis(60'000));
  EXPECT_TRUE(route.index.empty());
  EXPECT_FALSE(config->sites[0].static_files.etag);
  EXPECT_EQ(config->sites[0].static_files.cache_valid, Millis(5000));
}

TEST_F(StaticConfigTest, RegexStaticRoutes) {
  auto config = load_ok(R"([[site]]
root = "www"

[[site.route]]
regex = '\.(png|jpe?g|gif)$'
cache_valid = "10m"
methods = ["get", "HEAD", "GET"]

[[site.route]]
extension = ".PHP"
handler = "php"
)");
  ASSERT_NE(config, nullptr);
  const auto& routes = config->sites[0].routes;
  EXPECT_EQ(routes[0].match, MatchKind::kRegex);
  EXPECT_EQ(routes[0].pattern, "\\.(png|jpe?g|gif)$");
  EXPECT_TRUE(routes[0].regex->match("/img/logo.jpeg"));
  EXPECT_FALSE(routes[0].regex->match("/img/logo.svg"));
  EXPECT_EQ(routes[0].type->name, "static");
  EXPECT_EQ(routes[0].static_files.cache_valid, Millis(600'000));
  EXPECT_EQ(routes[0].methods, (std::vector<std::string>{"GET", "HEAD"}));
  EXPECT_EQ(routes[1].match, MatchKind::kExtension);
  EXPECT_EQ(routes[1].pattern, "php");
  EXPECT_EQ(routes[1].type->name, "application");
  EXPECT_EQ(routes[1].options_as<application::ApplicationOptions>()->name, "php");
  EXPECT_EQ(routes[1].static_files.root, www());  // application handlers see the root too
}

TEST_F(StaticConfigTest, AliasRoute) {
  auto config = load_ok(R"([[site]]
root = "www"
[[site.route]]
prefix = "/assets/"
alias = "www/static/"
)");
  ASSERT_NE(config, nullptr);
  const Route& route = config->sites[0].routes[0];
  EXPECT_TRUE(route.static_files.alias);
  EXPECT_EQ(route.static_files.root, www() + "/static");
}

TEST_F(StaticConfigTest, RootIsCanonical) {
  fs::create_directory_symlink(www(), dir_.path("link"));
  auto config = load_ok(R"([[site]]
root = "./link/../link/"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->sites[0].static_files.root, www());
}

TEST_F(StaticConfigTest, RootMustExist) {
  EXPECT_EQ(error(R"([[site]]
root = "missing"
)"),
            "2:8: root \"missing\" does not exist (hint: relative paths are resolved against the "
            "config file's directory, " +
                dir_.path() + ")");
}

TEST_F(StaticConfigTest, RootMustBeADirectory) {
  EXPECT_EQ(error("[[site]]\nroot = \"" + dir_.path("file.txt") + "\"\n"),
            "2:8: root \"" + dir_.path("file.txt") + "\" is not a directory");
}

TEST_F(StaticConfigTest, AliasOnANonPrefixRoute) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
exact = "/logo.png"
alias = "www/static"
)"),
            "5:9: 'alias' needs a prefix route (hint: alias replaces the matched prefix; write "
            "prefix = \"/dir/\" instead of 'exact')");
}

TEST_F(StaticConfigTest, AliasMustExist) {
  EXPECT_EQ(error(R"([[site]]
root = "www"
[[site.route]]
prefix = "/x/"
alias = "/nonexistent/peregrine"
)"),
            "5:9: alias \"/nonexistent/peregrine\" does not exist");
}

TEST_F(StaticConfigTest, StaticRouteWithoutRoot) {
  EXPECT_EQ(error(R"([[site]]
[[site.route]]
prefix = "/"
)"),
            "2:1: static route has no root (hint: set root on the route or on its [[site]], or "
            "give the route a 'return')");
}

}  // namespace
}  // namespace peregrine::static_files
