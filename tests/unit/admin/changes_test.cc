#include "admin/changes.h"

#include <gtest/gtest.h>

namespace peregrine::admin {
namespace {

using Lines = std::vector<std::string>;

const char* kBase = R"(
listen = ["127.0.0.1:8080"]
workers = 2

[[upstream]]
name = "app"
servers = ["127.0.0.1:9000"]

[[site]]
hosts = ["a.test"]
root = "/srv/a"

[[site.route]]
match = "/api/"
proxy = "app"

[[site]]
hosts = ["b.test"]
root = "/srv/b"
)";

TEST(AdminChanges, SameTextNothing) {
  EXPECT_EQ(summarize_changes(kBase, kBase), Lines{});
}

TEST(AdminChanges, RoutesSitesUpstreamsAndSettings) {
  std::string after = kBase;
  after.replace(after.find("workers = 2"), 11, "workers = 4");
  after.replace(after.find("servers = [\"127.0.0.1:9000\"]"), 28, "servers = [\"127.0.0.1:9001\"]");
  after.replace(after.find("[[site]]\nhosts = [\"b.test\"]"), 27,
                "[[site.route]]\nmatch = \"/x\"\nreturn = 204\n\n[[site]]\nhosts = [\"c.test\"]");
  after += "\n[admin]\nlisten = \"127.0.0.1:9090\"\nauth = \"none\"\n";
  EXPECT_EQ(summarize_changes(kBase, after),
            (Lines{"[admin]: added", "workers: changed", "site b.test: removed",
                   "site a.test: 1 route added", "site c.test: added", "upstream app: changed"}));
}

TEST(AdminChanges, RouteChangedAndRemovedAndSiteSettings) {
  std::string after = kBase;
  after.replace(after.find("match = \"/api/\""), 15, "match = \"/v2/\"");
  after.replace(after.find("root = \"/srv/a\""), 15, "root = \"/srv/a2\"");
  EXPECT_EQ(summarize_changes(kBase, after),
            (Lines{"site a.test: settings changed", "site a.test: 1 route changed"}));
  std::string fewer = kBase;
  fewer.erase(fewer.find("[[site.route]]"),
              fewer.find("[[site]]\nhosts = [\"b.test\"]") - fewer.find("[[site.route]]"));
  EXPECT_EQ(summarize_changes(kBase, fewer), (Lines{"site a.test: 1 route removed"}));
}

TEST(AdminChanges, UnparsableIsReplaced) {
  EXPECT_EQ(summarize_changes(kBase, "[[[ not toml"), (Lines{"configuration replaced"}));
}

}  // namespace
}  // namespace peregrine::admin
