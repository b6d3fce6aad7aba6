#include "core/cidr.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

namespace peregrine {
namespace {

sockaddr_storage address(const char* text) {
  sockaddr_storage storage{};
  auto* in = reinterpret_cast<sockaddr_in*>(&storage);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text, &in6->sin6_addr), 1) << text;
    in6->sin6_family = AF_INET6;
  }
  return storage;
}

bool contains(const char* cidr, const char* ip) {
  std::string error;
  auto parsed = Cidr::parse(cidr, &error);
  EXPECT_TRUE(parsed) << cidr << ": " << error;
  sockaddr_storage storage = address(ip);
  return parsed && parsed->contains(reinterpret_cast<const sockaddr*>(&storage));
}

TEST(Cidr, MatchesIpv4Networks) {
  EXPECT_TRUE(contains("10.0.0.0/8", "10.255.1.2"));
  EXPECT_FALSE(contains("10.0.0.0/8", "11.0.0.1"));
  EXPECT_TRUE(contains("192.168.1.128/25", "192.168.1.200"));
  EXPECT_FALSE(contains("192.168.1.128/25", "192.168.1.127"));
  EXPECT_TRUE(contains("0.0.0.0/0", "203.0.113.9"));
  EXPECT_TRUE(contains("127.0.0.1", "127.0.0.1"));
  EXPECT_FALSE(contains("127.0.0.1", "127.0.0.2"));
}

TEST(Cidr, MatchesIpv6Networks) {
  EXPECT_TRUE(contains("2001:db8::/32", "2001:db8:1::5"));
  EXPECT_FALSE(contains("2001:db8::/32", "2001:db9::1"));
  EXPECT_TRUE(contains("::1", "::1"));
  EXPECT_TRUE(contains("fe80::/10", "febf::1"));
  EXPECT_FALSE(contains("fe80::/10", "fec0::1"));
  EXPECT_FALSE(contains("::/0", "10.0.0.1"));  // families differ
}

TEST(Cidr, MatchesIpv4MappedAddressesAsIpv4) {
  EXPECT_TRUE(contains("10.0.0.0/8", "::ffff:10.1.2.3"));
  EXPECT_FALSE(contains("10.0.0.0/8", "::ffff:11.1.2.3"));
}

TEST(Cidr, MatchesNothingForUnixPeersOrNull) {
  auto any = Cidr::parse("0.0.0.0/0", nullptr);
  ASSERT_TRUE(any);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  EXPECT_FALSE(any->contains(reinterpret_cast<const sockaddr*>(&un)));
  EXPECT_FALSE(any->contains(nullptr));
}

TEST(Cidr, RefusesMalformedText) {
  for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/8x", "10.0.0/8",
                          "example.com", "10.0.0.1/8", "2001:db8::1/32", "10.0.0.0/-1"}) {
    std::string error;
    EXPECT_FALSE(Cidr::parse(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Cidr, PrintsCanonicalText) {
  EXPECT_EQ(Cidr::parse("2001:0db8::/32", nullptr)->to_string(), "2001:db8::/32");
  EXPECT_EQ(Cidr::parse("127.0.0.1", nullptr)->to_string(), "127.0.0.1/32");
}

}  // namespace
}  // namespace peregrine
