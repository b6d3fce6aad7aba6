#include "http/client_address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/address_text.h"

namespace peregrine::http {
namespace {

std::vector<Cidr> nets(std::initializer_list<const char*> texts) {
  std::vector<Cidr> out;
  for (const char* text : texts) out.push_back(*Cidr::parse(text, nullptr));
  return out;
}

// "ip port" of the resolved client, or "peer" when the peer is kept.
std::string resolve(std::vector<Header> headers, ForwardedHeader which,
                    const std::vector<Cidr>& trusted) {
  sockaddr_storage out;
  socklen_t len = 0;
  if (!forwarded_client(headers, which, trusted, &out, &len)) return "peer";
  AddressText text(reinterpret_cast<const sockaddr*>(&out));
  return std::string(text.ip_view()) + " " + std::string(text.port_view());
}

const auto kXff = ForwardedHeader::kXForwardedFor;
const auto kFwd = ForwardedHeader::kForwarded;

TEST(ClientAddress, RightMostUntrustedHopWins) {
  auto trusted = nets({"10.0.0.0/8"});
  EXPECT_EQ(resolve({{"X-Forwarded-For", "203.0.113.7"}}, kXff, trusted), "203.0.113.7 0");
  // A client-sent (spoofed) value left of the real client's address is ignored.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "1.1.1.1, 203.0.113.7, 10.0.0.2"}}, kXff, trusted),
            "203.0.113.7 0");
  EXPECT_EQ(resolve({{"x-forwarded-for", "1.1.1.1,203.0.113.7"}}, kXff, trusted), "203.0.113.7 0");
}

TEST(ClientAddress, AllTrustedGivesLeftMost) {
  auto trusted = nets({"10.0.0.0/8"});
  EXPECT_EQ(resolve({{"X-Forwarded-For", "10.1.1.1, 10.2.2.2"}}, kXff, trusted), "10.1.1.1 0");
}

TEST(ClientAddress, SeveralHeaderLinesAreOneList) {
  auto trusted = nets({"10.0.0.0/8"});
  EXPECT_EQ(resolve({{"X-Forwarded-For", "198.51.100.1"},
                     {"Accept", "*/*"},
                     {"X-Forwarded-For", "203.0.113.9, 10.0.0.5"}},
                    kXff, trusted),
            "203.0.113.9 0");
}

TEST(ClientAddress, GarbageStopsTheWalk) {
  auto trusted = nets({"10.0.0.0/8"});
  // Garbage right of everything: no client known, keep the peer.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "203.0.113.7, nonsense"}}, kXff, trusted), "peer");
  // Garbage a client sent before the proxy's own hop: the proxy's hop is the client.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "nonsense, 203.0.113.7"}}, kXff, trusted),
            "203.0.113.7 0");
  // Garbage before a trusted hop: the trusted hop is the best known.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "unknown, 10.0.0.3"}}, kXff, trusted), "10.0.0.3 0");
  EXPECT_EQ(resolve({{"X-Forwarded-For", ""}}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({{"X-Forwarded-For", " , ,"}}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({{"X-Forwarded-For", "999.1.1.1"}}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({{"X-Forwarded-For", "1.2.3.4:99999"}}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({{"X-Forwarded-For", "[::1"}}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({}, kXff, trusted), "peer");
  EXPECT_EQ(resolve({{"X-Real-IP", "1.2.3.4"}}, kXff, trusted), "peer");
}

TEST(ClientAddress, PortsAndIpv6) {
  auto trusted = nets({"10.0.0.0/8", "fd00::/8"});
  EXPECT_EQ(resolve({{"X-Forwarded-For", "203.0.113.7:4711"}}, kXff, trusted), "203.0.113.7 4711");
  EXPECT_EQ(resolve({{"X-Forwarded-For", "2001:db8::1, fd00::2"}}, kXff, trusted), "2001:db8::1 0");
  EXPECT_EQ(resolve({{"X-Forwarded-For", "[2001:db8::1]:443"}}, kXff, trusted), "2001:db8::1 443");
  // An IPv4-mapped hop matches an IPv4 network.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "203.0.113.7, ::ffff:10.0.0.1"}}, kXff, trusted),
            "203.0.113.7 0");
}

TEST(ClientAddress, ForwardedHeader) {
  auto trusted = nets({"10.0.0.0/8"});
  EXPECT_EQ(resolve({{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}}, kFwd, trusted),
            "192.0.2.60 0");
  EXPECT_EQ(resolve({{"Forwarded", R"(for="[2001:db8:cafe::17]:4711")"}}, kFwd, trusted),
            "2001:db8:cafe::17 4711");
  EXPECT_EQ(resolve({{"Forwarded", R"(For="192.0.2.43:47011", for=10.0.0.1)"}}, kFwd, trusted),
            "192.0.2.43 47011");
  // Spoofed element left of the real one.
  EXPECT_EQ(resolve({{"Forwarded", "for=1.1.1.1, for=198.51.100.17;proto=https"}}, kFwd, trusted),
            "198.51.100.17 0");
  // A quoted comma or semicolon in another parameter does not split the element.
  EXPECT_EQ(resolve({{"Forwarded", R"(for=198.51.100.17;by="a,b;c")"}}, kFwd, trusted),
            "198.51.100.17 0");
  // Elements without `for` are not hops.
  EXPECT_EQ(resolve({{"Forwarded", "for=198.51.100.17, proto=https"}}, kFwd, trusted),
            "198.51.100.17 0");
  // The other header is not read.
  EXPECT_EQ(resolve({{"X-Forwarded-For", "198.51.100.17"}}, kFwd, trusted), "peer");
}

TEST(ClientAddress, ForwardedObfuscatedIdentifiers) {
  auto trusted = nets({"10.0.0.0/8"});
  EXPECT_EQ(resolve({{"Forwarded", "for=unknown"}}, kFwd, trusted), "peer");
  EXPECT_EQ(resolve({{"Forwarded", "for=_hidden, for=10.0.0.9"}}, kFwd, trusted), "10.0.0.9 0");
  EXPECT_EQ(resolve({{"Forwarded", "for=203.0.113.1, for=_hidden"}}, kFwd, trusted), "peer");
  // An obfuscated port keeps the address.
  EXPECT_EQ(resolve({{"Forwarded", R"(for="203.0.113.1:_p1")"}}, kFwd, trusted), "203.0.113.1 0");
  EXPECT_EQ(resolve({{"Forwarded", R"(for="[::1)"}}, kFwd, trusted), "peer");
  EXPECT_EQ(resolve({{"Forwarded", R"(for="1.2.3.4)"}}, kFwd, trusted), "peer");
  EXPECT_EQ(resolve({{"Forwarded", "for=1.2.3.4;for=5.6.7.8"}}, kFwd, trusted), "peer");
}

TEST(ClientAddress, InAny) {
  auto trusted = nets({"10.0.0.0/8", "::1"});
  sockaddr_storage a;
  socklen_t len;
  ASSERT_TRUE(parse_node("10.9.9.9", &a, &len));
  EXPECT_TRUE(in_any(trusted, reinterpret_cast<sockaddr*>(&a)));
  ASSERT_TRUE(parse_node("::1", &a, &len));
  EXPECT_TRUE(in_any(trusted, reinterpret_cast<sockaddr*>(&a)));
  ASSERT_TRUE(parse_node("11.0.0.1", &a, &len));
  EXPECT_FALSE(in_any(trusted, reinterpret_cast<sockaddr*>(&a)));
  EXPECT_FALSE(in_any({}, reinterpret_cast<sockaddr*>(&a)));
}

}  // namespace
}  // namespace peregrine::http
