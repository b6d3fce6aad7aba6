#include "core/address_text.h"

#include <gtest/gtest.h>
#include <sys/un.h>

namespace peregrine {
namespace {

TEST(AddressText, Ipv4Ipv6AndUnixClients) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(8080);
  inet_pton(AF_INET, "192.0.2.10", &v4.sin_addr);
  AddressText a(reinterpret_cast<sockaddr*>(&v4));
  EXPECT_EQ(a.ip_view(), "192.0.2.10");
  EXPECT_EQ(a.port_view(), "8080");

  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(443);
  inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr);
  AddressText b(reinterpret_cast<sockaddr*>(&v6));
  EXPECT_EQ(b.ip_view(), "2001:db8::1");
  EXPECT_EQ(b.port_view(), "443");

  sockaddr_un un{};
  un.sun_family = AF_UNIX;  // an unnamed client socket, as accept() reports it
  AddressText c(reinterpret_cast<sockaddr*>(&un));
  EXPECT_EQ(c.ip_view(), "unix:");
  EXPECT_EQ(c.port_view(), "");

  AddressText none(nullptr);
  EXPECT_EQ(none.ip_view(), "");
}

}  // namespace
}  // namespace peregrine
