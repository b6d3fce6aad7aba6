// IP networks in CIDR notation, for the rules that trust or refuse clients by address: allow and
// deny lists, the proxies whose X-Forwarded-For is believed, PROXY protocol senders.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peregrine {

struct Cidr {
  int family = AF_UNSPEC;  // AF_INET or AF_INET6
  uint8_t network[16]{};   // the network address, host bits cleared (4 bytes used for IPv4)
  uint8_t prefix = 0;      // 0..32 or 0..128

  // "192.0.2.0/24", "2001:db8::/32", or a bare address (a /32 or /128 network). Host bits set
  // in the address are an error ("10.0.0.1/8" is almost always a typo for a host or a network),
  // as are a prefix past the family's width and anything inet_pton refuses.
  static std::optional<Cidr> parse(std::string_view text, std::string* error);

  // An IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack socket reports) is matched as
  // the IPv4 address it carries. Unix-socket peers and null match nothing.
  bool contains(const sockaddr* address) const;
  bool contains_ip(int family, const uint8_t* bytes) const;

  std::string to_string() const;  // canonical text, always with "/prefix"
};

}  // namespace peregrine
