#include "admin/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "config/listen_address.h"
#include "unit/config/config_test_support.h"

namespace peregrine::admin {
namespace {

using config::test_support::ConfigTest;

class AdminConfig : public ConfigTest {
 protected:
  std::string site() const { return "[[site]]\nroot = \"" + www() + "\"\n"; }
  void write_token(std::string_view text) {
    dir_.write("admin.token", text);
    chmod(dir_.path("admin.token").c_str(), 0600);
  }
};

TEST_F(AdminConfig, TokenFileAndListener) {
  write_token("  0123456789abcdef0123456789abcdef\n");
  auto config = load_ok(
      "listen = \"127.0.0.1:8080\"\n[admin]\nlisten = \"127.0.0.1:9090\"\n"
      "token_file = \"admin.token\"\nhosts = [\"Admin.Example.com\"]\n" +
      site());
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->admin.enabled);
  EXPECT_EQ(config->admin.auth, Auth::kLogin);
  EXPECT_EQ(config->admin.token, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(config->admin.hosts, std::vector<std::string>{"admin.example.com"});
  ASSERT_EQ(config->listen.size(), 2u);
  EXPECT_FALSE(config->listen[0].admin);
  EXPECT_TRUE(config->listen[1].admin);
  EXPECT_EQ(config->listen[1].text, "127.0.0.1:9090");
}

TEST_F(AdminConfig, OffByDefault) {
  auto config = load_ok(site());
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->admin.enabled);
  for (const config::ListenAddress& l : config->listen) EXPECT_FALSE(l.admin);
}

TEST_F(AdminConfig, NoAuthOnlyOnLoopbackOrUnix) {
  EXPECT_NE(
      load_ok("[admin]\nlisten = \"unix:" + dir_.path("a.sock") + "\"\nauth = \"none\"\n" + site()),
      nullptr);
  EXPECT_NE(load_ok("[admin]\nlisten = \"[::1]:0\"\nauth = \"none\"\n" + site()), nullptr);
  EXPECT_EQ(error("[admin]\nlisten = \"0.0.0.0:9090\"\nauth = \"none\"\n" + site()),
            "3:8: auth = \"none\" is refused on '0.0.0.0:9090': anyone who can reach it could "
            "read the server's figures (hint: listen on 127.0.0.1, [::1] or a unix: socket, or "
            "use token_file)");
}

TEST_F(AdminConfig, TokenRequired) {
  EXPECT_EQ(error("[admin]\nlisten = \"127.0.0.1:9090\"\n" + site()).substr(0, 65),
            "1:1: [admin] needs token_file or password_file (or auth = \"none\")");
  EXPECT_EQ(error("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken_file = \"missing.token\"\n" + site())
                .substr(0, 50),
            "3:14: cannot read admin.token_file 'missing.token'");
  write_token("short\n");
  EXPECT_EQ(error("[admin]\nlisten = \"127.0.0.1:9090\"\ntoken_file = \"admin.token\"\n" + site())
                .substr(0, 73),
            "3:14: admin.token_file 'admin.token' holds a token of 5 characters (hint:");
}

TEST_F(AdminConfig, BadValues) {
  EXPECT_EQ(errors("[admin]\nlisten = \"127.0.0.1:9090\"\nauth = \"password\"\n" + site())
                .back()
                .substr(0, 57),
            "3:8: admin.auth must be \"login\" or \"none\", not \"password\"");
  EXPECT_EQ(error("[admin]\nlisten = \"127.0.0.1:8080\"\nauth = \"none\"\n" + site()).substr(0, 59),
            "2:10: admin.listen '127.0.0.1:8080' is also a site listener");
  EXPECT_NE(error("[admin]\nlisten = \"127.0.0.1:9090\"\nauth = \"none\"\ntoken = \"x\"\n" + site())
                .find("unknown key"),
            std::string::npos);
}

TEST_F(AdminConfig, PasswordFile) {
  // An htpasswd line: the user name is dropped, the hash kept.
  const std::string hash = "$2y$05$abcdefghijklmnopqrstuuQ0vJ9Z5x1m8lq4n3r3VQ2QPv5Xv7qGa";
  dir_.write("admin.passwd", "admin:" + hash + "\n");
  chmod(dir_.path("admin.passwd").c_str(), 0600);
  auto config =
      load_ok("[admin]\nlisten = \"127.0.0.1:9090\"\npassword_file = \"admin.passwd\"\n" + site());
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->admin.password_hash, hash);
  EXPECT_EQ(config->admin.token, "");

  dir_.write("admin.passwd", "secret\n");
  EXPECT_EQ(
      error("[admin]\nlisten = \"127.0.0.1:9090\"\npassword_file = \"admin.passwd\"\n" + site())
          .substr(0, 98),
      "3:17: admin.password_file 'admin.passwd' does not hold a bcrypt, yescrypt or SHA-crypt hash "
      "(hint:");
}

TEST(AdminListener, LocalAddresses) {
  auto addr = [](const char* text) {
    config::ListenAddress a;
    std::string error, hint;
    EXPECT_TRUE(config::parse_listen_address(text, &a, &error, &hint)) << text;
    return a.addr;
  };
  EXPECT_TRUE(is_local_listener(addr("127.0.0.1:1")));
  EXPECT_TRUE(is_local_listener(addr("127.9.9.9:1")));
  EXPECT_TRUE(is_local_listener(addr("[::1]:1")));
  EXPECT_TRUE(is_local_listener(addr("unix:/tmp/x.sock")));
  EXPECT_FALSE(is_local_listener(addr("0.0.0.0:1")));
  EXPECT_FALSE(is_local_listener(addr("[::]:1")));
  EXPECT_FALSE(is_local_listener(addr("10.0.0.1:1")));
}

TEST(AdminToken, RandomHex) {
  const std::string a = random_token(), b = random_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace peregrine::admin
