#include "compress/config.h"

#include <gtest/gtest.h>

#include "config/cli.h"
#include "unit/config/config_test_support.h"

namespace peregrine::compress {
namespace {

using config::test_support::ConfigTest;

class CompressConfigTest : public ConfigTest {};

TEST_F(CompressConfigTest, OffByDefault) {
  auto config = load_ok("[[site]]\nroot = \"www\"\n");
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->sites[0].compress.enabled);
  EXPECT_FALSE(config->sites[0].routes.back().compress.enabled);
}

TEST_F(CompressConfigTest, SiteBooleanIsInheritedAndRoutesOverride) {
  auto config = load_ok(R"([[site]]
root = "www"
compress = true

[[site.route]]
prefix = "/images/"
compress = false

[[site.route]]
prefix = "/api/"
compress = { gzip_level = 1, order = ["gzip", "br"], types = ["application/json"] }

[[site.route]]
prefix = "/"
)");
  ASSERT_NE(config, nullptr);
  const auto& site = config->sites[0];
  EXPECT_TRUE(site.compress.enabled);
  EXPECT_FALSE(site.routes[0].compress.enabled);
  const Options& api = site.routes[1].compress;
  EXPECT_TRUE(api.enabled);
  EXPECT_EQ(api.gzip_level, 1);
  EXPECT_EQ(api.brotli_level, 4);
  EXPECT_EQ(api.order, (std::vector<Coding>{Coding::kGzip, Coding::kBrotli}));
  EXPECT_EQ(api.types, (std::vector<std::string>{"application/json"}));
  EXPECT_TRUE(site.routes[2].compress.enabled);
  EXPECT_EQ(site.routes[2].compress.min_length, 256u);
}

TEST_F(CompressConfigTest, SiteTableSetsLevelsAndMinimum) {
  auto config = load_ok(R"([[site]]
root = "www"
[site.compress]
min_length = "1k"
brotli_level = 5
zstd_level = 7
)");
  ASSERT_NE(config, nullptr);
  const Options& o = config->sites[0].compress;
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.min_length, 1024u);
  EXPECT_EQ(o.brotli_level, 5);
  EXPECT_EQ(o.zstd_level, 7);
  EXPECT_EQ(o.gzip_level, 6);
}

TEST_F(CompressConfigTest, BadValuesAreErrorsWithPositions) {
  std::vector<std::string> e = errors(R"([[site]]
root = "www"
compress = { gzip_level = 12, order = ["gzip", "deflate", "gzip"], types = ["html"], level = 3 }
)");
  ASSERT_EQ(e.size(), 5u) << ::testing::PrintToString(e);
  std::string all = ::testing::PrintToString(e);
  EXPECT_NE(all.find("gzip_level"), std::string::npos);
  EXPECT_NE(all.find("unknown coding \\\"deflate\\\""), std::string::npos);
  EXPECT_NE(all.find("listed twice"), std::string::npos);
  EXPECT_NE(all.find("invalid media type \\\"html\\\""), std::string::npos);
  EXPECT_NE(all.find("level"), std::string::npos);

  e = errors("[[site]]\nroot = \"www\"\ncompress = \"yes\"\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].substr(0, 5), "3:12:") << e[0];
}

TEST_F(CompressConfigTest, QuickModeFlagTurnsItOn) {
  config::CommandLine cli;
  cli.root = dir_.path("www");
  cli.compress = true;
  config::LoadResult result = config::build_config(cli);
  ASSERT_NE(result.config, nullptr);
  EXPECT_TRUE(result.config->sites[0].compress.enabled);
  EXPECT_TRUE(result.config->sites[0].routes[0].compress.enabled);

  std::vector<std::string> args = {"peregrine", "--compress", "--root", dir_.path("www")};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  auto parse = config::parse_command_line(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(parse.error.empty()) << parse.error;
  EXPECT_TRUE(parse.cli.compress);
}

}  // namespace
}  // namespace peregrine::compress
