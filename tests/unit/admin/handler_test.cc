#include "admin/handler.h"

#include <gtest/gtest.h>

namespace peregrine::admin {
namespace {

TEST(AdminHost, LocalNamesAndLiteralsOnly) {
  const std::vector<std::string> names = {"admin.example.com"};
  EXPECT_TRUE(host_allowed("localhost:9090", names));
  EXPECT_TRUE(host_allowed("LOCALHOST", names));
  EXPECT_TRUE(host_allowed("127.0.0.1:9090", names));
  EXPECT_TRUE(host_allowed("10.1.2.3", names));
  EXPECT_TRUE(host_allowed("[::1]:9090", names));
  EXPECT_TRUE(host_allowed("admin.example.com:443", names));
  EXPECT_TRUE(host_allowed("admin.example.com.", names));
  EXPECT_TRUE(host_allowed("", names));
  EXPECT_FALSE(host_allowed("evil.example", names));
  EXPECT_FALSE(host_allowed("localhost.evil.example", names));
  EXPECT_FALSE(host_allowed("127.0.0.1.evil.example", names));
  EXPECT_FALSE(host_allowed("1.2.3", names));
  EXPECT_FALSE(host_allowed("[::1", names));
}

TEST(AdminBearer, ExactTokenOnly) {
  const std::string token = "0123456789abcdef0123";
  EXPECT_TRUE(bearer_matches("Bearer 0123456789abcdef0123", token));
  EXPECT_TRUE(bearer_matches("bearer  0123456789abcdef0123 ", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef012", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef01234", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef0124", token));
  EXPECT_FALSE(bearer_matches("Basic 0123456789abcdef0123", token));
  EXPECT_FALSE(bearer_matches("0123456789abcdef0123", token));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
}

}  // namespace
}  // namespace peregrine::admin
