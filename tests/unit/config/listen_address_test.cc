#include "config/listen_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

namespace peregrine::config {
namespace {

struct Parsed {
  bool ok = false;
  ListenAddress address;
  std::string error, hint;
};

Parsed parse(std::string_view text) {
  Parsed p;
  p.ok = parse_listen_address(text, &p.address, &p.error, &p.hint);
  return p;
}

std::string ipv4_of(const ListenAddress& a) {
  char buffer[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a.addr).sin_addr, buffer, sizeof buffer);
  return buffer;
}

TEST(ListenAddress, Ipv4AndPort) {
  Parsed p = parse("127.0.0.1:8080");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.addr.ss_family, AF_INET);
  EXPECT_EQ(p.address.addr_len, sizeof(sockaddr_in));
  EXPECT_EQ(ipv4_of(p.address), "127.0.0.1");
  EXPECT_EQ(endpoint_port(p.address.addr), 8080);
  EXPECT_EQ(p.address.text, "127.0.0.1:8080");
}

TEST(ListenAddress, Ipv6InBrackets) {
  Parsed p = parse("[::1]:8443");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.address.addr.ss_family, AF_INET6);
  EXPECT_EQ(p.address.addr_len, sizeof(sockaddr_in6));
  EXPECT_EQ(endpoint_port(p.address.addr), 8443);
  EXPECT_EQ(format_endpoint(p.address.addr), "[::1]:8443");
  ASSERT_TRUE(parse("[::]:80").ok);
  EXPECT_EQ(format_endpoint(parse("[::]:80").address.addr), "[::]:80");
}

TEST(ListenAddress, WildcardForms) {
  for (const char* text : {"*:80", ":80", "80", "0.0.0.0:80"}) {
    Parsed p = parse(text);
    ASSERT_TRUE(p.ok) << text << ": " << p.error;
    EXPECT_EQ(ipv4_of(p.address), "0.0.0.0") << text;
    EXPECT_EQ(endpoint_port(p.address.addr), 80) << text;
  }
}

TEST(ListenAddress, LocalhostIsLoopback) {
  Parsed p = parse("localhost:3000");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(ipv4_of(p.address), "127.0.0.1");
  EXPECT_EQ(endpoint_port(p.address.addr), 3000);
}

TEST(ListenAddress, PortZeroIsEphemeral) {
  Parsed p = parse("127.0.0.1:0");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(endpoint_port(p.address.addr), 0);
}

TEST(ListenAddress, BadPorts) {
  for (const char* text : {"127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:http", "99999",
                           "[::1]:1234567", "127.0.0.1:"}) {
    Parsed p = parse(text);
    EXPECT_FALSE(p.ok) << text;
    EXPECT_FALSE(p.error.empty()) << text;
  }
  EXPECT_EQ(parse("127.0.0.1:70000").error,
            "invalid port '70000' in listen address '127.0.0.1:70000'");
}

TEST(ListenAddress, Ipv6WithoutBracketsIsRejectedWithAHint) {
  Parsed p = parse("::1:8080");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.hint, "write IPv6 addresses in brackets: \"[::1]:8080\"");
}

TEST(ListenAddress, HostNamesAreNotResolved) {
  Parsed p = parse("example.com:80");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.error,
            "listen address 'example.com:80' names a host; only IP addresses and 'localhost' are "
            "accepted");
  EXPECT_EQ(p.hint, "use the interface's IP address, or \"*:80\" for every interface");
}

TEST(ListenAddress, MalformedAddresses) {
  for (const char* text : {"", "256.1.1.1:80", "1.2.3:80", "[::1:80", "[::1]", "[::1]80",
                           "[fe80::1%eth0]:80", "[zz::1]:80", "localhost"}) {
    EXPECT_FALSE(parse(text).ok) << text;
  }
}

TEST(ListenAddress, SameEndpoint) {
  Parsed a = parse("*:8080"), b = parse("0.0.0.0:8080"), c = parse("127.0.0.1:8080"),
         d = parse("[::]:8080");
  EXPECT_TRUE(same_endpoint(a.address.addr, b.address.addr));
  EXPECT_FALSE(same_endpoint(a.address.addr, c.address.addr));
  EXPECT_FALSE(same_endpoint(a.address.addr, d.address.addr));
  EXPECT_EQ(format_endpoint(c.address.addr), "127.0.0.1:8080");
}

TEST(ListenAddress, UnixSocket) {
  Parsed p = parse("unix:/run/peregrine.sock");
  ASSERT_TRUE(p.ok) << p.error;
  ASSERT_EQ(p.address.addr.ss_family, AF_UNIX);
  EXPECT_STREQ(reinterpret_cast<const sockaddr_un&>(p.address.addr).sun_path,
               "/run/peregrine.sock");
  EXPECT_EQ(p.address.addr_len, offsetof(sockaddr_un, sun_path) + 20);
  EXPECT_EQ(p.address.text, "unix:/run/peregrine.sock");
  EXPECT_EQ(endpoint_port(p.address.addr), 0);
  EXPECT_TRUE(same_endpoint(p.address.addr, parse("unix:/run/peregrine.sock").address.addr));
  EXPECT_FALSE(same_endpoint(p.address.addr, parse("unix:/run/other.sock").address.addr));

  Parsed relative = parse("unix:run/p.sock");
  EXPECT_FALSE(relative.ok);
  EXPECT_EQ(relative.error, "unix socket path in 'unix:run/p.sock' is not absolute");
  EXPECT_EQ(relative.hint,
            "write unix: followed by an absolute path, e.g. \"unix:/run/peregrine.sock\"");
}

TEST(ListenAddress, NoPortErrorsNameTheForms) {
  Parsed p = parse("localhost");
  EXPECT_EQ(p.error, "listen address 'localhost' has no port");
  EXPECT_NE(p.hint.find("\"unix:/run/peregrine.sock\""), std::string::npos) << p.hint;
  EXPECT_EQ(parse("[::1]:").error, "listen address '[::1]:' has no port");
  EXPECT_EQ(parse("[fe80::1%eth0]:80").hint,
            "scoped (link-local) addresses are not supported; use a global address or \"[::]\"");
}

}  // namespace
}  // namespace peregrine::config
