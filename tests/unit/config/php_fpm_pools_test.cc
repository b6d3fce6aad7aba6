#include "config/php_fpm_pools.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "config/upstream_address.h"

namespace peregrine::config {
namespace {

UpstreamServer server(const std::string& address) {
  UpstreamServer s;
  std::string error, hint;
  EXPECT_TRUE(parse_upstream_address(address, &s, &error, &hint)) << error;
  return s;
}

TEST(PhpFpmPools, ReadsPoolsFromDebiansLayoutThroughIncludes) {
  // /etc/php/8.2/fpm/php-fpm.conf as Debian ships it (abridged), and pool.d/*.conf.
  const std::string main = R"([global]
pid = /run/php/php8.2-fpm.pid
error_log = /var/log/php8.2-fpm.log
; include=/etc/php/8.2/fpm/*.conf
include=/etc/php/8.2/fpm/pool.d/*.conf
)";
  std::map<std::string, std::string> files = {
      {"/etc/php/8.2/fpm/pool.d/www.conf", R"([www]
user = www-data
listen = /run/php/php8.2-fpm.sock
listen.owner = www-data
pm = dynamic
pm.max_children = 5 ; the shipped default
pm.start_servers = 2
)"},
      {"/etc/php/8.2/fpm/pool.d/shop.conf", R"(
[shop]
listen = "/run/php/$pool.sock"
pm = static
pm.max_children = 32
# another comment style
[api]
listen = 127.0.0.1:9001
pm.max_children=8
)"},
  };
  std::vector<std::string> asked;
  auto read = [&](const std::string& pattern) {
    asked.push_back(pattern);
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& [path, text] : files)
      if (pattern == "/etc/php/8.2/fpm/pool.d/*.conf") out.emplace_back(path, text);
    return out;
  };
  auto pools = parse_fpm_pools(main, "/etc/php/8.2/fpm/php-fpm.conf", read);
  EXPECT_EQ(asked, std::vector<std::string>{"/etc/php/8.2/fpm/pool.d/*.conf"});
  ASSERT_EQ(pools.size(), 3u);
  // map order: shop.conf before www.conf
  EXPECT_EQ(pools[0].name, "shop");
  EXPECT_EQ(pools[0].listen, "/run/php/shop.sock");
  EXPECT_EQ(pools[0].max_children, 32u);
  EXPECT_EQ(pools[0].file, "/etc/php/8.2/fpm/pool.d/shop.conf");
  EXPECT_EQ(pools[1].name, "api");
  EXPECT_EQ(pools[1].listen, "127.0.0.1:9001");
  EXPECT_EQ(pools[1].max_children, 8u);
  EXPECT_EQ(pools[2].name, "www");
  EXPECT_EQ(pools[2].listen, "/run/php/php8.2-fpm.sock");
  EXPECT_EQ(pools[2].max_children, 5u);
}

TEST(PhpFpmPools, RelativeIncludesAreRelativeToTheFileAndDepthIsBounded) {
  std::vector<std::string> asked;
  auto read = [&](const std::string& pattern) {
    asked.push_back(pattern);
    // Every file includes itself again: the depth bound ends it.
    return std::vector<std::pair<std::string, std::string>>{
        {"/srv/fpm/again.conf", "include = again.conf\n"}};
  };
  auto pools = parse_fpm_pools("include = pools/*.conf\n", "/srv/fpm/main.conf", read);
  EXPECT_TRUE(pools.empty());
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked.front(), "/srv/fpm/pools/*.conf");
  EXPECT_EQ(asked[1], "/srv/fpm/again.conf");
  EXPECT_LE(asked.size(), 5u);
}

TEST(PhpFpmPools, KeysOutsideAPoolAndBadNumbersAreIgnored) {
  auto pools = parse_fpm_pools(R"(listen = /ignored.sock
pm.max_children = 9
[global]
listen = /also-ignored.sock
[p]
listen = /p.sock
pm.max_children = lots
)",
                               "/x.conf", nullptr);
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].listen, "/p.sock");
  EXPECT_EQ(pools[0].max_children, 0u);
}

TEST(PhpFpmPools, ListenMatchesTheSameEndpointOrAWildcardOnThePort) {
  EXPECT_TRUE(fpm_listen_matches("127.0.0.1:9000", server("127.0.0.1:9000")));
  EXPECT_TRUE(fpm_listen_matches("9000", server("127.0.0.1:9000")));  // every address
  EXPECT_TRUE(fpm_listen_matches("0.0.0.0:9000", server("localhost:9000")));
  EXPECT_TRUE(fpm_listen_matches("[::]:9000", server("[::1]:9000")));
  EXPECT_TRUE(fpm_listen_matches("[::1]:9000", server("[::1]:9000")));
  EXPECT_FALSE(fpm_listen_matches("127.0.0.1:9001", server("127.0.0.1:9000")));
  EXPECT_FALSE(fpm_listen_matches("127.0.0.2:9000", server("127.0.0.1:9000")));
  EXPECT_FALSE(fpm_listen_matches("/run/php/fpm.sock", server("127.0.0.1:9000")));
  EXPECT_TRUE(fpm_listen_matches("/run/php/fpm.sock", server("unix:/run/php/fpm.sock")));
  EXPECT_FALSE(fpm_listen_matches("/run/php/other.sock", server("unix:/run/php/fpm.sock")));
  EXPECT_FALSE(fpm_listen_matches("", server("unix:/run/php/fpm.sock")));
  EXPECT_FALSE(fpm_listen_matches("not an address", server("127.0.0.1:9000")));
}

TEST(PhpFpmPools, UnixSocketsMatchAsTheSameFileThroughALink) {
  char dir[] = "/tmp/fpm-pools-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string real = std::string(dir) + "/real";
  std::string link = std::string(dir) + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  std::string socket_path = real + "/fpm.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_TRUE(fpm_listen_matches(link + "/fpm.sock", server("unix:" + socket_path)));
  EXPECT_FALSE(fpm_listen_matches(link + "/other.sock", server("unix:" + socket_path)));
  close(fd);
  unlink(socket_path.c_str());
  unlink(link.c_str());
  rmdir(real.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace peregrine::config
