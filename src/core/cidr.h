// IP networks in CIDR notation, for the rules that trust or refuse clients by address: allow and
// deny lists, the proxies whose X-Forwarded-For is believed, PROXY protocol senders.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
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
  bool contains(const sockaddr* address) const {
    if (!address) return false;
    if (address->sa_family == AF_INET)
      return contains_ip(AF_INET, reinterpret_cast<const uint8_t*>(
                                      &reinterpret_cast<const sockaddr_in*>(address)->sin_addr));
    if (address->sa_family == AF_INET6)
      return contains_ip(AF_INET6,
                         reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr.s6_addr);
    return false;
  }
  bool contains_ip(int ip_family, const uint8_t* bytes) const {
    static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (ip_family == AF_INET6 && family == AF_INET) {
      if (std::memcmp(bytes, kV4Mapped, sizeof kV4Mapped) != 0) return false;
      bytes += sizeof kV4Mapped;
      ip_family = AF_INET;
    }
    if (ip_family != family) return false;
    uint64_t word[2] = {0, 0};
    std::memcpy(word, bytes, family == AF_INET ? 4 : 16);
    return (word[0] & masks_[0]) == words_[0] && (word[1] & masks_[1]) == words_[1];
  }

  std::string to_string() const;  // canonical text, always with "/prefix"

 private:
  // The network and its mask in the address's own byte order, as one 32-bit word (IPv4, in
  // words_[0]) or two 64-bit words (IPv6): a match is an AND and a compare per word. Every
  // request of a route with allow/deny rules asks each rule, so this is per-request code.
  uint64_t words_[2]{};
  uint64_t masks_[2]{};
};

}  // namespace peregrine
