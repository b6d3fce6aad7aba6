// The parser shared by listen and upstream addresses: the rules that differ by role, and the
// ones that must not.
#include "config/address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

namespace peregrine::config {
namespace {

struct Result {
  bool ok;
  SocketAddress address;
  std::string error, hint;
};

Result parse(std::string_view text, AddressRole role) {
  Result r{};
  r.ok = parse_socket_address(text, role, &r.address, &r.error, &r.hint);
  return r;
}

TEST(Address, Port) {
  uint16_t port = 1;
  EXPECT_TRUE(parse_port("0", true, &port));
  EXPECT_EQ(port, 0);
  EXPECT_FALSE(parse_port("0", false, &port));
  EXPECT_TRUE(parse_port("65535", false, &port));
  EXPECT_EQ(port, 65535);
  for (const char* bad : {"", "65536", "-1", "+80", " 80", "80 ", "123456", "0x50", "http"})
    EXPECT_FALSE(parse_port(bad, true, &port)) << bad;
  EXPECT_TRUE(parse_port("00080", false, &port));
  EXPECT_EQ(port, 80);
}

TEST(Address, BothRolesAgreeOnOrdinaryEndpoints) {
  for (const char* text : {"127.0.0.1:9000", "[::1]:8080", "localhost:80", "unix:/run/a.sock"}) {
    Result listen = parse(text, AddressRole::kListen);
    Result upstream = parse(text, AddressRole::kUpstream);
    ASSERT_TRUE(listen.ok) << text << ": " << listen.error;
    ASSERT_TRUE(upstream.ok) << text << ": " << upstream.error;
    EXPECT_EQ(listen.address.len, upstream.address.len) << text;
    EXPECT_EQ(0, std::memcmp(&listen.address.addr, &upstream.address.addr, listen.address.len))
        << text;
  }
  Result v6 = parse("[::1]:8080", AddressRole::kUpstream);
  const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(v6.address.addr);
  EXPECT_EQ(sin6.sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(sin6.sin6_port), 8080);
  EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&sin6.sin6_addr));
  Result local = parse("localhost:80", AddressRole::kListen);
  EXPECT_EQ(reinterpret_cast<const sockaddr_in&>(local.address.addr).sin_addr.s_addr,
            htonl(INADDR_LOOPBACK));
}

TEST(Address, WildcardsAndPortZeroAreForListening) {
  for (const char* text : {"*:80", ":80", "80", "0.0.0.0:80", "[::]:80", "127.0.0.1:0"}) {
    EXPECT_TRUE(parse(text, AddressRole::kListen).ok) << text;
    EXPECT_FALSE(parse(text, AddressRole::kUpstream).ok) << text;
  }
  EXPECT_EQ(parse("[::]:80", AddressRole::kUpstream).error,
            "upstream address '[::]:80' is the unspecified address");
}

TEST(Address, SameMistakesSameWordsInBothRoles) {
  for (AddressRole role : {AddressRole::kListen, AddressRole::kUpstream}) {
    const std::string what = role == AddressRole::kListen ? "listen address" : "upstream address";
    EXPECT_EQ(parse("::1:80", role).error,
              what + " '::1:80' looks like an IPv6 address without brackets");
    EXPECT_EQ(parse("[::1:80", role).error, what + " '[::1:80' has '[' without ']'");
    EXPECT_EQ(parse("[::1]", role).error, what + " '[::1]' has no port");
    EXPECT_EQ(parse("1.2.3.4:", role).error, what + " '1.2.3.4:' has no port");
    EXPECT_EQ(parse("1.2.3:80", role).error,
              "invalid IPv4 address '1.2.3' in " + what + " '1.2.3:80'");
    EXPECT_EQ(parse("a b:80", role).error,
              what + " 'a b:80' contains spaces or control characters");
    EXPECT_EQ(parse("", role).error, "empty " + what);
    EXPECT_EQ(parse("unix:/a b", role).error,
              "unix socket path in 'unix:/a b' contains spaces or control characters");
  }
}

TEST(Address, SpaceOrControl) {
  EXPECT_FALSE(has_space_or_control("127.0.0.1:80"));
  EXPECT_TRUE(has_space_or_control("a\tb"));
  EXPECT_TRUE(has_space_or_control(std::string_view("a\0b", 3)));
  EXPECT_TRUE(has_space_or_control("a\x7f"));
}

}  // namespace
}  // namespace peregrine::config
