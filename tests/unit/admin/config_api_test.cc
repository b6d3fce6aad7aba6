#include "admin/config_api.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "unit/config/config_test_support.h"

namespace peregrine::admin {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AdminConfigApi, EtagIsQuotedHashPrefix) {
  const std::string etag = config_etag("workers = 1\n");
  ASSERT_EQ(etag.size(), 34u);
  EXPECT_EQ(etag.front(), '"');
  EXPECT_EQ(etag.back(), '"');
  EXPECT_EQ(etag, config_etag("workers = 1\n"));
  EXPECT_NE(etag, config_etag("workers = 2\n"));
}

TEST(AdminConfigApi, AtomicWriteReplacesAndKeepsTheMode) {
  config::test_support::TempDir dir;
  const std::string path = dir.path("peregrine.toml");
  dir.write("peregrine.toml", "old\n");
  chmod(path.c_str(), 0640);
  std::string error;
  ASSERT_TRUE(write_file_atomically(path, "new text\n", &error)) << error;
  EXPECT_EQ(read(path), "new text\n");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // Nothing left beside it.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST(AdminConfigApi, AtomicWriteFollowsASymlink) {
  config::test_support::TempDir dir;
  dir.mkdir("real");
  dir.write("real/peregrine.toml", "old\n");
  const std::string link = dir.path("peregrine.toml");
  ASSERT_EQ(symlink("real/peregrine.toml", link.c_str()), 0);
  std::string error;
  ASSERT_TRUE(write_file_atomically(link, "new\n", &error)) << error;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(read(dir.path("real/peregrine.toml")), "new\n");
}

TEST(AdminConfigApi, AtomicWriteFailsCleanly) {
  std::string error;
  EXPECT_FALSE(write_file_atomically("/nonexistent-dir/peregrine.toml", "x", &error));
  EXPECT_NE(error.find("/nonexistent-dir"), std::string::npos) << error;
}

TEST(AdminConfigApi, WithoutAProcessEveryConfigEndpointSaysSo) {
  for (const ApiAnswer& answer : {get_config(), validate_config("workers = 1"),
                                  put_config("", "\"x\""), config_history(), reload_config()}) {
    EXPECT_EQ(answer.status, 409);
    EXPECT_NE(answer.body.find("no configuration file"), std::string::npos) << answer.body;
  }
}

}  // namespace
}  // namespace peregrine::admin
