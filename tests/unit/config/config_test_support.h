// Shared by the configuration tests (tests/unit/config, tests/unit/handlers/*/config_test.cc,
// tests/unit/upstream/config_test.cc): a temporary directory to load documents in, and a fixture
// that loads TOML text and describes its errors as "LINE:COL: message (hint: ...)".
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/cli.h"
#include "config/config.h"
#include "handlers/builtin.h"

namespace peregrine::config {

// The tests read with the handlers the server ships (handlers/builtin.h), unless they say.
inline LoadResult load_string(std::string_view text, const std::string& source) {
  return load_string(text, source, handlers::builtin());
}
inline LoadResult load_file(const std::string& path) {
  return load_file(path, handlers::builtin());
}
inline LoadResult build_config(const CommandLine& cli) {
  return build_config(cli, handlers::builtin());
}

}  // namespace peregrine::config

namespace peregrine::config::test_support {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/peregrine-config-test-XXXXXX";
    const char* made = mkdtemp(pattern);
    path_ = made != nullptr ? std::filesystem::canonical(made).string() : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string path(std::string_view sub) const { return path_ + "/" + std::string(sub); }
  void mkdir(std::string_view sub) const { std::filesystem::create_directories(path(sub)); }
  void write(std::string_view sub, std::string_view text) const {
    std::ofstream(path(sub)) << text;
  }

 private:
  std::string path_;
};

// "LINE:COL: message (hint: ...)": ConfigError::to_string() minus the (temporary) file name.
inline std::string describe(const ConfigError& e) {
  std::string out =
      std::to_string(e.pos.line) + ":" + std::to_string(e.pos.column) + ": " + e.message;
  if (!e.hint.empty()) out += " (hint: " + e.hint + ")";
  return out;
}

// Documents are loaded as DIR/test.toml, where DIR holds www/ (with static/ and errors/), wp/
// and file.txt (not a directory).
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.mkdir("www/static");
    dir_.mkdir("www/errors");
    dir_.mkdir("wp");
    dir_.write("file.txt", "not a directory");
  }

  LoadResult load(std::string_view toml) { return load_string(toml, dir_.path("test.toml")); }

  std::shared_ptr<const Config> load_ok(std::string_view toml) {
    LoadResult result = load(toml);
    for (const ConfigError& e : result.errors) ADD_FAILURE() << e.to_string();
    EXPECT_NE(result.config, nullptr);
    return result.config;
  }

  std::vector<std::string> errors(std::string_view toml) {
    LoadResult result = load(toml);
    EXPECT_EQ(result.config, nullptr);
    std::vector<std::string> out;
    for (const ConfigError& e : result.errors) {
      EXPECT_EQ(e.pos.file, dir_.path("test.toml"));
      out.push_back(describe(e));
    }
    return out;
  }

  // The one error `toml` produces.
  std::string error(std::string_view toml) {
    std::vector<std::string> all = errors(toml);
    EXPECT_EQ(all.size(), 1u) << ::testing::PrintToString(all);
    return all.empty() ? "" : all.front();
  }

  static const UpstreamGroup* group(const Config& config, std::string_view name) {
    for (const UpstreamGroup& g : config.upstreams) {
      if (g.name == name) return &g;
    }
    return nullptr;
  }

  std::string www() const { return dir_.path("www"); }

  TempDir dir_;
};

}  // namespace peregrine::config::test_support
