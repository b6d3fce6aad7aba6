#include "admin/ui.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace peregrine::admin {
namespace {

std::string read_source(std::string_view name) {
  std::ifstream in(std::string(PEREGRINE_SOURCE_DIR) + "/src/admin/ui/" + std::string(name),
                   std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(AdminUi, PageAndItsFilesOnly) {
  ASSERT_NE(find_ui_asset("/"), nullptr);
  EXPECT_EQ(find_ui_asset("/")->path, "/index.html");
  ASSERT_NE(find_ui_asset("/ui.js"), nullptr);
  EXPECT_EQ(find_ui_asset("/ui.js")->content_type, "text/javascript; charset=utf-8");
  ASSERT_NE(find_ui_asset("/ui.css"), nullptr);
  EXPECT_EQ(find_ui_asset("/ui.css")->content_type, "text/css; charset=utf-8");
  // Only "/" names the page, and only /ui.* files are assets: nothing else skips the credentials.
  EXPECT_EQ(find_ui_asset("/index.html"), nullptr);
  EXPECT_EQ(find_ui_asset("/ui.missing"), nullptr);
  EXPECT_EQ(find_ui_asset("/ui."), nullptr);
  EXPECT_EQ(find_ui_asset("/api/stats"), nullptr);
  EXPECT_EQ(find_ui_asset("/metrics"), nullptr);
  EXPECT_EQ(find_ui_asset(""), nullptr);
}

TEST(AdminUi, EmbeddedBytesAreTheSourceFiles) {
  ASSERT_EQ(kUiAssetCount, 3u);
  for (size_t i = 0; i < kUiAssetCount; ++i) {
    const UiAsset& a = kUiAssets[i];
    SCOPED_TRACE(std::string(a.path));
    EXPECT_EQ(a.body, read_source(a.path.substr(1)));
    ASSERT_EQ(a.etag.size(), 22u);  // a quoted 20-digit prefix of the SHA-256
    EXPECT_EQ(a.etag.front(), '"');
    EXPECT_EQ(a.etag.back(), '"');
    for (size_t j = 0; j < i; ++j) EXPECT_NE(a.etag, kUiAssets[j].etag);
  }
}

TEST(AdminUi, PolicyAllowsNoInlineCode) {
  EXPECT_EQ(kUiContentSecurityPolicy.find("unsafe"), std::string_view::npos);
  EXPECT_NE(kUiContentSecurityPolicy.find("script-src 'self'"), std::string_view::npos);
  // The page keeps to it: no inline script or style, no style attribute, no handler attribute.
  const std::string page = read_source("index.html");
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find("<style"), std::string::npos);
  EXPECT_EQ(page.find(" style="), std::string::npos);
  EXPECT_EQ(page.find(" onclick="), std::string::npos);
}

}  // namespace
}  // namespace peregrine::admin
