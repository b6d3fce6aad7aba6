#include "core/cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace peregrine {

namespace {

bool prefix_matches(const uint8_t* network, const uint8_t* address, unsigned prefix) {
  const unsigned whole = prefix / 8;
  if (std::memcmp(network, address, whole) != 0) return false;
  const unsigned rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (network[whole] & mask) == (address[whole] & mask);
}

constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

std::optional<Cidr> Cidr::parse(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<Cidr> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  const size_t slash = text.find('/');
  const std::string address(text.substr(0, slash));
  Cidr cidr;
  unsigned width = 0;
  if (inet_pton(AF_INET, address.c_str(), cidr.network) == 1) {
    cidr.family = AF_INET;
    width = 32;
  } else if (inet_pton(AF_INET6, address.c_str(), cidr.network) == 1) {
    cidr.family = AF_INET6;
    width = 128;
  } else {
    return fail("\"" + address + "\" is not an IPv4 or IPv6 address");
  }
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        prefix > width)
      return fail("the prefix length after '/' must be 0.." + std::to_string(width));
  }
  cidr.prefix = static_cast<uint8_t>(prefix);
  for (unsigned bit = prefix; bit < width; ++bit) {
    if (cidr.network[bit / 8] & (0x80 >> (bit % 8)))
      return fail("\"" + std::string(text) +
                  "\" has host bits set beyond its prefix; write the network address");
  }
  return cidr;
}

bool Cidr::contains_ip(int ip_family, const uint8_t* bytes) const {
  if (ip_family == AF_INET6 && family == AF_INET &&
      std::memcmp(bytes, kV4MappedPrefix, sizeof kV4MappedPrefix) == 0)
    return prefix_matches(network, bytes + 12, prefix);
  return ip_family == family && prefix_matches(network, bytes, prefix);
}

bool Cidr::contains(const sockaddr* address) const {
  if (!address) return false;
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return contains_ip(AF_INET, reinterpret_cast<const uint8_t*>(&in->sin_addr));
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    return contains_ip(AF_INET6, in6->sin6_addr.s6_addr);
  }
  return false;
}

std::string Cidr::to_string() const {
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(family, network, text, sizeof text);
  return std::string(text) + "/" + std::to_string(prefix);
}

}  // namespace peregrine
